"""Damaged, stale or foreign files are named where they are read, with the fix that applies: a record is
restored from git, a run of this machine is retrained; state files are written whole or not at all."""

import json
import os
import shutil
from pathlib import Path

import pytest

from rnnrepro import records
from rnnrepro.analysis.run_files import DamagedRunFile, read_history
from rnnrepro.configuration import REPO_ROOT


def current_record(tmp_path: Path):
    """A copy of one recorded cpu cell of the repository under tmp_path/records whose cell the study file
    resolves now, its config.json made what the study gives now (the test is about everything else):
    (record folder, study, config, cell)."""
    from rnnrepro import grid
    from rnnrepro.tuning import TuningPending

    for name in ("lru", "pru"):
        config, studies = records._load("cpu", Path("config/config.yaml"), [name])
        for cell in (c for unit in records.units(studies, config) for c in unit.cells):
            source = records.record_of(cell, Path("records"))
            if not (source / "metrics.json").exists():
                continue
            try:
                resolved = grid.resolve_cell(studies[name], config, cell)
            except TuningPending:
                continue
            target = records.record_of(cell, tmp_path / "records")
            shutil.copytree(source, target)
            (target / "config.json").write_text(json.dumps(resolved, indent=2) + "\n")
            assert records.record_problem(studies[name], config, cell, tmp_path / "records") is None
            return target, studies[name], config, cell
    pytest.fail("no recorded cpu cell of lru or pru that the study files resolve now")


@pytest.fixture
def one_record(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    return current_record(tmp_path)


@pytest.mark.parametrize("damage, said", [
    (lambda run: (run / "history.csv").write_text("epoch,val_loss\ntwo,1.5\n"),
     "history.csv is damaged: column epoch holds 'two' (row 1), not a number"),
    (lambda run: (run / "history.csv").unlink(), "history.csv is missing"),
    (lambda run: ((run / "metrics.json").unlink(), (run / "metrics.json").symlink_to(run / "gone.json")),
     "metrics.json is a link to a file that does not exist"),
    (lambda run: (run / "history.csv").write_text(""), "history.csv is damaged (not a CSV table"),
])
def test_a_damaged_record_is_damaged_not_recorded_nor_missing(one_record, tmp_path, damage, said):
    run, study, config, cell = one_record
    damage(run)
    problem = records.record_problem(study, config, cell, tmp_path / "records")
    assert problem is not None and "damaged record" in problem and said in problem, problem
    assert f"git checkout -- {run}" in problem


def test_a_damaged_restored_history_advises_restoring_its_record(tmp_path):
    """A file `records render` restored is fixed in its record, from git: not by retraining (--force)."""
    results = tmp_path / "results/cpu"
    run = results / "runs/lru/ptb_char/gru/frac100/seed1111"
    run.mkdir(parents=True)
    (run / "history.csv").write_text("epoch,val_loss\ntwo,1.5\n")
    with pytest.raises(DamagedRunFile) as found:
        read_history(run)
    assert "--force" in str(found.value)  # a run of this machine: retrain it
    (results / ".records.json").write_text(json.dumps({"runs/lru/ptb_char/gru/frac100/seed1111/history.csv": "x"}))
    with pytest.raises(DamagedRunFile) as found:
        read_history(run)
    message = str(found.value)
    assert "--force" not in message, message
    assert "git checkout -- records/cpu/runs/lru/ptb_char/gru/frac100/seed1111/history.csv" in message, message
    assert "python -m rnnrepro.records render --budget cpu" in message


def test_the_scorecards_run_endings_name_a_damaged_history(tmp_path):
    from rnnrepro.analysis.run_endings import run_ending

    run = tmp_path / "seed1"
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({"model": "m", "dataset": "d", "seed": 1}))
    (run / "config.json").write_text(json.dumps({"recipe": {"epochs": 3}}))
    (run / "history.csv").write_text("epoch,val_loss\n1,2.0\ntwo,1.5\n")
    with pytest.raises(DamagedRunFile, match=f"run folder {run}: history.csv is damaged: column epoch holds 'two'"):
        run_ending(run)


