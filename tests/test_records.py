"""The runs recorded in this repository (records/, made on a GPU) render into their tables and the
scorecard on any machine. The mechanism itself is tested on hand-written fixtures in test_claims.py;
this checks the real records stay renderable as the notebooks and study files change."""

import re
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import copy_project, python_in, render_status

from rnnrepro import grid
from rnnrepro.analysis.claims import COUNTED
from rnnrepro.configuration import REPO_ROOT, load_run_config, load_study, load_yaml

RECORDED_BUDGETS = sorted(p.name for p in (REPO_ROOT / "records").iterdir() if p.is_dir())


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """A project copy with the repository's records, every recorded budget rendered in one command."""
    project = copy_project(tmp_path_factory.mktemp("rendered"))
    shutil.copytree(REPO_ROOT / "records", project / "records")
    result = python_in(project, "-m", "rnnrepro.records", "render",
                       *(word for budget in RECORDED_BUDGETS for word in ("--budget", budget)))
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    # every line the render's own; the notebooks' kernels say nothing
    assert all(line.startswith("[rnnrepro] ") for line in result.stdout.strip().splitlines()), result.stdout
    assert "IPKernelApp" not in result.stdout + result.stderr and "WARNING" not in result.stderr, result.stderr
    return project, result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("budget", RECORDED_BUDGETS)
def test_recorded_runs_render_into_tables_and_the_scorecard(budget, rendered):
    project, stdout = rendered
    status = {key.removeprefix(f"{budget}:"): state for key, state in render_status(stdout).items()
              if key.startswith(f"{budget}:")}
    rendered_artifacts = [key for key, state in status.items()
                          if state.startswith(("rendered", "rendered in part")) and key != "claims"]
    assert rendered_artifacts and status["claims"] == "rendered", status
    # a notebook renders whatever records are current so far, some models' seeds only included
    assert not [key for key, state in status.items() if "notebook failed" in state or state.startswith("failed")], status
    # it talks: a line per artifact of every study with this budget, a rendered one with its time, then
    # the counts and where the results are
    lines = [line for line in stdout.strip().splitlines()
             if line.startswith((f"[rnnrepro] {budget} ", f"[rnnrepro] {budget}: "))]
    names = load_run_config(load_yaml(REPO_ROOT / "config/config.yaml"))["studies"]
    studies = grid.studies_with_budget({name: load_study(name) for name in names}, budget)
    assert len(status) == sum(len(study["artifacts"]) for study in studies.values()) + 1, status  # + the scorecard
    assert sum(bool(re.search(r": rendered(?: in part \(.*\))? in \d+\.\d s$", line))
               for line in lines) == len(rendered_artifacts) + 1
    summary = next(line for line in lines if line.startswith(f"[rnnrepro] {budget}: "))
    assert f"{len(rendered_artifacts)} of {len(status) - 1} artifacts rendered" in summary, summary
    assert f"results/{budget}/" in summary

    card = pd.read_csv(project / "results" / budget / "tables/claims.csv")
    tables = {table for key in rendered_artifacts for table in _tables(*key.split("/"))}
    for table in tables:
        mine = card[card["table"] == table]
        assert (mine["budget"] == budget).all() and mine["data"].isin(["real", COUNTED]).all(), table
    # a verdict only where its table was rendered from the records
    assert set(card[card["verdict"].isin(["held", "not held", "inconclusive"])]["table"]) <= tables
    # and the budget's results page, its scorecard one row per row of claims.csv, every figure inline
    page = project / "results" / budget / "index.html"
    assert f"read them on the results page: results/{budget}/index.html" in summary, summary
    html = page.read_text()
    assert html.count('<tr class="claim ') == len(card)
    figures = sorted((project / "results" / budget / "figures").glob("*.png"))
    assert figures and all(f'alt="{figure.stem}"' in html for figure in figures)


