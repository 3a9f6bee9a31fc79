"""A shell's limit on the size of a file a process writes (`ulimit -f`): a run plans with a warning that
names it, and `records grow` says why a unit failed when a write ran into it (rnnrepro.runtime)."""

from __future__ import annotations

import subprocess

from conftest import BIN, copy_project

from rnnrepro.records import why_it_failed


def test_a_write_past_the_limit_is_named_with_the_fix(tmp_path):
    log = tmp_path / "unit.log"
    log.write_text("Building DAG of jobs...\nTraceback (most recent call last):\n"
                   "OSError: [Errno 27] File too large: '.snakemake/backups/results/cpu/runs/pru/model.pt'\n")
    said = why_it_failed(log)
    assert "`ulimit -f unlimited`" in said and "File too large" in said, said


def test_a_run_under_a_file_size_limit_says_so_when_it_plans(tmp_path):
    project = copy_project(tmp_path)
    run = subprocess.run(["bash", "-c", f"ulimit -f 2000000 && {BIN}/snakemake -n --cores 1 "
                          "results/smoke/tables/pru_table1.csv --config budget=smoke"], cwd=project,
                         capture_output=True, text=True, env={"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(project)},
                         timeout=600)
    said = run.stdout + run.stderr
    assert run.returncode == 0, said[-3000:]
    assert ("[rnnrepro] warning: this shell limits each file a process writes to 2048000000 bytes (`ulimit -f` is "
            "2000000)") in said, said[-3000:]