def test_records_list_says_damaged(one_record, tmp_path, capsys, monkeypatch):
    import argparse

    run, study, config, cell = one_record
    (run / "history.csv").unlink()
    args = argparse.Namespace(budget="cpu", run_config=Path("config/config.yaml"), study=["lru"], unit=None,
                              configfile=None, records=tmp_path / "records")
    records.list_units(args)
    out = capsys.readouterr().out
    assert f"damaged   {cell.key}  ({cell.key}: damaged record" in out, out
    assert ", 1 damaged, " in out.splitlines()[-1]


def test_a_truncated_render_manifest_is_named_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    record = tmp_path / "records/cpu/speed/lrn.json"
    record.parent.mkdir(parents=True)
    record.write_text("{}\n")
    records.restore(tmp_path / "records", "cpu")
    manifest = tmp_path / "results/cpu/.records.json"
    assert json.loads(manifest.read_text()) == {"speed/lrn.json": records._digest(record)}
    assert not list(manifest.parent.glob("*.tmp"))
    manifest.write_text(manifest.read_text()[:10])
    with pytest.raises(ValueError, match=r"results/cpu/.records.json is not valid JSON .*Delete it and render again"):
        records.restore(tmp_path / "records", "cpu")


def test_ctrl_c_during_a_render_says_one_line(tmp_path):
    """What is torn down after Ctrl-C (the kernels' client threads) prints nothing after the one line."""
    import subprocess
    import sys

    script = ("import os, signal, sys, threading, time\n"
              "from rnnrepro import records\n"
              "signal.signal(signal.SIGINT, records.stop_quietly)\n"
              "try:\n"
              "    os.kill(os.getpid(), signal.SIGINT)\n"
              "    time.sleep(5)\n"
              "finally:\n"
              "    threading.Thread(target=lambda: 1 / 0).start()  # a client thread failing as it is torn down\n"
              "    time.sleep(0.5)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")})
    assert result.returncode != 0
    assert result.stderr.splitlines() == [
        "[rnnrepro] stopped by Ctrl-C: the notebooks already running end first (seconds), no other starts; this "
        "render is incomplete (what it wrote stays): render again"], result.stderr


def test_pack_never_pairs_a_new_model_with_an_earlier_evaluation(tmp_path, monkeypatch):
    from rnnrepro import grid

    monkeypatch.chdir(tmp_path)
    run = Path(grid.runs_dir("cpu")) / "lrn/ptb/lrn_ft/frac10/seed1111"
    run.mkdir(parents=True)
    for name in records.RECORDED:
        (run / name).write_text("{}\n")
    (run / "metrics.json").write_text(json.dumps({"git_sha": "0123abc", "finished_at": "2026-11-25T00:19:11+00:00"}))
    (run / "dynamic_eval.json").write_text(json.dumps({"finished_at": "2026-11-25T00:20:51+00:00"}))
    (run / "entropy.json").write_text(json.dumps({"finished_at": "2026-11-25T00:21:00+00:00"}))
    record = records.pack_run(run, "cpu", tmp_path / "records")
    assert (record / "entropy.json").exists()
    # retrained: a new metrics.json beside the evaluation of the earlier model
    (run / "metrics.json").write_text(json.dumps({"git_sha": "4567def", "finished_at": "2026-11-26T09:00:00+00:00"}))
    with pytest.raises(RuntimeError, match=r"dynamic_eval.json \(finished 2026-11-25T00:20:51\+00:00\) was made "
                                           r"before the cell's metrics.json \(finished 2026-11-26T09:00:00"):
        records.pack_run(run, "cpu", tmp_path / "records")
    assert json.loads((record / "metrics.json").read_text())["git_sha"] == "0123abc"  # the record as it was
    # evaluated again, without the entropy: the record keeps no evaluation of the earlier model
    (run / "dynamic_eval.json").write_text(json.dumps({"finished_at": "2026-11-26T09:05:00+00:00"}))
    (run / "entropy.json").unlink()
    records.pack_run(run, "cpu", tmp_path / "records")
    assert sorted(p.name for p in record.iterdir()) == ["config.json", "dynamic_eval.json", "history.csv",
                                                        "metrics.json"]
    # an evaluation made from uncommitted code is refused, as a training run is
    (run / "dynamic_eval.json").write_text(json.dumps({"finished_at": "2026-11-26T09:05:00+00:00",
                                                       "git_sha": "4567def-dirty"}))
    with pytest.raises(RuntimeError, match=r"dynamic_eval.json was made from a working tree with uncommitted"):
        records.pack_run(run, "cpu", tmp_path / "records")