@pytest.mark.slow
def test_readme_scorecard_is_the_rendered_one(rendered):
    """README.md's scorecard section is what `records readme` writes from the rendered records."""
    project, _ = rendered
    shutil.copy(REPO_ROOT / "README.md", project / "README.md")
    result = python_in(project, "-m", "rnnrepro.records", "readme", "--check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the scorecard section matches" in result.stdout


def _tables(study: str, artifact: str) -> list[str]:
    return load_study(study)["artifacts"][artifact]["tables"]


# --- growing records one unit at a time -------------------------------------------------------------

def grow_project(tmp_path):
    """A project copy (a git repository) whose nlstm `cpu` budget is its smoke budget cut to one pass:
    three tiny training units on the synthetic autocomplete corpus, so `records grow` runs in seconds."""
    import subprocess

    import yaml

    project = tmp_path / "project"
    project.mkdir()
    copy_project(project)
    study_file = project / "config/studies/nlstm.yaml"
    study = yaml.safe_load(study_file.read_text())
    smoke = {key: value for key, value in study["budgets"]["smoke"].items() if key != "artifacts"}
    study["budgets"]["cpu"] = {**smoke, "recipe": {**smoke["recipe"], "epochs": 1}, "seeds": [1111],
                               "omit": ["tuning"]}  # no learning-rate tuning units
    study_file.write_text(yaml.safe_dump(study, sort_keys=False))
    for command in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a"]):
        subprocess.run(["git", *command], cwd=project, check=True, capture_output=True)
    return project


def grow(project, *extra, **popen):
    import subprocess
    import sys

    from conftest import BIN

    return subprocess.Popen([sys.executable, "-m", "rnnrepro.records", "grow", "--budget", "cpu", "--study", "nlstm",
                             "--minutes", "30", "--jobs", "1", "--threads", "1", *extra], cwd=project,
                            env={"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(project),
                                 "PYTHONPATH": str(project / "src"), "GIT_AUTHOR_NAME": "t",
                                 "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)


def kill_tree(pid: int) -> None:
    """SIGKILL a process and all its descendants (units run in sessions of their own): stop them all
    first, so that none starts another between the listing and the kill."""
    import os
    import signal

    def children(parent):
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                found.append(int(stat.parent.name))
        return found

    stopped, todo = [], [pid]
    while todo:
        current = todo.pop()
        try:
            os.kill(current, signal.SIGSTOP)
        except ProcessLookupError:
            continue
        stopped.append(current)
        todo += children(current)
    for current in stopped:
        try:
            os.kill(current, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.slow
def test_grow_killed_and_started_again_loses_and_reruns_no_finished_unit(tmp_path):
    """`records grow` packs (and commits) each unit as it finishes; killed mid-run and started again, it
    keeps every finished unit as it was and trains only the others."""
    import os
    import signal
    import subprocess
    import time

    project = grow_project(tmp_path)
    runs = project / "records/cpu/runs/nlstm"
    first = grow(project, "--commit", start_new_session=True)
    deadline = time.monotonic() + 600
    while not list(runs.glob("*/*/frac100/seed1111/metrics.json")) and time.monotonic() < deadline:
        assert first.poll() is None, first.stdout.read()
        time.sleep(0.5)
    kill_tree(first.pid)  # a session that ends without warning: grow and every unit it started
    first.wait()
    recorded = {path: path.read_bytes() for path in runs.glob("**/*") if path.is_file()}
    assert len([p for p in recorded if p.name == "metrics.json"]) == 1, recorded

    second = grow(project, "--commit")
    out, _ = second.communicate(timeout=900)
    assert second.returncode == 0, out
    assert "2 units to record" in out and "recorded 2 units, 0 failed" in out, out
    # the unit the first grow packed is committed, by it or (killed between packing and committing) by the second
    log = subprocess.run(["git", "log", "--format=%s"], cwd=project, capture_output=True, text=True).stdout
    assert log.count("records: cpu nlstm/") + ("packed by an earlier grow" in log) == 3, log
    left = subprocess.run(["git", "status", "--porcelain", "--", "records"], cwd=project, capture_output=True,
                          text=True).stdout
    assert left == "", left
    assert all(path.read_bytes() == content for path, content in recorded.items())  # untouched
    assert len(list(runs.glob("*/*/frac100/seed1111/metrics.json"))) == 3
    listing = subprocess.run([sys.executable, "-m", "rnnrepro.records", "list", "--budget", "cpu", "--study", "nlstm"],
                             cwd=project, capture_output=True, text=True, env={**os.environ,
                                                                                "PYTHONPATH": str(project / "src")})
    assert "3 units: 3 recorded, 0 stale, 0 damaged, 0 missing" in listing.stdout, listing.stdout + listing.stderr


def test_grow_stopped_by_a_signal_says_which_and_stops_its_running_units(capsys):
    """SIGTERM (or Ctrl-C) moves grow's deadline to now: each running unit's process group gets SIGTERM
    (training writes its resume checkpoint), and what grow says names the signal, not a deadline."""
    import argparse
    import signal
    import subprocess

    from rnnrepro.records import Grower

    grower = Grower("cpu", [], {}, {}, argparse.Namespace(minutes=60, threads=1, config=[]))
    unit = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    grower.running["nlstm/autocomplete/lstm/frac100/seed1111"] = unit
    try:
        grower.stop_now(signal.SIGTERM, None)
        grower.stop_running()
        assert unit.wait(timeout=30) == -signal.SIGTERM
    finally:
        unit.kill()
    assert "SIGTERM: stopping nlstm/autocomplete/lstm/frac100/seed1111" in capsys.readouterr().out
    grower.stop_now(signal.SIGINT, None)
    assert grower.why_stopped == "Ctrl-C"


def test_a_stopped_unit_whose_snakemake_hangs_is_killed_once_its_training_has_ended(tmp_path, capsys):
    """After SIGTERM, a unit's Snakemake that stays (seen: idle for minutes after its trainer had written
    its checkpoint and exited) gets SIGKILL once its cells have had no trainer for the grace period, and
    not while a trainer still runs."""
    import argparse
    import signal
    import subprocess
    import threading
    import time
    import types

    from rnnrepro.records import Grower, Unit
    from rnnrepro.train import progress_file

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    name = "lrn/ptb/lrn_ft/frac10/seed1115"
    unit = Unit(name, "lrn", [types.SimpleNamespace(run_dir=str(run_dir))], [], [])
    grower = Grower("cpu", [unit], {}, {}, argparse.Namespace(minutes=60, threads=1, config=[]))
    # the trainer: holds the cell's trainer.lock for 3 s after SIGTERM, as one writing its checkpoint
    trainer = subprocess.Popen([sys.executable, "-c", "import sys, time; from rnnrepro.train import progress_file; "
                                "progress_file.hold_lock(sys.argv[1]); print('held', flush=True); time.sleep(3); "
                                "print(time.time(), flush=True)", str(run_dir)], stdout=subprocess.PIPE, text=True)
    assert trainer.stdout.readline() == "held\n"
    assert progress_file.another_trainer(run_dir)
    # its Snakemake: deaf to SIGTERM
    hung = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                             "signal.SIG_IGN); print('deaf', flush=True); time.sleep(120)"],
                            start_new_session=True, stdout=subprocess.PIPE, text=True)
    assert hung.stdout.readline() == "deaf\n"
    grower.running[name] = hung
    ended = {}

    def worker():
        ended["code"] = hung.wait()
        ended["at"] = time.time()
        with grower.lock:
            grower.running.pop(name)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        grower.stop_running()
        grower.end_stopped([thread], grace=1, limit=60)
        thread.join(timeout=10)
    finally:
        hung.kill()
        trainer.kill()
    assert ended["code"] == -signal.SIGKILL
    assert trainer.wait() == 0  # the trainer ended on its own, before the kill
    trainer_ended = float(trainer.stdout.readline())
    assert 1 <= ended["at"] - trainer_ended < 30  # killed once the grace (1 s) had passed after it
    out = capsys.readouterr().out
    assert f"{name}: its Snakemake had not ended 1 s after its training ended" in out, out


def test_grow_workers_take_each_unit_once_with_its_own_position():
    """Two workers asking at once get different units, numbered 1, 2, ... in the order they were taken."""
    import argparse
    import threading

    from rnnrepro.records import Grower, Unit

    units = [Unit(f"unit{i}", "pru", [], [], []) for i in range(40)]
    grower = Grower("cpu", units, {}, {}, argparse.Namespace(minutes=60, threads=1, config=[]))
    taken, start = [], threading.Barrier(4)

    def worker():
        start.wait()
        while (got := grower.next_unit()) is not None:
            taken.append((got[0], got[1].name))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(taken) == [(position, f"unit{position - 1}") for position in range(1, 41)]


def test_records_packed_but_not_committed_are_committed_by_the_next_grow(tmp_path, monkeypatch):
    """The next `grow --commit` commits exactly the files an earlier grow packed and did not commit: never a
    record folder deleted to retrain it, a line-ending change to another record, or a file of your own."""
    import subprocess

    from rnnrepro import record_commits
    from rnnrepro.records import commit_leftovers

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True, check=True).stdout

    monkeypatch.chdir(tmp_path)
    git("init", "-q")
    git("config", "user.email", "t@t")
    git("config", "user.name", "t")
    git("config", "core.autocrlf", "false")
    older = tmp_path / "records/cpu/runs/nlstm/c/old/frac100/seed1111"
    other = tmp_path / "records/cpu/runs/nlstm/c/other/frac100/seed1111"
    for folder in (older, other):
        folder.mkdir(parents=True)
        (folder / "metrics.json").write_text("{}\n")
        (folder / "history.csv").write_text("epoch\n1\n")
    git("add", "-A")
    git("commit", "-qm", "records")
    shutil.rmtree(older)  # deleted so that grow trains it again
    (other / "history.csv").write_bytes(b"epoch\r\n1\r\n")  # an editor's line endings
    (tmp_path / "records/cpu/notes.txt").write_text("not a record\n")
    unit = tmp_path / "records/cpu/runs/nlstm/c/cell/frac100/seed1111"
    unit.mkdir(parents=True)
    packed = [Path("records/cpu/runs/nlstm/c/cell/frac100/seed1111") / n for n in ("metrics.json", "history.csv")]
    record_commits.note_packing("cpu", packed + [Path("README.md")])  # a path outside the records: never
    (tmp_path / "README.md").write_text("changed by hand\n")
    for path in packed:
        path.write_text("{}\n")
    said = []
    commit_leftovers("cpu", Path("records"), said.append)
    commit_leftovers("cpu", Path("records"), said.append)  # nothing left: says nothing, commits nothing
    assert said == ["committed 2 files an earlier grow packed into records/cpu but did not commit"], said
    assert git("log", "--format=%s").splitlines()[0] == (
        "records: cpu, 2 files packed by an earlier grow that stopped before committing them")
    assert git("show", "--name-status", "--format=", "HEAD").split() == [
        "A", str(packed[1]), "A", str(packed[0])]
    assert sorted(git("status", "--porcelain").splitlines()) == [
        " D records/cpu/runs/nlstm/c/old/frac100/seed1111/history.csv",
        " D records/cpu/runs/nlstm/c/old/frac100/seed1111/metrics.json",
        " M records/cpu/runs/nlstm/c/other/frac100/seed1111/history.csv",
        "?? README.md",
        "?? records/cpu/notes.txt"]
    assert not record_commits.journal("cpu").exists()


def test_grow_commits_exactly_the_files_it_packed(tmp_path, monkeypatch):
    """A unit's commit holds its packed files only, even where another file of its record folder changed."""
    import subprocess

    from rnnrepro import record_commits

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True, check=True).stdout

    monkeypatch.chdir(tmp_path)
    git("init", "-q")
    git("config", "user.email", "t@t")
    git("config", "user.name", "t")
    folder = Path("records/cpu/runs/s/c/m/frac100/seed1")
    folder.mkdir(parents=True)
    (folder / "mine.txt").write_text("a note\n")
    (folder / "metrics.json").write_text("{}\n")
    assert record_commits.commit([folder / "metrics.json"], "records: one") is None
    assert git("show", "--name-only", "--format=", "HEAD").split() == [str(folder / "metrics.json")]
    assert git("status", "--porcelain").splitlines() == [f"?? {folder}/mine.txt"]


