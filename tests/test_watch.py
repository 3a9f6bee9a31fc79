"""`python -m rnnrepro.status --watch`: the cells being trained now, from their progress.json, with
epoch, loss, elapsed time and ETAs (rnnrepro.watch)."""

import io
import json
import os
import socket
import time
from datetime import datetime, timezone

import pytest

from rnnrepro import status, watch
from rnnrepro.train import progress_file

NOW = float(int(time.time()))  # a whole second, as progress.json writes its times


def cell(root, budget_tree, model, recipe, now=NOW, **record):
    """A run folder with a fabricated progress.json of a live trainer (this process), written at ``now``,
    and its config.json."""
    run_dir = root / budget_tree / "runs/pru/ptb" / model / "frac10/seed1111"
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"recipe": recipe}))
    progress_file.write(run_dir, {
        "state": "running", "phase": "training", "cell": f"pru/ptb/{model}/frac10/seed1111",
        "pid": os.getpid(), "host": socket.gethostname(),
        "started_at": datetime.fromtimestamp(now - 3000, timezone.utc).isoformat(timespec="seconds"),
        "updated_at": datetime.fromtimestamp(now, timezone.utc).isoformat(timespec="seconds"),
        **record})
    return run_dir


# 3 epochs and a quarter in 1,300 s: 400 s an epoch, 300 s to the end of this one, 400 * 6.75 to the cap of 10
TRAINING = {"epoch": 4, "epochs": 10, "epochs_done": 3, "batch": 25, "batches_per_epoch": 100, "iteration": 325,
            "train_loss": 5.81234, "val_loss": 5.9, "val_ppl": 365.0, "best_val_loss": 5.85, "best_val_ppl": 347.2,
            "seconds": 1300.0, "eta_seconds": 2700}


def test_the_view_shows_each_live_cell_with_its_etas(tmp_path):
    cell(tmp_path, "results/cpu", "lstm_m1000", {"epochs": 10, "early_stopping": {"patience": 6, "min_delta": 0.002}},
         **TRAINING)
    cell(tmp_path, "results", "pru_g4_k2_m1400", {"epochs": 10, "early_stopping": None, "stop_on_nonmono": False},
         **TRAINING)
    cell(tmp_path, "results/cpu", "lstm_m1400", {"epochs": 10}, **{**TRAINING, "state": "done"})
    cell(tmp_path, "results/cpu", "mgu", {"epochs": 10}, **{**TRAINING, "pid": 2**22 + 7})  # its process is gone
    rows = {row["cell"]: row for row in watch.rows(tmp_path, NOW)}
    assert sorted(rows) == ["cpu: pru/ptb/lstm_m1000/frac10/seed1111", "paper: pru/ptb/pru_g4_k2_m1400/frac10/seed1111"]
    early, capped = rows["cpu: pru/ptb/lstm_m1000/frac10/seed1111"], rows["paper: pru/ptb/pru_g4_k2_m1400/frac10/seed1111"]
    assert early["epoch"] == "4/10 (25/100 batches)"
    assert early["train loss"] == "5.8123" and early["val loss"] == "5.9000 (5.8500)"
    assert early["elapsed"] == "21m40s" and early["epoch ETA"] == "5m00s"
    assert early["run ETA"] == "at most 45m00s"  # its stopping rule can end it before the cap
    assert capped["run ETA"] == "45m00s"  # the epoch cap alone ends it
    screen = watch.view(tmp_path, NOW, 5)
    assert "2 training cells being trained (refreshed every 5 s" in screen
    assert "at most: the recipe's stopping rule can end the run before its epoch cap" in screen
    assert "lstm_m1400" not in screen and "mgu" not in screen
    only = watch.view(tmp_path, NOW, 5, budgets=["paper"], studies=["pru"])
    assert "pru_g4_k2_m1400" in only and "lstm_m1000" not in only and "at most:" not in only
    assert "none now" in watch.view(tmp_path, NOW, 5, studies=["lru"])


def test_an_older_record_counts_down_and_a_fresh_epoch_has_no_eta(tmp_path):
    cell(tmp_path, "results/cpu", "lstm_m1000", {"epochs": 10}, **TRAINING)
    later = watch.rows(tmp_path, NOW + 60)[0]  # a heartbeat 60 s old (within the 2 minutes a live one has)
    assert later["elapsed"] == "22m40s" and later["epoch ETA"] == "4m00s" and later["run ETA"] == "44m00s"
    assert watch.estimate({**TRAINING, "epoch": 1, "batch": 0, "batches_per_epoch": None}, 0) == (None, None)


def test_status_watch_refreshes_until_ctrl_c(tmp_path, monkeypatch):
    cell(tmp_path, "results/cpu", "lstm_m1000", {"epochs": 10}, now=time.time(), **TRAINING)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config").mkdir()
    naps = []

    def sleep(seconds):
        naps.append(seconds)
        if len(naps) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(watch.time, "sleep", sleep)
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    assert status.main(["--watch", "2.5"]) == 0
    assert naps == [2.5, 2.5] and out.getvalue().count("1 training cell being trained") == 2
    assert "pru/ptb/lstm_m1000/frac10/seed1111" in out.getvalue()
    with pytest.raises(SystemExit):
        status.main(["--watch", "0"])


def test_the_trainer_writes_the_training_loss_since_the_last_check(tmp_path):
    """progress.json's train_loss: the mean loss of the batches since the last validation (none before one)."""
    import torch

    from rnnrepro.train.loop import TrainingLoop

    class Task:
        def epoch_length(self):
            return 100

        def fraction_done(self, progress):
            return 0.25

    loop = TrainingLoop({"recipe": {"epochs": 4}}, Task(), tmp_path, torch.device("cpu"),
                        progress_file.ProgressFile(tmp_path, "pru/ptb/x/frac10/seed1111", snapshot=dict))
    assert loop.snapshot()["train_loss"] is None
    loop.progress.loss_sum, loop.progress.loss_batches = 12.0, 2
    assert loop.snapshot()["train_loss"] == 6.0
    assert status.progress_problem(loop.snapshot()) is None