def test_a_record_from_a_commit_not_in_the_history_is_stale(one_record, tmp_path):
    from rnnrepro import record_commits

    run, study, config, cell = one_record
    metrics = json.loads((run / "metrics.json").read_text())
    assert record_commits.in_history(metrics["git_sha"])
    (run / "metrics.json").write_text(json.dumps({**metrics, "git_sha": "0" * 40}))
    problem = records.record_problem(study, config, cell, tmp_path / "records")
    assert problem is not None and "stale record" in problem, problem
    assert f"trained from commit {'0' * 40}, which is not in this repository's history" in problem


def test_a_restored_file_whose_record_is_gone_is_removed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cell = "runs/lrn/ptb/lrn_ft/frac10/seed1111"
    run = tmp_path / "records/cpu" / cell
    shutil.copytree(REPO_ROOT / "records/cpu" / cell, run)
    records.restore(tmp_path / "records", "cpu")
    restored = tmp_path / "results/cpu" / cell
    assert (restored / "dynamic_eval.json").exists()
    (run / "dynamic_eval.json").unlink()
    records.restore(tmp_path / "records", "cpu")
    assert sorted(p.name for p in restored.iterdir()) == ["config.json", "history.csv", "metrics.json"]
    assert sorted(json.loads((tmp_path / "results/cpu/.records.json").read_text())) == [
        f"{cell}/{name}" for name in ("config.json", "history.csv", "metrics.json")]


def test_an_artifact_not_rendered_now_shows_no_earlier_table_or_figure(tmp_path, monkeypatch):
    from rnnrepro.configuration import load_study

    monkeypatch.chdir(REPO_ROOT)
    studies = {"lru": load_study("lru")}
    monkeypatch.chdir(tmp_path)
    tables, figures, _ = records._outputs(studies["lru"], "lru", "accuracy", "cpu")
    kept = records._outputs(studies["lru"], "lru", "convergence", "cpu")[0]
    tables += [str(Path(t).with_suffix(".md")) for t in tables]  # the forms written beside a table go too
    for path in map(Path, tables + figures + kept):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("made from earlier records")
    plan = [records.Rendering("lru/accuracy", state="not rendered: 1 of its 21 records are missing"),
            records.Rendering("lru/convergence", state="rendered")]
    records.remove_earlier_outputs("cpu", studies, plan)
    assert not any(Path(p).exists() for p in tables + figures)
    assert all(Path(p).exists() for p in kept)


def test_status_calls_a_finished_cell_with_another_config_stale_not_done(one_record, tmp_path):
    from rnnrepro import grid, status

    run, study, config, cell = one_record
    root = tmp_path / "tree"
    shutil.copytree(run, root / cell.run_dir)
    dataset = grid.dataset_for(study, config, cell.corpus)
    assert status.cell_status(root, cell, dataset, study=study).state == "done"
    recorded = json.loads((root / cell.run_dir / "config.json").read_text())
    recorded["recipe"]["lr"] = recorded["recipe"]["lr"] * 2
    (root / cell.run_dir / "config.json").write_text(json.dumps(recorded))
    row = status.cell_status(root, cell, dataset, study=study)
    assert row.state == "stale" and "recipe.lr" in row.note, row


def test_a_file_copied_in_from_another_cells_record_is_named(one_record, tmp_path):
    run, study, config, cell = one_record
    metrics = json.loads((run / "metrics.json").read_text())
    (run / "metrics.json").write_text(json.dumps({**metrics, "seed": metrics["seed"] + 1}))
    problem = records.record_problem(study, config, cell, tmp_path / "records")
    assert problem is not None and "damaged record" in problem, problem
    assert f"made by the cell of seed {metrics['seed'] + 1}, not this folder's" in problem


