"""The README's two commands (`make smoke`, `make test`) and `make setup` from a folder whose path has a
space ("my dir/rnnrepro"), where make used to split the virtual environment's absolute path and stop
with "make: .../my: No such file or directory" (Error 127). The programs of the virtual environment are
stand-ins that record their calls (no installs, no training); a real Snakemake job from that folder
checks that the workflow's shell commands quote it too."""

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import copy_project, snakemake

from rnnrepro.configuration import REPO_ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")

# `python3 -m venv DIR` that makes DIR/bin/python and DIR/bin/snakemake: each appends its name and
# arguments to the file $CALLS.
FAKE_PYTHON3 = """#!/bin/sh
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
    env = {"PATH": os.environ["PATH"], "HOME": str(project), "CALLS": str(calls)}
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
        "snakemake --profile profiles/smoke --report results/report.html all",
    ]


def test_workflow_jobs_run_from_a_folder_with_a_space(tmp_path):
    """A script job (fetch) and a shell job (prepare, with the prefix that puts src/ on PYTHONPATH)."""
    project = tmp_path / "my dir" / "rnnrepro"
    project.mkdir(parents=True)
    copy_project(project)
    result = snakemake(project, "--profile", "profiles/smoke", "--cores", "1",
                       "data/processed/synth_ptb/stats.json", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (project / "data/processed/synth_ptb/stats.json").exists()
