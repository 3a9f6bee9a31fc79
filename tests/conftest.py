"""Shared fixtures: a temporary copy of the project, and one smoke run of the whole pipeline that every
end-to-end test reads (it is the expensive part of the suite, so it runs once per session)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

from rnnrepro.configuration import REPO_ROOT

BIN = Path(sys.executable).parent
# metrics.json entries that differ between two runs of the same cell (clock, machine and its load, checkout)
TIMING_KEYS = {"wall_seconds", "train_seconds", "seconds_per_1000_sequences", "finished_at", "git_sha", "machine"}
PROJECT_PARTS = ["Snakefile", "workflow", "config", "notebooks", "profiles", "src"]


# How the suite's pytest-xdist workers share the work (pyproject.toml runs `-n 3`). Every test that
# reads the shared smoke run (the fixture smoke_project below) is in one of SMOKE_FILES, and those files
# are one unit of work: the worker that makes the smoke run goes on with them, and no other worker sits
# waiting for it. The second starts with the SLURM tests (minutes of real SLURM jobs, mostly waiting for
# the SLURM plugin's status checks; they ask for the smoke run only at the end, to compare numbers). The
# third takes the other files, each a unit of its own (a file's tests share module fixtures), and each
# worker takes the next file when it is free. Three workers on two cores: the SLURM worker is mostly idle.
# (pytest-xdist 3.8's own `--dist loadgroup` cannot do this with pytest 9: it renames the tests through
# an attribute pytest 9 no longer reads.)
SMOKE_UNIT = "the smoke run and its tests"
SMOKE_FILES = {f"tests/test_{name}.py" for name in ("claims", "lrn", "lru", "nlstm", "report", "workflow")}
FIRST_FILES = [*sorted(SMOKE_FILES), "tests/test_slurm.py"]


def unit_of(nodeid: str) -> str:
    in_file = nodeid.split("::")[0]
    return SMOKE_UNIT if in_file in SMOKE_FILES else in_file


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class SmokeFirstScheduling(LoadScopeScheduling):
        """Units of work as unit_of says, in collection order (`--no-loadscope-reorder`). A worker gets its
        next unit when one test of its last is left (it holds that one until it knows what comes next),
        not earlier: work queued behind the minutes of SLURM tests would wait there while another worker
        is free."""

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _reschedule(self, node) -> None:
            if not node.shutting_down and self.workqueue and self._pending_of(self.assigned_work[node]) >= 2:
                return
            super()._reschedule(node)

    return SmokeFirstScheduling(config, log)


# The smoke run with the tests that read it, and the SLURM tests, are the suite's two long chains, so
# every other test yields the CPU to them: a worker lowers its own priority (and its children's) before
# its first test outside those two units. The total work is the same; the chains end sooner, and the
# rest fills the cores around them.
NICE_OUTSIDE_CHAINS = 10


def pytest_runtest_setup(item):
    if unit_of(item.nodeid) not in (SMOKE_UNIT, "tests/test_slurm.py") and os.nice(0) < NICE_OUTSIDE_CHAINS:
        os.nice(NICE_OUTSIDE_CHAINS - os.nice(0))


def pytest_collection_modifyitems(config, items):
    strays = [item.nodeid for item in items
              if "smoke_project" in item.fixturenames and unit_of(item.nodeid) != SMOKE_UNIT]
    if strays:
        raise pytest.UsageError(f"tests that read the smoke run must be in tests/conftest.py's SMOKE_FILES "
                                f"(else their worker waits for it): {', '.join(strays)}")

    def rank(item):
        in_file = item.nodeid.split("::")[0]
        reads_smoke = "smoke_project" in item.fixturenames  # first, so that the smoke run starts at once
        return not reads_smoke, FIRST_FILES.index(in_file) if in_file in FIRST_FILES else len(FIRST_FILES)

    items.sort(key=rank)  # stable: pytest's order within each file


def copy_project(dest: Path) -> Path:
    """The files a pipeline run needs, copied (not the results, data or .snakemake of this checkout)."""
    for part in PROJECT_PARTS:
        source = REPO_ROOT / part
        if source.is_dir():
            shutil.copytree(source, dest / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(source, dest / part)
    return dest


def snakemake(cwd: Path, *args: str, timeout: int = 1800) -> subprocess.CompletedProcess:
    """Run this environment's snakemake in ``cwd`` with a minimal, predictable environment."""
    return subprocess.run([str(BIN / "snakemake"), *args], cwd=cwd, capture_output=True, text=True,
                          env={"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(cwd)}, timeout=timeout)


def python_in(project: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    """`python ARGS` in a project copy, importing that copy's rnnrepro."""
    env = {**os.environ, "PYTHONPATH": str(project / "src")}
    return subprocess.run([sys.executable, *args], cwd=project, capture_output=True, text=True, env=env,
                          timeout=900, **kwargs)


def train_cli(run_dir: Path, cfg: dict, **popen) -> subprocess.Popen:
    """`python -m rnnrepro.train` on one resolved cell config, in the background, on one CPU thread."""
    return subprocess.Popen([sys.executable, "-m", "rnnrepro.train", "--run-dir", str(run_dir),
                             "--config", json.dumps(cfg), "--device", "cpu", "--threads", "1"],
                            stderr=subprocess.PIPE, text=True, **popen)


def finished(proc: subprocess.Popen) -> tuple[int, str]:
    """Exit code and stderr of a training process."""
    _, err = proc.communicate(timeout=600)
    return proc.returncode, err


def numbers(metrics_file: Path) -> dict:
    """A run's metrics without the entries that differ between runs of the same cell."""
    return {k: v for k, v in json.loads(metrics_file.read_text()).items() if k not in TIMING_KEYS}


@pytest.fixture(scope="session")
def smoke_project(tmp_path_factory, worker_id) -> Path:
    """A project copy in which `snakemake --profile profiles/smoke all` has run successfully.

    The suite runs on several pytest-xdist workers (`make test`); the smoke run is made once for all, in
    the folder they share, by whichever asks first (any other waits on a file lock)."""
    if worker_id == "master":  # plain `pytest`, no workers
        return _run_smoke(tmp_path_factory.mktemp("smoke"))
    shared = tmp_path_factory.getbasetemp().parent
    with FileLock(str(shared / "smoke.lock")):
        project, failed = shared / "smoke", shared / "smoke.failed"
        if failed.exists():
            pytest.fail(f"the shared smoke run failed (in another worker):\n{failed.read_text()}")
        if not (shared / "smoke.done").exists():
            project.mkdir()
            try:
                _run_smoke(project)
            except BaseException as error:
                failed.write_text(str(error))
                raise
            (shared / "smoke.done").touch()
    return project


def _run_smoke(project: Path) -> Path:
    copy_project(project)
    result = snakemake(project, "--profile", "profiles/smoke", "all")
    assert result.returncode == 0, result.stderr[-5000:]
    return project