def test_a_metrics_file_of_another_run_than_its_history_is_damaged(one_record, tmp_path):
    """A metrics.json rolled back to an earlier run of the cell (or a history.csv of another run)."""
    run, study, config, cell = one_record
    metrics = json.loads((run / "metrics.json").read_text())
    (run / "metrics.json").write_text(json.dumps({**metrics, "epochs": metrics["epochs"] - 1}))
    problem = records.record_problem(study, config, cell, tmp_path / "records")
    assert problem is not None and "damaged record" in problem, problem
    assert f"history.csv ends at epoch {metrics['epochs']}: the two are of different runs" in problem


def test_a_damaged_record_is_not_restored(tmp_path, monkeypatch):
    """Its artifacts are not rendered (the render names the damage), and nothing else reads it: the
    scorecard's run endings read the results tree, which keeps no copy of it."""
    monkeypatch.chdir(tmp_path)
    source = REPO_ROOT / "records/cpu/runs/lru/warpeace/lstm_24m/frac10/seed1112"
    run = tmp_path / "records/cpu/runs/lru/warpeace/lstm_24m/frac10/seed1112"
    shutil.copytree(source, run)
    records.restore(tmp_path / "records", "cpu")
    restored = tmp_path / "results/cpu/runs/lru/warpeace/lstm_24m/frac10/seed1112"
    assert (restored / "history.csv").exists()
    (run / "history.csv").write_text("epoch,val_loss\ntwo,1.5\n")
    records.restore(tmp_path / "records", "cpu")
    assert not restored.exists()


def test_a_rolled_back_metrics_file_or_evaluation_makes_the_record_damaged(one_record, tmp_path):
    """git checkout of an earlier commit's metrics.json (or dynamic_eval.json) of a record: its numbers are
    of another run than the rest of the record."""
    run, study, config, cell = one_record
    metrics = json.loads((run / "metrics.json").read_text())
    assert "best_val_loss_during_training" in metrics
    (run / "metrics.json").write_text(json.dumps({**metrics, "best_val_loss_during_training": 9.5}))
    problem = records.record_problem(study, config, cell, tmp_path / "records")
    assert "damaged record" in problem and "best_val_loss_during_training 9.5 is not history.csv's lowest" in problem
    (run / "metrics.json").write_text(json.dumps(metrics))
    (run / "dynamic_eval.json").write_text(json.dumps({"finished_at": "2026-01-01T00:00:00+00:00"}))
    problem = records.record_problem(study, config, cell, tmp_path / "records")
    assert "damaged record" in problem and "dynamic_eval.json (finished 2026-01-01" in problem, problem


def test_grow_counts_a_unit_pack_refuses_as_failed_and_goes_on(tmp_path, monkeypatch, capsys):
    import argparse

    from rnnrepro import grid

    monkeypatch.chdir(tmp_path)
    cell = grid.Cell("lrn", "ptb", "lrn", 10, 1111, "cpu")
    run = Path(cell.run_dir)
    run.mkdir(parents=True)
    for name in records.RECORDED:
        (run / name).write_text("{}\n")
    (run / "metrics.json").write_text(json.dumps({"git_sha": "0123abc-dirty"}))
    grower = records.Grower("cpu", [], {"lrn": grid.load_study("lrn")}, {},
                            argparse.Namespace(minutes=60, threads=1, config=[], commit=False,
                                               records=tmp_path / "records", jobs=1))
    grower.todo = [records.Unit(cell.key, "lrn", [cell], [], [])]
    grower.total = 1
    monkeypatch.setattr(records.progress_file, "another_trainer", lambda run_dir: None)
    monkeypatch.setattr(records.growing, "stale_copy", lambda study, config, cell: None)  # no study file here
    grower.log_dir.mkdir(parents=True)
    monkeypatch.setattr(records.subprocess, "Popen", lambda *a, **k: type("Done", (), {"wait": lambda self: 0})())
    grower.work()
    assert grower.failed == [cell.key] and grower.done == []
    assert f"failed: {cell.key} trained but is not recorded: " in capsys.readouterr().out


