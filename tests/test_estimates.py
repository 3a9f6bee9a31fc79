"""How long a cell of your own will train, said before it trains (rnnrepro.estimates): from its baseline's
recorded epochs, in `records list` and `status`, on a small records tree."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rnnrepro import grid
from rnnrepro.configuration import REPO_ROOT, load_run_config, load_yaml
from rnnrepro.grid import load_study  # the study with the run's cells of your own
from rnnrepro.estimates import estimates

EXAMPLE = REPO_ROOT / "examples" / "mgu.yaml"
CPU = "Test CPU 9000"


def record(records: Path, model: str, seed: int, epochs: int, seconds: float, params: int, cpu: str = CPU,
           overhead: float = 60.0) -> None:
    run = records / "cpu" / "runs" / "pru" / "ptb" / model / "frac10" / f"seed{seed}"
    run.mkdir(parents=True)
    (run / "history.csv").write_text("epoch,train_loss,val_loss,seconds\n" + "".join(
        f"{e},5.0,5.1,{seconds}\n" for e in range(1, epochs + 1)))
    (run / "metrics.json").write_text(json.dumps({
        "epochs": epochs, "params": params, "train_seconds": epochs * seconds,
        "wall_seconds": epochs * seconds + overhead, "machine": {"cpu": cpu}}))


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A project folder with the study files, the example cell and a records tree of two LSTM seeds."""
    shutil.copytree(REPO_ROOT / "config", tmp_path / "config")
    shutil.copytree(REPO_ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    records = tmp_path / "records"
    record(records, "lstm_m1000", 1111, 100, 12.0, 570000)
    record(records, "lstm_m1000", 1112, 120, 12.0, 570000)
    record(records, "lstm_m1000", 1113, 100, 30.0, 570000, cpu="Another CPU")  # not this machine's: unused
    return tmp_path


def mgu_pru(budget="cpu"):
    custom = load_yaml(EXAMPLE)["custom_cells"]
    config = load_run_config({**load_yaml(REPO_ROOT / "config" / "config.yaml"), "budget": budget})
    return load_study("pru", custom_cells=custom, custom_source="examples/mgu.yaml"), config


def test_the_estimate_is_the_baselines_recorded_epochs_on_this_kind_of_machine(tree):
    study, config = mgu_pru()
    cells = [c for a in ("table1", "tuning") for c in grid.artifact_cells(study, config, a) if c.model.startswith("mgu")]
    (found,) = estimates({"pru": study}, config, cells, tree / "records", machine=CPU)
    assert (found.name, found.cells, found.tuning_cells) == ("mgu", 9, 4)
    param_budget = grid.architecture(study, config, "mgu", "ptb")["param_budget"]
    ratio = param_budget / 570000
    seed = 12.0 * 110 * ratio + 60  # mean of 100 and 120 epochs at 12 s, plus what the run spent outside them
    # no tuning run of the LSTM is recorded: each of the cell's is timed by the LSTM's seeds, to the tuning's cap
    cap = grid.resolve_cell(study, config, next(c for c in cells if "__" in c.model))["recipe"]["epochs"]
    assert cap < 100
    expected = 5 * seed + 4 * (12.0 * cap * ratio + 60)
    assert found.seconds == pytest.approx(expected)
    words = "\n".join(found.how)
    assert "from lstm_m1000's 2 recorded runs (12.0 s/epoch, 110 epochs) on Test CPU 9000, this machine's CPU" in words
    assert f"× {ratio:.2f} for its parameters" in words
    # on another machine every record counts, and the words say so
    (other,) = estimates({"pru": study}, config, cells[:1], tree / "records", machine="Elsewhere")
    assert "not this machine's Elsewhere" in other.how[0] and "3 recorded runs" in other.how[0]


def test_no_record_of_the_baseline_gives_no_time_but_says_why(tree):
    study, config = mgu_pru()
    shutil.rmtree(tree / "records")
    cells = [c for c in grid.artifact_cells(study, config, "table1") if c.model == "mgu"]
    (found,) = estimates({"pru": study}, config, cells, tree / "records", machine=CPU)
    assert found.seconds is None and "lstm_m1000 has no record at cpu on ptb frac10" in found.line()


def test_records_list_says_how_many_cells_train_and_how_long(tree, capsys):
    from rnnrepro.records import main

    assert main(["list", "--budget", "cpu", "--configfile", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "your cell mgu (pru): 9 training cells to train (4 tuning runs, 5 seeds), estimated " in out, out[-2000:]
    assert "a seed from lstm_m1000's" in out
    assert "your cell mgu (lru): 11 training cells to train" in out and "gru_24m has no record at cpu" in out


def test_status_lists_the_cells_of_your_own_before_they_train_with_the_estimate(tree, capsys):
    from rnnrepro.status import main

    assert main(["--budget", "cpu", "--study", "pru", "--configfile", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("pru ")]
    assert sum(" mgu " in row for row in rows) == 5 and any("mgu__lrx1" in row for row in rows)  # its five seeds and its tuning runs, pending
    assert "your cell mgu (pru): 9 training cells to train (4 tuning runs, 5 seeds), estimated " in out
    assert main(["--budget", "cpu", "--study", "pru"]) == 0
    assert " mgu " not in capsys.readouterr().out  # without the config file, the study files' grid alone