def test_grow_commit_refuses_a_detached_head(tmp_path, monkeypatch):
    import subprocess

    from rnnrepro import record_commits

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True, check=True).stdout

    monkeypatch.chdir(tmp_path)
    with pytest.raises(RuntimeError, match="not in a git repository"):
        record_commits.check_branch()
    git("init", "-q")
    git("config", "user.email", "t@t")
    git("config", "user.name", "t")
    git("commit", "-q", "--allow-empty", "-m", "a")
    record_commits.check_branch()
    git("checkout", "-q", "--detach")
    with pytest.raises(RuntimeError, match=r"HEAD is detached \(at [0-9a-f]+\).*git switch -c"):
        record_commits.check_branch()


def test_unit_patterns_choose_units_and_a_pattern_matching_none_is_refused(tmp_path):
    project = copy_project(tmp_path)
    listed = python_in(project, "-m", "rnnrepro.records", "--records", "records", "list", "--budget", "cpu",
                       "--study", "nlstm", "--study", "lrn", "--unit", "nlstm/*/gru_2x600/*", "--unit", "lrn/speed")
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[1] for line in listed.stdout.strip().splitlines()[:-1]]
    assert names == [f"nlstm/wt2_text8style_autocomplete_w1024/gru_2x600/frac100/seed{s}" for s in range(1111, 1116)] + [
        "lrn/speed"], listed.stdout
    assert listed.stdout.strip().endswith("6 units: 0 recorded, 0 stale, 0 damaged, 6 missing")

    refused = python_in(project, "-m", "rnnrepro.records", "list", "--budget", "cpu", "--study", "nlstm",
                        "--unit", "nlstm/*/gru_2x600/*", "--unit", "pru/*")
    assert refused.returncode != 0
    assert "--unit pru/*: matches no unit of this budget and these studies" in refused.stderr, refused.stderr