def test_a_raised_cap_keeps_a_record_its_own_rule_stopped_below_the_old_one(one_record, tmp_path):
    """Raising a recipe's epoch cap leaves current the records its own stopping rule ended below the old
    cap (their numbers are those of a run under the new cap), and makes stale those the old cap stopped,
    and any record where something else changed too; the status of a trained cell reads the same rule."""
    from rnnrepro import grid, status

    run, study, config, cell = one_record
    expected = json.loads((run / "config.json").read_text())
    epochs = json.loads((run / "metrics.json").read_text())["epochs"]
    assert expected["recipe"].get("early_stopping") or expected["recipe"].get("stop_on_nonmono")
    assert expected["recipe"]["epochs"] > epochs + 1, "a record its own rule stopped"

    def recorded_with(**recipe):
        (run / "config.json").write_text(json.dumps({**expected, "recipe": {**expected["recipe"], **recipe}}))
        return records.record_problem(study, config, cell, tmp_path / "records")

    assert recorded_with(epochs=epochs + 1) is None
    for lower in ({"epochs": epochs}, {"epochs": epochs + 1, "lr": expected["recipe"]["lr"] * 2}):
        problem = recorded_with(**lower)
        assert problem is not None and "stale record" in problem and "recipe." in problem, problem
    problem = recorded_with(epochs=epochs)
    assert f"recipe.epochs {epochs!r} -> {expected['recipe']['epochs']!r}" in problem
    # a raised cap is the only change that can keep a record: a lowered one makes it stale
    higher = {**expected, "recipe": {**expected["recipe"], "epochs": expected["recipe"]["epochs"] + 50}}
    (run / "config.json").write_text(json.dumps(higher))
    assert records.record_problem(study, config, cell, tmp_path / "records") is not None

    root = tmp_path / "tree"
    shutil.copytree(run, root / cell.run_dir)
    dataset = grid.dataset_for(study, config, cell.corpus)
    for cap, state in ((epochs + 1, "done"), (epochs, "stale")):
        (root / cell.run_dir / "config.json").write_text(
            json.dumps({**expected, "recipe": {**expected["recipe"], "epochs": cap}}))
        assert status.cell_status(root, cell, dataset, study=study).state == state


def test_a_finetune_whose_start_stayed_best_is_not_damaged(one_record, tmp_path):
    """A finetune none of whose epochs beat the weights it started from scores those (best_epoch 0,
    evaluated before its first epoch, not a row of history.csv): its record is whole, while a lower best
    said of a later epoch is still another run's."""
    run, study, config, cell = one_record
    metrics = json.loads((run / "metrics.json").read_text())
    lower = metrics["best_val_loss_during_training"] - 0.01
    (run / "metrics.json").write_text(json.dumps({**metrics, "best_val_loss_during_training": lower, "best_epoch": 0}))
    assert records.record_problem(study, config, cell, tmp_path / "records") is None
    (run / "metrics.json").write_text(json.dumps({**metrics, "best_val_loss_during_training": lower}))
    problem = records.record_problem(study, config, cell, tmp_path / "records")
    assert problem is not None and "damaged record" in problem, problem


