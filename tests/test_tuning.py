"""Learning-rate tuning (rnnrepro.tuning): the variants, the choice, the stop rule the compared cells share,
and grow's order (tuning first, then seed by seed; a unit waits for its tuning)."""

import argparse
import json
import threading
import time

import pytest

from rnnrepro import grid, tuning
from rnnrepro.configuration import ConfigError, load_study
from rnnrepro.lr_choice import write_choice
from rnnrepro.records import Grower, Unit, seed_by_seed
from rnnrepro.train.stopping import epochs_since_best, has_stalled

CPU = {"budget": "cpu", "precision": "fp32", "device": "auto", "seeds": [1111]}


def test_variant_ids_round_trip():
    assert tuning.variant_id("lstm_m1000", 0.25) == "lstm_m1000__lrx0p25"
    assert tuning.variant_id("lstm_m1000", 2.0) == "lstm_m1000__lrx2"
    assert tuning.parse_variant("lstm_m1000__lrx0p25") == ("lstm_m1000", 0.25)
    assert tuning.parse_variant("lstm_m1000") is None


def test_cpu_tunes_every_table1_model_on_four_rates_and_a_seed_of_its_own():
    study = load_study("pru")
    cells = grid.artifact_cells(study, CPU, "tuning")
    assert {c.model for c in cells} == {tuning.variant_id(m, f) for m in
                                        ["lstm_m1000", "lstm_m1400", "pru_g1_k2_m1000", "pru_g2_k2_m1200",
                                         "pru_g4_k2_m1400"] for f in (0.25, 0.5, 1, 2)}
    assert {c.seed for c in cells} == {1000} and {c.fraction for c in cells} == {10}
    variant = grid.resolve_cell(study, CPU, cells[0])
    assert variant["recipe"]["lr"] == 30 * tuning.parse_variant(cells[0].model)[1]
    assert variant["recipe"]["epochs"] == 40  # tuning on shorter runs
    assert variant["recipe"]["early_stopping"] == {"rule": "best", "patience": 6, "min_delta": 0.002}


def _finish(cell, val_loss, root, study):
    """A finished run folder for ``cell``: the config the study resolves, and metrics with ``val_loss``."""
    folder = root / cell.run_dir
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(grid.resolve_cell(study, CPU, cell)))
    (folder / "metrics.json").write_text(json.dumps({"val_loss": val_loss, "epochs": 9, "best_epoch": 7}))


