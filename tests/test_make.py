"""The README's two commands (`make smoke`, `make test`) and `make setup` from a folder whose path has a
space ("my dir/rnnrepro"), where make used to split the virtual environment's absolute path and stop
with "make: .../my: No such file or directory" (Error 127). The programs of the virtual environment are
stand-ins that record their calls (no installs, no training); a real Snakemake job from that folder,
run by an interpreter whose path has a space too and without the environment on PATH, checks that the
workflow's jobs find their interpreter and that their shell commands quote both. `make setup` with a
Python older than the pins need, and `make clean`, which removes one budget's files and says which."""

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BIN, copy_project

from rnnrepro.configuration import REPO_ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")

# `python3 -m venv DIR` that makes DIR/bin/python and DIR/bin/snakemake: each appends its name and
# arguments to the file $CALLS. `python3 -c CODE` (the version check) is this Python's.
FAKE_PYTHON3 = """#!/bin/sh
[ "$1" = "-c" ] && exec "$REAL_PYTHON" "$@"
[ "$1 $2" = "-m venv" ] || exit 2
mkdir -p "$3/bin"
for program in python snakemake; do
    printf '#!/bin/sh\\necho "%s $*" >> "$CALLS"\\n' "$program" > "$3/bin/$program"
    chmod +x "$3/bin/$program"
done
"""


@pytest.fixture
def spaced_project(tmp_path) -> Path:
    project = tmp_path / "my dir" / "rnnrepro"
    project.mkdir(parents=True)
    for name in ("Makefile", "requirements.txt", "pyproject.toml"):
        shutil.copy(REPO_ROOT / name, project / name)
    return project


def make(project: Path, *args: str, calls: Path) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "HOME": str(project), "CALLS": str(calls), "REAL_PYTHON": sys.executable}
    return subprocess.run(["make", *args], cwd=project, capture_output=True, text=True, env=env, timeout=60)


def test_make_quotes_the_path_of_a_folder_with_a_space(spaced_project, tmp_path):
    calls = tmp_path / "calls.txt"
    planned = make(spaced_project, "-n", "setup", calls=calls)
    assert planned.returncode == 0, planned.stderr
    assert f'"{spaced_project}/.venv/bin/python" -m pip install' in planned.stdout

    fake_python3 = tmp_path / "python3"
    fake_python3.write_text(FAKE_PYTHON3)
    fake_python3.chmod(fake_python3.stat().st_mode | stat.S_IXUSR)
    for target in ("setup", "test", "smoke"):
        done = make(spaced_project, target, f"PYTHON3={fake_python3}", calls=calls)
        assert done.returncode == 0, f"make {target}: {done.stderr}"
    assert (spaced_project / ".venv" / ".installed").exists()
    assert calls.read_text().splitlines() == [
        "python -m pip install --disable-pip-version-check -q --no-compile -r requirements.txt",
        "python -c import compileall, sysconfig; compileall.compile_dir(sysconfig.get_paths()['purelib'], quiet=2, workers=0)",
        "python -m pip install --disable-pip-version-check -q --no-deps -e .",
        "python -m pytest",
        "snakemake --profile profiles/smoke all",
        "snakemake --profile profiles/smoke --report results/smoke/report.html all",
    ]


def test_setup_with_an_older_python_says_which_it_needs(spaced_project, tmp_path):
    """The pinned numpy and pandas need Python 3.11: said before a venv is made or pip runs."""
    old_python = tmp_path / "python3.10"
    old_python.write_text(f"""#!/bin/sh
exec "{sys.executable}" -c "import sys; sys.version_info = (3, 10, 13, 'final', 0); sys.version = '3.10.13'; exec(sys.argv[1])" "$2"
""")
    old_python.chmod(old_python.stat().st_mode | stat.S_IXUSR)
    done = make(spaced_project, "setup", f"PYTHON3={old_python}", calls=tmp_path / "calls.txt")
    assert done.returncode != 0
    assert (f"make setup: {old_python} is Python 3.10.13; the pinned packages need Python 3.11 or newer: name one, "
            "e.g. make setup PYTHON3=python3.11") in done.stderr
    assert not (spaced_project / ".venv").exists()


@pytest.mark.slow
def test_workflow_jobs_run_from_a_folder_with_a_space(tmp_path):
    """A fetch and a prepare job, from a project folder whose path has a space, run by a Snakemake whose
    interpreter's path has one too ("py env/venv/bin/python"), with a PATH that lacks that environment
    (a .venv not activated): the jobs' `python` is Snakemake's own, and every path is quoted."""
    project = tmp_path / "my dir" / "rnnrepro"
    project.mkdir(parents=True)
    copy_project(project)
    (tmp_path / "py env").mkdir()
    (tmp_path / "py env" / "venv").symlink_to(BIN.parent, target_is_directory=True)
    python = tmp_path / "py env" / "venv" / "bin" / BIN.joinpath("python").name
    result = subprocess.run([str(python), "-m", "snakemake", "--profile", "profiles/smoke", "--cores", "1",
                             "data/processed/synth_ptb/stats.json"], cwd=project, capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(project)}, timeout=300)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert (project / "data/processed/synth_ptb/stats.json").exists()


