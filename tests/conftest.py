"""Shared fixtures: a temporary copy of the project, and one smoke run of the whole pipeline that every
end-to-end test reads (it is the expensive part of the suite, so it runs once per session)."""

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from filelock import FileLock

# One CPU thread for torch (and the BLAS libraries) in the test processes, read when torch is first
# imported: the workers and the pipelines they start share the machine's cores, and two OpenMP
# threads a process only wait on each other there (the cell, training and evaluation tests took 26 s
# instead of 36 on the 2-core machine, and less CPU). Set it yourself to test with more.
os.environ.setdefault("OMP_NUM_THREADS", "1")

from rnnrepro.configuration import REPO_ROOT

BIN = Path(sys.executable).parent
# metrics.json entries that differ between two runs of the same cell (clock, machine and its load, checkout)
TIMING_KEYS = {"wall_seconds", "train_seconds", "seconds_per_1000_sequences", "finished_at", "git_sha", "machine"}
PROJECT_PARTS = ["Snakefile", "workflow", "config", "notebooks", "profiles", "src"]


# The files that take longest, longest first (pyproject.toml's addopts give each worker whole files):
# collected first, so that their workers start on them at once and the short files fill the time beside
# them and at the end (a long file last would run alone at the end).
LONG_CHAINS = ["tests/test_smoke_run.py", "tests/test_slurm.py", "tests/test_claims.py", "tests/test_training.py",
               "tests/test_custom_cell.py", "tests/test_records.py", "tests/test_workflow.py",
               "tests/test_readme_commands.py", "tests/test_data.py"]


# The first two files are chains of waits: every test of the smoke run's file waits for that run, and
# the SLURM tests wait on a scheduler polled at intervals. A worker's processes yield to them (a lower
# CPU priority, inherited by what they start) from the first test of another file that worker runs, so
# that the smoke run's jobs and the SLURM daemons get the cores when they can use them and the other
# tests fill the rest.
CHAINS_OF_WAITS = LONG_CHAINS[:2]
BESIDE_THE_CHAINS = 10  # nice increment


def pytest_runtest_setup(item):
    if item.nodeid.split("::")[0] not in CHAINS_OF_WAITS and not getattr(pytest_runtest_setup, "yielded", False):
        pytest_runtest_setup.yielded = True
        os.nice(BESIDE_THE_CHAINS)


@pytest.fixture(autouse=True)
def no_exported_custom_cells(monkeypatch):
    """Each test starts without cells of your own exported to the environment (a command run in this
    process exports those of its --configfile for the jobs it starts) and leaves none behind."""
    from rnnrepro.custom_cells import ENVIRONMENT_VARIABLE

    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "")


def pytest_collection_modifyitems(items):
    def rank(item):
        in_file = item.nodeid.split("::")[0]
        return LONG_CHAINS.index(in_file) if in_file in LONG_CHAINS else len(LONG_CHAINS)

    items.sort(key=rank)  # stable: every file keeps its own order


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


RENDERED_LINE = re.compile(r"\[rnnrepro\] (\S+) (\S+): (.*)")


def render_status(stdout: str) -> dict:
    """``records render``'s line per artifact as ``{"<budget>:<study>/<artifact>": state}``; a rendered
    one's time ("rendered in 4.2 s") left out of its state."""
    found = {}
    for line in stdout.splitlines():
        match = RENDERED_LINE.fullmatch(line)
        if match:
            budget, key, state = match.groups()
            found[f"{budget}:{key}"] = re.sub(r"^rendered in \d+\.\d s$", "rendered", state)
    return found


def train_cli(run_dir: Path, cfg: dict, **popen) -> subprocess.Popen:
    """`python -m rnnrepro.train` on one resolved cell config, in the background, on one CPU thread."""
    return subprocess.Popen([sys.executable, "-m", "rnnrepro.train", "--run-dir", str(run_dir),
                             "--config", json.dumps(cfg), "--device", "cpu", "--threads", "1"],
                            stderr=subprocess.PIPE, text=True, **popen)


def run_here(main, args: list[str]) -> subprocess.CompletedProcess:
    """A command's ``main(args)`` run in this process, its stdout and stderr captured: the command as
    its own process would run it, without a new interpreter importing torch again. For runs a test
    neither signals nor kills. An exception ``main`` lets through exits 1 with its traceback, as it
    would in its own process. The environment variables ``main`` sets end with it; what else it sets
    process-wide stays set (``--threads`` is torch's thread count for the rest of this pytest worker)."""
    from rnnrepro import console

    out, err = io.StringIO(), io.StringIO()
    environment = dict(os.environ)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except Exception:
            traceback.print_exc()
            code = 1
        finally:  # main pointed the package's log handler at this call's stderr: take it away again
            console.stop_logging()
            # and what it exported for the jobs it starts (the cells of a --configfile) ends with it, as
            # its own process's environment would
            os.environ.clear()
            os.environ.update(environment)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def train_here(run_dir: Path, cfg: dict) -> tuple[int, str]:
    """Exit code and stderr of `python -m rnnrepro.train` on one resolved cell config, on one CPU
    thread, run in this process (``run_here``; ``train_cli`` starts its own)."""
    from rnnrepro.train.__main__ import main

    result = run_here(main, ["--run-dir", str(run_dir), "--config", json.dumps(cfg), "--device", "cpu",
                             "--threads", "1"])
    return result.returncode, result.stderr


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
