"""Who else is working in this directory (rnnrepro.locks): a second `records render` of a budget, and a
`records grow` whose Snakemake run finds the directory locked by another, stop with what to do."""

from __future__ import annotations

import os

from conftest import copy_project, python_in

from rnnrepro import grid
from rnnrepro.records import hold_grow_lock


def test_a_second_render_of_a_budget_says_who_renders_it_and_changes_nothing(tmp_path, monkeypatch):
    from rnnrepro.records.rendering import hold_render_lock

    project = copy_project(tmp_path)
    monkeypatch.chdir(project)
    fd = hold_render_lock("cpu")  # the first render, here in the test's process
    try:
        run = python_in(project, "-m", "rnnrepro.records", "--records", str(tmp_path / "none"), "render",
                        "--budget", "cpu")
    finally:
        os.close(fd)
    assert run.returncode != 0
    assert f"another `records render --budget cpu` is running in this working tree (pid {os.getpid()}" in run.stderr, \
        run.stderr[-2000:]
    assert "This render changed nothing" in run.stderr
    assert not (project / grid.results_dir("cpu")).exists()  # nothing written, nothing lost


def test_grow_says_another_snakemake_run_holds_the_directory(tmp_path, monkeypatch):
    """Two budgets preparing data at once: the second's Snakemake run finds the first's lock on the
    corpora both read (here a lock as Snakemake writes it)."""
    project = copy_project(tmp_path)
    locks = project / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text("data/processed/ptb/valid.txt\n")
    run = python_in(project, "-m", "rnnrepro.records", "--records", str(tmp_path / "none"), "grow", "--budget",
                    "cpu", "--minutes", "1", "--unit", "pru/ptb/lstm_m1000__lrx1/frac10/seed1000")
    said = run.stdout + run.stderr
    assert run.returncode != 0, said[-2000:]
    assert ("error: preparing the data did not start: another Snakemake run is working in this directory "
            f"({project.resolve()}") in said, said[-2000:]
    assert "wait for it, or run `snakemake --unlock` if none is" in said
    assert not (project / "data").exists()


def test_the_grow_lock_names_its_holder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fd = hold_grow_lock("cpu")
    try:
        run = python_in(copy_project(tmp_path), "-c",
                        "from rnnrepro.records import hold_grow_lock; hold_grow_lock('cpu')")
    finally:
        os.close(fd)
    assert f"another `records grow --budget cpu` runs in this working tree (pid {os.getpid()}" in run.stderr
