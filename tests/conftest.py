"""Shared fixtures: a temporary copy of the project, and one smoke run of the whole pipeline that every
end-to-end test reads (it is the expensive part of the suite, so it runs once per session)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rnnrepro.configuration import REPO_ROOT

BIN = Path(sys.executable).parent
PROJECT_PARTS = ["Snakefile", "workflow", "config", "notebooks", "profiles", "src"]


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


@pytest.fixture(scope="session")
def smoke_project(tmp_path_factory) -> Path:
    """A project copy in which `snakemake --profile profiles/smoke all` has run successfully."""
    project = copy_project(tmp_path_factory.mktemp("smoke"))
    result = snakemake(project, "--profile", "profiles/smoke", "all")
    assert result.returncode == 0, result.stderr[-5000:]
    return project