def test_make_clean_removes_one_budget_and_says_what(spaced_project, tmp_path):
    shutil.copytree(REPO_ROOT / "src", spaced_project / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    tree = ["results/smoke/runs/pru/x/metrics.json", "logs/smoke/train/x.log", "data/processed/synth_ptb/train.txt",
            "data/raw/synth_ptb/synth_ptb.tgz", "results/cpu/runs/pru/x/metrics.json", "logs/cpu/train/x.log",
            "results/runs/pru/ptb/x/metrics.json", "results/tables/pru_table1.csv", "logs/train/x.log",
            "logs/data/prepare_ptb.log", "data/processed/ptb/train.txt", "records/cpu/runs/x/metrics.json",
            "results/claims_by_budget.csv"]
    for path in tree:
        (spaced_project / path).parent.mkdir(parents=True, exist_ok=True)
        (spaced_project / path).write_text("x")

    def left():
        return sorted(path for path in tree if (spaced_project / path).exists())

    smoke = make(spaced_project, "clean", f"PYTHON3={sys.executable}", calls=tmp_path / "calls.txt")
    assert smoke.returncode == 0, smoke.stderr
    assert ("budget smoke: removing results/smoke, logs/smoke, data/raw/synth_ptb, data/processed/synth_ptb"
            in smoke.stdout)
    assert "kept: the results of paper, cpu" in smoke.stdout
    assert left() == sorted(tree[4:])
    paper = make(spaced_project, "clean", "BUDGET=paper", f"PYTHON3={sys.executable}", calls=tmp_path / "calls.txt")
    assert paper.returncode == 0, paper.stderr
    assert "budget paper: removing results/runs, results/tables, logs/train" in paper.stdout
    assert left() == sorted(tree[4:6] + tree[9:])  # the cpu budget, the real corpora, records, the side-by-side
    again = make(spaced_project, "clean", "BUDGET=paper", f"PYTHON3={sys.executable}", calls=tmp_path / "calls.txt")
    assert "budget paper: nothing to remove (budgets with results here: cpu" in again.stdout
    # a folder of the default budget's tree is no budget: `BUDGET=runs` would be results/runs
    (spaced_project / "results/runs/x").mkdir(parents=True)
    for name in ("runs", "tables", "../results", ""):
        refused = make(spaced_project, "clean", f"BUDGET={name}", f"PYTHON3={sys.executable}",
                       calls=tmp_path / "calls.txt")
        assert refused.returncode != 0 and "is not a budget name" in refused.stderr, name
    assert (spaced_project / "results/runs/x").is_dir()


def test_make_clean_leaves_a_cell_in_training_alone_and_names_it(tmp_path, capsys):
    """A trainer holds its cell's trainer.lock while it runs: cleaning its budget removes everything else
    and names the cell, and fails, instead of deleting the folder under the trainer."""
    import fcntl
    import os

    from rnnrepro.clean import main

    busy = tmp_path / "results/smoke/runs/pru/synth_ptb/lstm/frac100/seed1"
    idle = tmp_path / "results/smoke/runs/pru/synth_ptb/pru/frac100/seed1"
    for folder in (busy, idle):
        folder.mkdir(parents=True)
        (folder / "checkpoint.pt").write_text("x")
        (folder / "trainer.lock").write_text("")
    (tmp_path / "results/smoke/tables").mkdir()
    fd = os.open(busy / "trainer.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, b"pid 4242, started 2026-01-01T00:00:00+00:00\n")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code = main(["smoke"])
    finally:
        os.chdir(cwd)
        os.close(fd)
    assert code == 1
    assert (f"kept {busy.relative_to(tmp_path)}: a trainer trains this cell now (pid 4242, started "
            in capsys.readouterr().err)
    assert (busy / "checkpoint.pt").exists()
    assert not idle.exists() and not (tmp_path / "results/smoke/tables").exists()


def test_make_clean_runs_without_the_project_environment(tmp_path):
    """`make clean` is documented for any Python 3: no package outside the standard library is imported
    (-S: no site-packages, so not tqdm, torch or pandas)."""
    (tmp_path / "results/smoke/runs").mkdir(parents=True)
    result = subprocess.run([sys.executable, "-S", "-m", "rnnrepro.clean", "smoke"], cwd=tmp_path,
                            capture_output=True, text=True, env={"PYTHONPATH": str(REPO_ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert "removing results/smoke" in result.stdout