def test_records_name_the_commit_that_made_them(tmp_path, monkeypatch):
    """A record must name the commit of the code that made it: a run trained from a working tree with
    uncommitted changes (`-dirty`) is not packed, and `grow` does not start in such a tree, unless the
    commit is stated (RNNREPRO_GIT_SHA: a copy of a clean working tree without its history)."""
    import argparse
    import json
    import subprocess

    from rnnrepro import grid, records

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True, check=True).stdout

    monkeypatch.chdir(tmp_path)
    run = Path(grid.runs_dir("cpu")) / "pru/ptb/lstm_m1000/frac10/seed1111"
    run.mkdir(parents=True)
    for name in records.RECORDED:
        (run / name).write_text("{}\n")
    (run / "metrics.json").write_text(json.dumps({"git_sha": "0123abc-dirty"}))
    with pytest.raises(RuntimeError, match="uncommitted changes .*git_sha 0123abc-dirty.*not recorded"):
        records.pack_run(run, "cpu", tmp_path / "records")
    assert not (tmp_path / "records").exists()
    (run / "metrics.json").write_text(json.dumps({"git_sha": "0123abc"}))
    assert records.pack_run(run, "cpu", tmp_path / "records").is_dir()

    git("init", "-q")
    git("config", "user.email", "t@t")
    git("config", "user.name", "t")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "code.py")
    git("commit", "-qm", "a")
    assert records.uncommitted_changes() == []
    (tmp_path / "code.py").write_text("x = 2\n")
    assert records.uncommitted_changes() == ["code.py"]
    monkeypatch.setattr(records.growing, "_load", lambda budget, *rest: ({"budget": budget}, {}))
    args = argparse.Namespace(budget="cpu", run_config=None, study=None, commit=False, records=tmp_path / "records",
                              config=[])
    with pytest.raises(RuntimeError, match=r"uncommitted changes \(code.py\): a record must name the commit"):
        records.grow(args)
    monkeypatch.setenv("RNNREPRO_GIT_SHA", "4567def")
    assert records.uncommitted_changes() == []