def test_a_tuning_grid_grown_around_the_chosen_rate_keeps_the_tuned_records(tmp_path, monkeypatch):
    """A tuned run stays current when its study's grid of learning rates gained rates and still chose the
    one the run trained at (its numbers are those of a run under the wider grid); a grid that lost a rate,
    or one that chose another rate, makes it stale. The edge flag then reads the wider grid."""
    from rnnrepro import grid, tuning
    from rnnrepro.analysis.run_endings import rate_at_edge
    from rnnrepro.cell_identity import stale_reason

    monkeypatch.chdir(tmp_path)
    study, config = grid.load_study("nlstm"), {"budget": "cpu", "precision": "fp32", "device": "auto"}
    cell = next(c for c in grid.artifact_cells(study, config, "test") if c.model == "lstm_2x600")
    factors = grid.tuned_settings(study, config)["tuning"]["lr_factors"]
    losses = {f: 2.0 + abs(f - factors[1]) for f in factors}  # the second factor is the best
    for variant in grid.tuning_cells_of(study, config, cell):  # the tuning runs, finished (hand-written)
        folder = Path(variant.run_dir)
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps(grid.resolve_cell(study, config, variant)))
        factor = tuning.parse_variant(variant.model)[1]
        (folder / "metrics.json").write_text(json.dumps({"val_cross_entropy": losses[factor], "epochs": 6}))
    expected = grid.resolve_cell(study, config, cell)
    chosen = expected["tuning"]["lr_factor"]
    assert chosen == factors[1]

    def recorded_with(**tuning):
        return stale_reason({**expected, "tuning": {**expected["tuning"], **tuning}}, expected)

    assert recorded_with() is None
    assert recorded_with(lr_factors=factors[:-1]) is None  # trained when the grid had one rate fewer
    lost = recorded_with(lr_factors=factors + [factors[-1] * 2])  # the grid lost a rate since
    assert lost is not None and "tuning.lr_factors" in lost, lost
    moved = recorded_with(lr_factors=factors[:-1], lr_factor=factors[0])  # it chose another rate then
    assert moved is not None and "tuning.lr_factor " in moved, moved
    other_lr = stale_reason({**expected, "tuning": {**expected["tuning"], "lr_factors": factors[:-1]},
                             "recipe": {**expected["recipe"], "lr": expected["recipe"]["lr"] * 2}}, expected)
    assert other_lr is not None and "recipe.lr" in other_lr, other_lr

    at_edge = {"tuning": {"lr_factor": 1, "lr_factors": [1, 2, 4]}}
    assert rate_at_edge(at_edge) == "lowest"
    assert rate_at_edge(at_edge, grid_now=[0.5, 1, 2, 4]) == ""  # the grid grew past it: bracketed now
    assert rate_at_edge(at_edge, grid_now=[1, 2]) == "lowest"  # a grid that is not a wider one is not read


def test_a_run_that_left_the_plateau_stays_current_when_patience_waits_for_it(tmp_path):
    """A record made when patience counted from the start is still the cell once the study file's patience
    waits for the run to leave the unigram plateau (`after_plateau`), when replaying its checks under the
    new rule ends it where it ended; one that patience ended on the plateau is stale. A record without a
    unigram loss of its own reads that of another run of its corpus, fraction and budget."""
    from rnnrepro.cell_identity import stale_reason

    old = {"rule": "best", "patience": 2, "min_delta": 0.002}
    config = {"budget": "cpu", "recipe": {"epochs": 20, "early_stopping": old}}
    expected = {**config, "recipe": {**config["recipe"], "early_stopping": {**old, "after_plateau": True}}}

    def run(model: str, losses: list[float], **metrics) -> Path:
        folder = tmp_path / "nlstm" / "corpus" / model / "frac100" / "seed1111"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps(config))
        (folder / "history.csv").write_text("iteration,val_loss\n" + "".join(f"{i},{v}\n" for i, v in enumerate(losses)))
        (folder / "metrics.json").write_text(json.dumps({"budget": "cpu", "stopped_by_patience": True, **metrics}))
        return folder

    learned = run("a", [6.0, 5.0, 3.0, 2.0, 2.0, 2.0], val_unigram_loss=5.7)
    stopped_on_it = run("b", [6.0, 5.7, 5.7, 5.7], val_unigram_loss=5.7)
    older = run("c", [6.0, 5.0, 3.0, 2.0, 2.0, 2.0])  # recorded before val_unigram_loss was written
    assert stale_reason(config, expected, folder=learned) is None
    assert stale_reason(config, expected, folder=older) is None  # the plateau of run "a", same corpus
    why = stale_reason(config, expected, folder=stopped_on_it)
    assert why is not None and "recipe.early_stopping.after_plateau" in why, why
    assert stale_reason(config, expected) is not None  # without its run folder nothing shows it the same
    other = {**expected, "recipe": {**expected["recipe"], "epochs": 30}}  # another change beside the rule
    assert stale_reason(config, other, folder=learned) is not None