def test_a_tuned_cell_trains_at_the_rate_of_the_lowest_validation_loss(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study = load_study("pru")
    cell = grid.Cell("pru", "ptb", "pru_g4_k2_m1400", 10, 1111, "cpu")
    with pytest.raises(tuning.TuningPending, match="pru_g4_k2_m1400__lrx0p25"):
        grid.resolve_cell(study, CPU, cell)
    losses = {0.25: 5.9, 0.5: 5.7, 1: 5.65, 2: 5.8}
    for variant in grid.tuning_cells_of(study, CPU, cell):
        _finish(variant, losses[tuning.parse_variant(variant.model)[1]], tmp_path, study)
    resolved = grid.resolve_cell(study, CPU, cell)
    assert resolved["recipe"]["lr"] == 30.0
    assert resolved["tuning"] == {"lr_factor": 1, "lr_factors": [0.25, 0.5, 1, 2], "seeds": [1000], "epochs": 40}
    # another result of one tuning cell changes the rate, and so the cell
    _finish_again = tmp_path / grid.tuning_cells_of(study, CPU, cell)[1].run_dir / "metrics.json"
    _finish_again.write_text(json.dumps({"val_loss": 5.6, "epochs": 9, "best_epoch": 7}))
    assert grid.resolve_cell(study, CPU, cell)["recipe"]["lr"] == 15.0
    # the table shows the curve and the choice
    out = write_choice(study, CPU, cell, tmp_path / "choice.json")
    assert out["lr"] == 15.0 and not out["at_edge_of_grid"] and len(out["curve"]) == 4


def test_a_tuning_seed_that_a_verdict_reads_is_refused(tmp_path):
    import shutil

    import yaml

    from rnnrepro.configuration import project_root

    shutil.copytree(project_root() / "config", tmp_path / "config")
    path = tmp_path / "config/studies/pru.yaml"
    text = path.read_text().replace("    seeds: [1000]\n", "    seeds: [1111]\n", 1)
    path.write_text(text)
    assert yaml.safe_load(text)["artifacts"]["tuning"]["seeds"] == [1111]
    with pytest.raises(ConfigError, match=r"tuning seeds \[1111\] are also seeds of the compared cells"):
        load_study("pru", tmp_path)


@pytest.mark.parametrize("losses, stalled", [
    ([5.0, 4.9, 4.899, 4.8995, 4.899, 4.8985, 4.899, 4.8985], True),     # 6 epochs since 4.9 without -0.002
    ([5.0, 4.9, 4.899, 4.8995, 4.899, 4.8985, 4.899], False),            # only 5
    ([5.0, 4.9, 4.95, 4.96, 4.97, 4.98, 4.99, 4.897], False),            # a new best by 0.003 at the end
    ([5.0, 4.9, 4.95, 4.96, 4.97, 4.98, 4.99, 4.89, 4.901], False),
])
def test_patience_on_the_best(losses, stalled):
    history = [{"val_loss": loss} for loss in losses]
    assert has_stalled({"rule": "best", "patience": 6, "min_delta": 0.002}, history) is stalled


def test_patience_on_the_best_differs_from_the_previous_epoch_rule():
    # slowly rising, then falling by less than min_delta each epoch: the LRU rule stops, the best rule
    # counts from the best (epoch 1)
    history = [{"val_loss": v} for v in (4.0, 4.1, 4.099, 4.098, 4.097)]
    assert has_stalled({"patience": 3, "min_delta": 0.002}, history)
    assert epochs_since_best(history, 0.002) == 4
    assert not has_stalled({"rule": "best", "patience": 5, "min_delta": 0.002}, history)


def test_grow_takes_tuning_first_then_seed_by_seed_and_waits_for_a_units_tuning():
    def unit(model, seed, needs=()):
        cell = grid.Cell("pru", "ptb", model, 10, seed, "cpu")
        return Unit(cell.key, "pru", [cell], [], [], needs=list(needs))

    tune = [unit("lstm_m1000__lrx0p5", 1000), unit("lstm_m1000__lrx1", 1000)]
    cells = [unit(m, s, [t.name for t in tune]) for m in ("lstm_m1000", "pru_g4_k2_m1400") for s in (1111, 1112)]
    order = seed_by_seed(cells + tune)
    assert [u.name for u in order] == [u.name for u in tune] + [cells[0].name, cells[2].name, cells[1].name,
                                                                cells[3].name]
    grower = Grower("cpu", order, {}, {}, argparse.Namespace(minutes=60, threads=1, config=[]))
    assert grower.next_unit()[1] is tune[0]
    assert grower.next_unit()[1] is tune[1]
    grower.running[tune[1].name] = object()  # still training: the next unit waits for it
    got = []
    waiting = threading.Thread(target=lambda: got.append(grower.next_unit()))
    waiting.start()
    time.sleep(0.5)
    assert not got
    del grower.running[tune[1].name]
    waiting.join(timeout=10)
    assert got[0][1] is cells[0]
    grower.failed.append(tune[0].name)  # a failed tuning cell: what it tunes is not started
    assert grower.next_unit() is None


def test_a_run_its_patience_on_the_best_stopped_is_not_flagged_still_improving(tmp_path):
    """Its last epoch may be a new lowest by less than min_delta: converged by the rule's measure. The same
    history capped, or under the older rule, is still improving."""
    from rnnrepro.analysis.run_endings import run_ending

    history = "epoch,val_loss\n" + "".join(f"{e},{5.0 - 0.0002 * e}\n" for e in range(1, 31))
    for rule, cap, flagged in (({"rule": "best", "patience": 6, "min_delta": 0.002}, 200, False),
                               ({"rule": "best", "patience": 6, "min_delta": 0.002}, 30, True),
                               ({"patience": 6, "min_delta": 0.002}, 200, True)):
        run = tmp_path / f"{rule.get('rule', 'previous')}{cap}"
        run.mkdir()
        (run / "history.csv").write_text(history)
        (run / "config.json").write_text(json.dumps({"recipe": {"early_stopping": rule, "epochs": cap}}))
        (run / "metrics.json").write_text(json.dumps({"model": "m", "dataset": "ptb", "seed": 1, "epochs": 30}))
        ending = run_ending(run)
        assert (ending["improving_pct"] == ending["improving_pct"]) is flagged, (rule, cap)


def test_the_tuning_table_marks_the_choice_the_edge_and_the_runs_their_cap_stopped():
    """Hand-written tuning cells (no training): the lowest validation loss is chosen; a run its epoch cap
    stopped (`capped` from rnnrepro.analysis.results.read_cells) is marked, since its loss is what it
    reached by the cap; a choice at an end of the grid marks the model's rows at the edge."""
    import pandas as pd

    from rnnrepro.analysis.tuning_curves import COLUMNS, tuning_table

    def cell(model, factor, loss, epochs, capped):
        token = f"{factor:g}".replace(".", "p")
        return {"dataset": "warpeace", "corpus": "warpeace", "model": f"{model}__lrx{token}", "budget": "cpu",
                "fraction": 10, "seed": 1000, "lr": 0.001 * factor, "val_loss": loss, "epochs": epochs,
                "best_epoch": epochs, "capped": capped}

    cells = pd.DataFrame([cell("a", 0.5, 1.52, 200, True), cell("a", 1, 1.49, 80, False), cell("a", 2, 1.51, 30, False),
                          cell("b", 0.5, 1.60, 90, False), cell("b", 1, 1.55, 40, False), cell("b", 2, 1.50, 20, False)])
    table = tuning_table(cells)
    assert list(table.columns) == COLUMNS
    by = table.set_index(["model", "lr_factor"])
    assert by["capped"].to_dict() == {("a", 0.5): True, ("a", 1.0): False, ("a", 2.0): False,
                                      ("b", 0.5): False, ("b", 1.0): False, ("b", 2.0): False}
    assert by.index[by["chosen"]].tolist() == [("a", 1.0), ("b", 2.0)]
    assert by.loc["a", "at_edge_of_grid"].tolist() == [False] * 3 and by.loc["b", "at_edge_of_grid"].all()


def test_patience_after_the_plateau_waits_for_the_run_to_leave_it():
    """`after_plateau`: checks above 95 % of the unigram loss never start patience's count; a run that
    never goes below it is not stopped by patience; the count starts at the first check below it."""
    from rnnrepro.train.stopping import plateau_exit, same_stop

    rule = {"rule": "best", "patience": 3, "min_delta": 0.002}
    waits = {**rule, "after_plateau": True}
    plateau = 5.0
    on_it = [{"val_loss": v} for v in (6.0, 4.99, 4.98, 4.99, 4.985, 4.99, 4.99)]  # the plateau, a new best first
    assert has_stalled(rule, on_it) and not has_stalled(waits, on_it, plateau)
    assert plateau_exit(on_it, plateau) is None
    left = on_it + [{"val_loss": v} for v in (4.5, 3.0, 2.0, 2.0, 2.0, 2.0)]
    assert plateau_exit(left, plateau) == 7  # 4.5 < 0.95 * 5.0
    assert not has_stalled(waits, left[:-1], plateau) and has_stalled(waits, left, plateau)
    with pytest.raises(ValueError, match="unigram loss"):
        has_stalled(waits, left, None)
    # a record made under patience counted from the start is the run the waiting rule trains exactly
    # when the waiting rule ends it where it ended: here patience ended it on the plateau, so it is not
    assert not same_stop(waits, on_it, plateau, stopped_by_rule=True)
    assert same_stop(waits, left, plateau, stopped_by_rule=True)
    assert not same_stop(waits, left, plateau, stopped_by_rule=False)  # its cap ended it: another run
    assert same_stop(waits, left[:-1], plateau, stopped_by_rule=False)
    assert not same_stop(waits, left, None, stopped_by_rule=True)  # no plateau known: not shown the same
