"""The training CLI on synthetic corpora: outputs, learning, resume after a kill, SIGTERM, NaN, a loss too
large for its perplexity, a full disk or unusable run folder, damaged checkpoints, the precision setting;
the autocomplete task's outputs, its patience on the best and the weights it scores, and its resume after
a kill and its NaN beside the language model's."""

import errno
import io
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import finished, numbers, train_cli, train_here

from rnnrepro import grid, precision
from rnnrepro.configuration import REPO_ROOT, ConfigError, load_run_config, load_study, validate_cell_config
from rnnrepro.data import fetch, prepare
from rnnrepro.data.autocomplete import build
from rnnrepro.data.preprocess import fraction
from rnnrepro.models.language_model import Dropouts, LanguageModel
from rnnrepro.train.checkpoint import DamagedCheckpoint, save_atomic
from rnnrepro.train.files import RunFolderError, write_atomic
from rnnrepro.train.language_model import LanguageModelTask, evaluate
from rnnrepro.train.loop import LARGEST_LOSS, Progress, StopFlag, loss_problem, perplexity


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    raw = fetch("synth_ptb", root / "raw")
    prepare("synth_ptb", raw, root / "processed")
    return root / "processed"


@pytest.fixture(scope="module")
def short_train_file(corpus_dir, tmp_path_factory) -> Path:
    """The first 30 % of the synthetic training split (as a fraction cell's file is made): the resume and
    finetune tests check how training stops and goes on, not what it learns, in a third of the time."""
    out = tmp_path_factory.mktemp("fraction") / "train.txt"
    fraction(corpus_dir / "train.txt", 30, out, tokenizer="word")
    return out


def smoke_config(corpus_dir: Path, model: str, hidden_size: int = 32, embedding_size: int = 16,
                 train_file: Path | None = None, **recipe) -> dict:
    """The smoke budget's config of a model, narrowed further to keep these tests fast; ``train_file``
    replaces the corpus's training split."""
    run_config = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    run_config.update(budget="smoke", device="cpu", threads=1)
    cfg = grid.resolve_cell(load_study("pru"), run_config, grid.Cell("pru", "synth_ptb", model, 100, 3, "smoke"))
    cfg["data"] = {"dir": str(corpus_dir), "train_file": str(train_file or corpus_dir / "train.txt")}
    cfg["architecture"].update(hidden_size=hidden_size, embedding_size=embedding_size)
    cfg["recipe"].update(recipe)
    return cfg


def history_without_timing(run_dir: Path) -> list[str]:
    lines = (run_dir / "history.csv").read_text().splitlines()
    header = lines[0].split(",")
    keep = [i for i, name in enumerate(header) if name not in {"seconds", "tokens_per_s", "sequences_per_s"}]
    return [",".join(row.split(",")[i] for i in keep) for row in lines]


def unigram_ppl(corpus_dir: Path, split: str = "test") -> float:
    def tokens(split):
        return [t for line in (corpus_dir / f"{split}.txt").read_text().splitlines() for t in line.split() + ["<eos>"]]
    counts = Counter(tokens("train"))
    total = sum(counts.values())
    test = tokens(split)
    return math.exp(-sum(math.log(counts[t] / total) for t in test) / len(test))


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, corpus_dir, short_train_file):
    """An uninterrupted 3-epoch PRU run, the baseline of the resume tests."""
    run_dir = tmp_path_factory.mktemp("runs") / "reference"
    cfg = smoke_config(corpus_dir, "pru_g4_k2_m1400", train_file=short_train_file, epochs=3)
    code, err = train_here(run_dir, cfg)
    assert code == 0, err
    return run_dir, cfg


def test_outputs_and_learning(reference_run, corpus_dir):
    run_dir, cfg = reference_run
    for name in ("config.json", "history.csv", "metrics.json", "model.pt"):
        assert (run_dir / name).exists(), name
    assert json.loads((run_dir / "config.json").read_text()) == cfg
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["epochs"] == 3 and metrics["params"] > 0
    assert metrics["torch_version"] and metrics["device"] == "cpu"
    history = (run_dir / "history.csv").read_text().splitlines()
    assert history[0].startswith("epoch,train_loss,train_ppl,val_loss,val_ppl,lr")
    assert "test_loss" not in history[0]  # the PRU recipes do not score the test split every epoch
    assert len(history) == 1 + 3


def test_synthetic_corpus_rewards_a_recurrent_model(corpus_dir, tmp_path):
    """An LSTM trained briefly on the synthetic corpus clearly beats a unigram model. With
    test_every_epoch (the LRU recipe) history.csv has the test loss of every epoch, and the one of the
    best epoch is the reported test loss."""
    cfg = smoke_config(corpus_dir, "lstm_m1000", hidden_size=64, epochs=2, dropout_input=0.0,
                       dropout_hidden=0.0, dropout_output=0.0, ar_alpha=0.0, tar_beta=0.0, test_every_epoch=True)
    cfg["architecture"].update(layers=1, tie_weights=False)
    code, err = train_here(tmp_path / "lstm", cfg)
    assert code == 0, err
    metrics = json.loads((tmp_path / "lstm" / "metrics.json").read_text())
    assert metrics["test_ppl"] < 0.6 * unigram_ppl(corpus_dir)
    # the frequency model's validation loss (the `stalled` flag's reference), counted here without the
    # trainer's add-one smoothing: close, not equal
    assert metrics["val_unigram_loss"] == pytest.approx(math.log(unigram_ppl(corpus_dir, "valid")), rel=0.01)
    assert metrics["val_loss"] < metrics["val_unigram_loss"]
    history = pd.read_csv(tmp_path / "lstm" / "history.csv")
    assert len(history) == 2 and history["test_loss"].map(math.isfinite).all()
    assert history["test_loss"].iloc[-1] < history["test_loss"].iloc[0]
    best = history.loc[history["epoch"] == metrics["best_epoch"], "test_loss"].item()
    assert best == pytest.approx(metrics["test_loss"], rel=1e-6)


@pytest.mark.parametrize("tie_weights", [False, True])
def test_initialisation_schemes(tie_weights):
    """awd: embedding and decoder U(-0.1, 0.1), decoder bias 0; torch: N(0, 1) embedding and the
    nn.Linear default decoder (the LRU authors' langModel)."""
    dropouts = Dropouts("elementwise", 0.0, 0.0, 0.0, 0.0, 0.0)
    torch.manual_seed(0)
    awd = LanguageModel(500, "lstm", 64, 64, 1, tie_weights, {}, dropouts)
    torch.manual_seed(0)
    default = LanguageModel(500, "lstm", 64, 64, 1, tie_weights, {}, dropouts, init="torch")
    assert awd.embedding.weight.abs().max() <= 0.1 and (awd.decoder.bias == 0).all()
    assert 0.9 < default.embedding.weight.std() < 1.1 and default.embedding.weight.abs().max() > 1
    assert (default.decoder.bias != 0).all() and default.decoder.bias.abs().max() <= 1 / 8
    if tie_weights:
        assert default.decoder.weight is default.embedding.weight
    else:
        assert default.decoder.weight.abs().max() <= 1 / 8
    with pytest.raises(ValueError, match="init='xavier'"):
        LanguageModel(500, "lstm", 64, 64, 1, tie_weights, {}, dropouts, init="xavier")


def test_uniform_all_initialises_every_parameter():
    """uniform_all (Zaremba et al.'s code): every parameter, the LSTM's weights and both biases
    included, U(-0.1, 0.1); a 16-wide nn.LSTM would otherwise start at U(+-1/4)."""
    dropouts = Dropouts("elementwise", 0.0, 0.0, 0.0, 0.0, 0.0)
    torch.manual_seed(0)
    model = LanguageModel(500, "lstm", 16, 16, 2, False, {}, dropouts, init="uniform_all")
    for name, parameter in model.named_parameters():
        assert parameter.abs().max() <= 0.1, name
        assert parameter.abs().max() > 0.08, name  # drawn across the whole range, not left at zero
    torch.manual_seed(0)
    default = LanguageModel(500, "lstm", 16, 16, 2, False, {}, dropouts)
    assert default.layers[0].rnn.bias_hh_l0.abs().max() > 0.1


def sgd_schedule_config(corpus_dir: Path) -> dict:
    """Zaremba et al.'s recipe on the synthetic corpus: plain SGD, the rate halved from epoch 2 on."""
    return smoke_config(corpus_dir, "zaremba_small", epochs=3, lr_decay_start=2, ar_alpha=0.0, tar_beta=0.0)


@pytest.fixture(scope="module")
def sgd_run(corpus_dir, tmp_path_factory):
    """An uninterrupted run of Zaremba et al.'s recipe: its rates, and the baseline of its resume test."""
    cfg = sgd_schedule_config(corpus_dir)
    run_dir = tmp_path_factory.mktemp("sgd") / "uninterrupted"
    code, err = train_here(run_dir, cfg)
    assert code == 0, err
    return run_dir, cfg


def test_sgd_step_schedule_lowers_the_rate_per_epoch(sgd_run):
    run_dir, cfg = sgd_run
    assert cfg["recipe"]["optimizer"] == "sgd" and cfg["architecture"]["init"] == "uniform_all"
    history = pd.read_csv(run_dir / "history.csv")
    lr = cfg["recipe"]["lr"]
    assert history["lr"].tolist() == [lr, lr / 2, lr / 4]
    assert not history["averaging"].any()


@pytest.mark.slow
def test_sgd_step_schedule_resumes_bit_for_bit(sgd_run, tmp_path):
    """Killed inside epoch 3 (the second at a lowered rate), the run resumes on the same rates: the
    schedule is derived from the epoch in the checkpoint."""
    uninterrupted, cfg = sgd_run
    run_dir = tmp_path / "killed"
    proc = train_cli(run_dir, cfg)
    deadline, log = time.time() + 300, ""
    while "epoch 2:" not in log:  # printed after epoch 2's checkpoint is written
        line = proc.stderr.readline()
        assert line or proc.poll() is None, "training ended before it could be killed"
        log += line
        assert time.time() < deadline
    # Killed at once: epoch 3 has begun. A pause here could outlast epoch 3 (0.4 s on an idle box) and
    # the final evaluation, leaving nothing to resume.
    proc.kill()
    proc.wait()
    assert not (run_dir / "metrics.json").exists()
    code, err = train_here(run_dir, cfg)
    assert code == 0, err
    assert "resuming from" in err and "epoch 3" in err
    assert numbers(run_dir / "metrics.json") == numbers(uninterrupted / "metrics.json")
    assert history_without_timing(run_dir) == history_without_timing(uninterrupted)


def test_lru_models_use_the_authors_initialisation():
    run_config = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    lru_cfg = grid.resolve_cell(load_study("lru"), run_config, grid.Cell("lru", "ptb_char", "lru_24m", 100, 1111, "paper"))
    pru_cfg = grid.resolve_cell(load_study("pru"), run_config, grid.Cell("pru", "ptb", "lstm_m1000", 100, 1111, "paper"))
    assert lru_cfg["architecture"]["init"] == "torch" and lru_cfg["recipe"]["test_every_epoch"]
    assert "init" not in pru_cfg["architecture"] and not pru_cfg["recipe"]["test_every_epoch"]


@pytest.mark.slow
@pytest.mark.parametrize("signum, exit_code, said", [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "Ctrl-C")])
def test_sigterm_checkpoints_mid_epoch_and_resumes(reference_run, tmp_path, signum, exit_code, said):
    """A scheduler's SIGTERM, or Ctrl-C at a terminal: the resume checkpoint is written at the next batch,
    one line says so (never a KeyboardInterrupt traceback in the job's log), and a rerun goes on from
    there to the very numbers of a run never stopped. Both signals end in the same checkpoint code, so
    the rerun to the end is trained once, after SIGTERM (the scheduler's case); after Ctrl-C the rerun
    is only seen to resume mid-epoch."""
    _, cfg = reference_run
    run_dir = tmp_path / "terminated"
    proc = train_cli(run_dir, cfg)
    while "epoch 1:" not in proc.stderr.readline():
        assert proc.poll() is None
    time.sleep(0.3)
    proc.send_signal(signum)
    code, err = finished(proc)
    assert code == exit_code, err
    assert f"stopped by {said}; resume checkpoint written to" in err and "Traceback" not in err, err
    assert json.loads((run_dir / "progress.json").read_text())["stopped_by"].startswith(said)
    assert (run_dir / "checkpoint" / "last.pt").exists()
    if signum == signal.SIGINT:
        proc = train_cli(run_dir, cfg)
        while "resuming from" not in (line := proc.stderr.readline()):
            assert line and proc.poll() is None, line
        assert "row 0" not in line, line  # continued mid-epoch
        proc.kill()
        proc.wait()
        return
    code, err = train_here(run_dir, cfg)
    assert code == 0, err
    assert "resuming from" in err and "row 0" not in err  # continued mid-epoch
    assert numbers(run_dir / "metrics.json") == numbers(reference_run[0] / "metrics.json")


def test_changed_config_starts_afresh(reference_run, tmp_path):
    _, cfg = reference_run
    run_dir = tmp_path / "changed"
    code, err = train_here(run_dir, dict(cfg, recipe=dict(cfg["recipe"], epochs=1)))
    assert code == 0, err
    code, err = train_here(run_dir, dict(cfg, recipe=dict(cfg["recipe"], epochs=1, lr=2 * cfg["recipe"]["lr"])))
    assert code == 0, err
    assert "different config" in err


def test_gpu_out_of_memory_names_the_cell_and_the_jobs_per_gpu(corpus_dir, tmp_path, monkeypatch, capsys):
    """Eight paper-size cells on one 80 GB H100 ran out of memory (docs/gpu.md): say which cell, how many
    jobs share a GPU, and what to set; exit 1 like any failed cell."""
    from rnnrepro.train import __main__ as cli

    def runs_out(run_dir, cfg, device):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 48.00 MiB. GPU 0 has a total "
                                     "capacity of 79.18 GiB of which 28.69 MiB is free.\nmore lines")
    monkeypatch.setitem(cli.TRAINERS, "lm", runs_out)
    monkeypatch.setenv("RNNREPRO_JOBS_PER_GPU", "8")
    cfg = smoke_config(corpus_dir, "lstm_m1000")
    assert cli.main(["--run-dir", str(tmp_path / "oom"), "--config", json.dumps(cfg), "--device", "cpu",
                     "--threads", "1"]) == 1
    err = capsys.readouterr().err
    assert f"cell {tmp_path / 'oom'}: the GPU ran out of memory (CUDA out of memory. Tried to allocate 48.00 MiB." in err
    assert "RNNREPRO_JOBS_PER_GPU=8" in err and "fewer jobs per GPU, e.g. RNNREPRO_JOBS_PER_GPU=1" in err
    assert str(tmp_path / "oom" / "checkpoint") in err and "more lines" not in err
    # one job alone: fewer jobs cannot help
    monkeypatch.setenv("RNNREPRO_JOBS_PER_GPU", "1")
    assert cli.main(["--run-dir", str(tmp_path / "oom1"), "--config", json.dumps(cfg), "--device", "cpu",
                     "--threads", "1"]) == 1
    err = capsys.readouterr().err
    assert "This cell alone does not fit the GPU" in err and "fewer jobs" not in err


def test_cpu_out_of_memory_names_the_cell_its_size_and_what_to_lower(corpus_dir, tmp_path, monkeypatch, capsys):
    """torch's CPU allocator raises a RuntimeError of its own, not OutOfMemoryError: the same one line,
    with the cell's size and what to lower, instead of a raw traceback."""
    from rnnrepro.train import __main__ as cli

    def runs_out(run_dir, cfg, device):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: "
                           "you tried to allocate 80000000000 bytes. Error code 12 (Cannot allocate memory)")
    monkeypatch.setitem(cli.TRAINERS, "lm", runs_out)
    cfg = smoke_config(corpus_dir, "lstm_m1000")
    assert cli.main(["--run-dir", str(tmp_path / "oom"), "--config", json.dumps(cfg), "--device", "cpu",
                     "--threads", "1"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"cell {tmp_path / 'oom'} (model lstm_m1000 of study pru): the machine ran out of memory" in err
    assert f"hidden_size {cfg['architecture']['hidden_size']}" in err
    assert f"batch_size {cfg['recipe']['batch_size']}" in err and "lower the recipe's batch_size or bptt" in err


def test_an_empty_split_names_the_split_its_file_and_the_key(corpus_dir, tmp_path):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(corpus_dir, data)
    (data / "valid.txt").write_text("")
    cfg = smoke_config(data.parent, "lstm_m1000")
    cfg["data"] = {"dir": str(data), "train_file": str(data / "train.txt")}
    code, err = train_here(tmp_path / "run", cfg)
    assert code == 1
    key = "eval_batch_size" if cfg["recipe"]["eval_batch_size"] >= cfg["recipe"]["test_batch_size"] else "test_batch_size"
    assert (f"the valid split {data / 'valid.txt'} is empty: too few for the recipe's {key} {cfg['recipe'][key]}"
            in err), err


def test_finetune_starts_from_parent(reference_run, corpus_dir, short_train_file, tmp_path):
    parent_dir, _ = reference_run
    cfg = smoke_config(corpus_dir, "awd_pru_g4_k2_m1400_ft", train_file=short_train_file, epochs=2)
    cfg["init_from"] = str(parent_dir / "model.pt")
    code, err = train_here(tmp_path / "ft", cfg)
    # the parent is a standard-dropout PRU of the same shape, so the weights load
    assert code == 0, err
    metrics = json.loads((tmp_path / "ft" / "metrics.json").read_text())
    parent = json.loads((parent_dir / "metrics.json").read_text())
    # the starting point counts as the first best: finetuning never ends worse on validation
    assert metrics["best_val_loss_during_training"] <= parent["best_val_loss_during_training"] + 1e-6


@pytest.mark.slow
def test_a_finetuned_cell_whose_parent_changed_starts_afresh(reference_run, corpus_dir, short_train_file, tmp_path):
    """A finished finetuned cell run again after its parent was retrained (same config, other weights)
    trains again from the new weights: its resume checkpoint knows which weights it started from."""
    parent = tmp_path / "parent"
    shutil.copytree(reference_run[0], parent)
    cfg = smoke_config(corpus_dir, "awd_pru_g4_k2_m1400_ft", train_file=short_train_file, epochs=1)
    cfg["init_from"] = str(parent / "model.pt")
    code, err = train_here(tmp_path / "ft", cfg)
    assert code == 0, err
    saved = torch.load(parent / "model.pt", weights_only=False)
    saved["config"] = {**saved["config"], "recipe": {**saved["config"]["recipe"], "epochs": 4}}
    torch.save(saved, parent / "model.pt")  # the same weights written again under a raised cap
    code, err = train_here(tmp_path / "ft", cfg)
    assert code == 0 and "resuming from" in err and "afresh" not in err, err

    generator = torch.Generator().manual_seed(0)
    saved["state_dict"] = {name: w + 0.01 * torch.randn(w.shape, generator=generator)
                           for name, w in saved["state_dict"].items()}
    torch.save(saved, parent / "model.pt")  # the parent retrained: other weights
    code, err = train_here(tmp_path / "ft", cfg)
    assert code == 0, err
    assert f"({parent / 'model.pt'} has changed since); starting this cell afresh" in err, err
    code, err = train_here(tmp_path / "fresh", cfg)
    assert code == 0, err
    assert numbers(tmp_path / "ft" / "metrics.json") == numbers(tmp_path / "fresh" / "metrics.json")


def test_bad_config_is_rejected(tmp_path, corpus_dir):
    cfg = smoke_config(corpus_dir, "lstm_m1000")
    cfg["recipe"]["optimiser"] = cfg["recipe"].pop("optimizer")
    code, err = train_here(tmp_path / "bad", cfg)
    assert code == 1 and "unknown key 'optimiser'" in err


def test_missing_dataset_is_named(tmp_path, corpus_dir):
    cfg = smoke_config(corpus_dir, "lstm_m1000")
    cfg["data"] = {"dir": str(tmp_path / "nowhere"), "train_file": str(tmp_path / "nowhere" / "train.txt")}
    code, err = train_here(tmp_path / "missing", cfg)
    assert code == 1 and "nowhere" in err


# ---- failures of one training loop (rnnrepro.train.loop), shared by every task --------------------

def test_perplexity_never_overflows():
    assert perplexity(1.0) == math.e
    assert perplexity(LARGEST_LOSS) < math.inf and perplexity(LARGEST_LOSS + 1e-9) == math.inf
    assert perplexity(1e6) == math.inf and perplexity(math.inf) == math.inf and math.isnan(perplexity(math.nan))
    assert loss_problem(5.0, "training") is None
    assert "too large for its perplexity" in loss_problem(1e5, "training")
    assert loss_problem(math.nan, "validation") == "the validation loss is nan"


def test_large_finite_loss_stops_like_nan(corpus_dir, tmp_path):
    """lr 1e6: the loss stays finite but its perplexity overflows (math.exp raised OverflowError)."""
    cfg = smoke_config(corpus_dir, "lstm_m1000", lr=1e6, epochs=1, ar_alpha=0.0, tar_beta=0.0)
    code, err = train_here(tmp_path / "huge", cfg)
    assert code == 1, err
    assert "Traceback" not in err and "OverflowError" not in err
    assert re.search(r"cell pru/synth_ptb/lstm_m1000/frac100/seed3, epoch 1, batch \d+: the training loss is "
                     r"\S+ nats, too large for its perplexity to be a number", err), err
    assert "Lower `lr` or `clip` of recipe 'standard' in config/studies/pru.yaml" in err
    assert not (tmp_path / "huge" / "metrics.json").exists()


def test_run_folder_that_cannot_be_made_is_named(corpus_dir, tmp_path):
    """A file where the run folder's parent should be: refused even as root (unlike chmod)."""
    (tmp_path / "results").write_text("not a folder")
    run_dir = tmp_path / "results" / "cell"
    code, err = train_here(run_dir, smoke_config(corpus_dir, "lstm_m1000", epochs=1))
    assert code == 1, err
    assert "Traceback" not in err
    assert f"cannot write {run_dir / 'config.json'}" in err and "A file stands where a folder" in err
    assert (tmp_path / "results").read_text() == "not a folder"


class FullDisk(io.RawIOBase):
    """A file that takes ``room`` bytes, then fails as a full disk does (ENOSPC)."""

    def __init__(self, file, room: int):
        self.file, self.room = file, room

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return self.file.write(data)


FULL_DISK = """
import sys, torch
sys.path.insert(0, "{tests}")
from test_training import FullDisk
from rnnrepro.train.__main__ import main
save, writes = torch.save, []
def save_on_a_full_disk(obj, f, *args, **kwargs):
    if getattr(f, "name", "").endswith("last.pt.tmp"):
        writes.append(f.name)
        if len(writes) == {fail_at}:  # 1000 bytes, then the disk is full: torch raises its own RuntimeError
            return save(obj, FullDisk(f, 1000), *args, **kwargs)
    return save(obj, f, *args, **kwargs)
torch.save = save_on_a_full_disk
sys.exit(main(sys.argv[1:]))
"""


def test_a_write_failing_for_any_reason_leaves_no_tmp(tmp_path):
    """torch.save on a full disk raises RuntimeError("... unexpected pos ..."), the ENOSPC only in its
    chain: still the message of a full disk, naming the file and the fix; the old file stays; another
    error passes unchanged. No .tmp is left either way."""
    target = tmp_path / "checkpoint" / "last.pt"
    save_atomic({"epoch": 1}, target)
    with pytest.raises(RunFolderError) as full:
        write_atomic(target, lambda f: torch.save({"weights": torch.zeros(1000)}, FullDisk(f, 1000)))
    assert str(full.value).startswith(f"cannot write {target}: No space left on device. Free space on the disk "
                                      f"that holds {target.parent}")
    assert "unexpected pos" not in str(full.value)

    def broken_writer(f):
        f.write(b"half")
        raise ValueError("not a tensor")

    with pytest.raises(ValueError, match="not a tensor"):
        write_atomic(target, broken_writer)
    assert sorted(p.name for p in target.parent.iterdir()) == ["last.pt"]
    assert torch.load(target) == {"epoch": 1}


@pytest.mark.slow
def test_full_disk_keeps_the_last_good_checkpoint(reference_run, tmp_path):
    """The disk fills while the checkpoint after epoch 2 is written (torch raises its RuntimeError, the
    ENOSPC in its chain): the error names the file and the fix, the checkpoint after epoch 1 is intact,
    and a rerun resumes from it to the uninterrupted result."""
    _, cfg = reference_run
    run_dir = tmp_path / "full"
    checkpoint_file = run_dir / "checkpoint" / "last.pt"
    script = FULL_DISK.replace("{fail_at}", "3").replace("{tests}", str(Path(__file__).parent))
    proc = subprocess.run([sys.executable, "-c", script, "--run-dir", str(run_dir), "--config", json.dumps(cfg),
                           "--device", "cpu", "--threads", "1"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr
    assert f"cannot write {checkpoint_file}: No space left on device. Free space on the disk" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not checkpoint_file.with_name("last.pt.tmp").exists()
    saved = torch.load(checkpoint_file, weights_only=False)
    assert len(saved["progress"].history) == 1 and not (run_dir / "metrics.json").exists()
    code, err = train_here(run_dir, cfg)
    assert code == 0, err
    assert "resuming from" in err and "epoch 1, row" in err
    assert numbers(run_dir / "metrics.json") == numbers(reference_run[0] / "metrics.json")


@pytest.mark.slow
def test_damaged_checkpoint_is_set_aside(reference_run, tmp_path):
    """A truncated resume checkpoint: named, kept as last.pt.damaged, and the cell starts afresh to the
    same result as an uninterrupted run (before, every rerun failed on it)."""
    reference_dir, cfg = reference_run
    run_dir = tmp_path / "damaged"
    shutil.copytree(reference_dir / "checkpoint", run_dir / "checkpoint")
    checkpoint_file = run_dir / "checkpoint" / "last.pt"
    damaged = checkpoint_file.read_bytes()[:5000]
    checkpoint_file.write_bytes(damaged)
    code, err = train_here(run_dir, cfg)
    assert code == 0, err
    assert f"warning: {checkpoint_file} is damaged" in err and "starting this cell afresh" in err
    assert (run_dir / "checkpoint" / "last.pt.damaged").read_bytes() == damaged
    assert "resuming from" not in err
    assert numbers(run_dir / "metrics.json") == numbers(reference_dir / "metrics.json")


def test_damaged_best_weights_are_caught_before_resuming(reference_run, corpus_dir, tmp_path):
    """best.pt is what the final evaluation loads: a resume checks it first rather than fail at the end."""
    _, cfg = reference_run
    best = tmp_path / "checkpoint" / "best.pt"
    best.parent.mkdir()
    best.write_bytes(b"\x00garbage")
    task = LanguageModelTask(cfg, tmp_path, torch.device("cpu"))
    with pytest.raises(DamagedCheckpoint, match=re.escape(str(best))):
        task.load_state_dict(task.state_dict(), Progress(best_val_loss=4.2, best_epoch=1))
    best.unlink()
    with pytest.raises(DamagedCheckpoint, match="it is missing"):
        task.load_state_dict(task.state_dict(), Progress(best_val_loss=4.2, best_epoch=1))


def test_damaged_parent_weights_are_named(corpus_dir, tmp_path):
    parent = tmp_path / "parent" / "model.pt"
    parent.parent.mkdir()
    parent.write_bytes(b"truncated")
    cfg = smoke_config(corpus_dir, "awd_pru_g4_k2_m1400_ft", epochs=1)
    cfg["init_from"] = str(parent)
    code, err = train_here(tmp_path / "ft", cfg)
    assert code == 1, err
    assert f"{parent} is damaged" in err and "delete it and its metrics.json" in err
    assert "Traceback" not in err and parent.read_bytes() == b"truncated"


# ---- the matmul precision setting ---------------------------------------------------------------

def test_precision_flows_from_the_run_config(corpus_dir, reference_run):
    run_config = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    assert run_config["precision"] == "fp32"
    cfg = grid.resolve_cell(load_study("pru"), dict(run_config, precision="tf32"),
                            grid.Cell("pru", "ptb", "lstm_m1000", 100, 1111, "paper"))
    assert cfg["precision"] == "tf32"
    with pytest.raises(ConfigError, match="precision"):
        load_run_config(dict(run_config, precision="fp16"))
    with pytest.raises(ConfigError, match="precision"):
        validate_cell_config(dict(reference_run[1], precision="fp16"), "--config")
    metrics = json.loads((reference_run[0] / "metrics.json").read_text())
    assert metrics["precision"] == "fp32" and metrics["autocast_dtype"] is None
    assert metrics["cuda_matmul_fp32"] == metrics["cudnn_rnn_fp32"] == "ieee"


def bf16_lstm_unsupported_here() -> str | None:
    """Why this CPU cannot run the LSTM in bfloat16 (found by trying), or None."""
    try:
        precision.check_runs("lstm", {}, 8, 8, "bf16", torch.device("cpu"))
    except precision.PrecisionUnsupported as e:
        return str(e)
    return None


def test_bf16_autocast_reaches_the_arithmetic(corpus_dir, tmp_path):
    """bf16 runs the forward passes in bfloat16 (other numbers than fp32) and is recorded."""
    unsupported = bf16_lstm_unsupported_here()
    if unsupported:
        pytest.skip(f"this CPU cannot run the LSTM in bfloat16: {unsupported}")
    dropouts = Dropouts("elementwise", 0.0, 0.0, 0.0, 0.0, 0.0)
    torch.manual_seed(0)
    model = LanguageModel(50, "lstm", 16, 32, 1, False, {}, dropouts)
    stream = torch.randint(50, (400,))
    losses = {name: evaluate(model, stream, 4, 20, torch.device("cpu"), name) for name in ("fp32", "tf32", "bf16")}
    assert losses["fp32"] == losses["tf32"]  # a CPU has no TF32
    assert losses["bf16"] != losses["fp32"] and losses["bf16"] == pytest.approx(losses["fp32"], rel=1e-2)
    cfg = smoke_config(corpus_dir, "lstm_m1000", epochs=1)
    cfg["precision"] = "bf16"
    code, err = train_here(tmp_path / "bf16", cfg)
    assert code == 0, err
    metrics = json.loads((tmp_path / "bf16" / "metrics.json").read_text())
    assert metrics["precision"] == "bf16" and metrics["autocast_dtype"] == "bfloat16"


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="ONEDNN_MAX_CPU_ISA=AVX2 caps x86-64 CPUs")
def test_bf16_on_a_cpu_without_it_stops_in_one_line(corpus_dir, tmp_path):
    """On a CPU without AVX-512 (here: oneDNN capped at AVX2) a bf16 LSTM cell stops before it writes
    anything, in one line naming the cell, the device and the fix, and leaves no checkpoint to resume."""
    cfg = smoke_config(corpus_dir, "lstm_m1000", epochs=1)
    cfg["precision"] = "bf16"
    run_dir = tmp_path / "bf16"
    code, err = finished(train_cli(run_dir, cfg, env={**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2"}))
    assert code == 1, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "model lstm_m1000" in err and "cell 'lstm'" in err and "on cpu" in err and "AVX-512" in err
    assert "set `precision: fp32`" in err
    assert not run_dir.exists()


def test_stop_flag_is_set_by_sigterm_and_restores_the_handler():
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with StopFlag() as stop:
        assert not stop.requested
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested and stop.by == "SIGTERM"
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    with pytest.raises(KeyboardInterrupt), StopFlag() as stop:  # Ctrl-C, then Ctrl-C again: no more waiting
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.requested and stop.by == "Ctrl-C"
        os.kill(os.getpid(), signal.SIGINT)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_every_command_ends_on_ctrl_c_with_one_line(capsys):
    """Ctrl-C reaches every job Snakemake runs: each `python -m rnnrepro...` command ends with one line
    and status 130 (what a shell reports), not a KeyboardInterrupt traceback in the job's log."""
    from rnnrepro import console

    def interrupted() -> int:
        raise KeyboardInterrupt

    assert console.run_command(interrupted) == 130
    assert capsys.readouterr().err == "[rnnrepro] stopped by Ctrl-C\n"
    commands = [path for path in (REPO_ROOT / "src/rnnrepro").rglob("*.py")
                if '__name__ == "__main__"' in path.read_text() or path.name == "__main__.py"]
    assert len(commands) >= 8
    for path in commands:
        text = path.read_text()
        if path.name == "clean.py":  # standard library only (it runs without the venv): the same line, by hand
            assert 'print("[rnnrepro] stopped by Ctrl-C"' in text and "EXIT_CTRL_C" in text
            continue
        assert "run_command(main))" in text, f"{path}: end with console.run_command(main)"


# --- the autocomplete task (study nlstm) on its synthetic stand-in ---------------------------------

@pytest.fixture(scope="module")
def autocomplete_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("autocomplete")
    prepare("synth_char", fetch("synth_char", root / "raw"), root / "synth_char")
    build("synth_autocomplete", root / "synth_char", root / "synth_autocomplete")
    return root / "synth_autocomplete"


def autocomplete_config(data_dir: Path, model: str = "gru_2x600", **recipe) -> dict:
    """The smoke budget's config of an autocomplete model, narrowed further to keep these tests fast."""
    run_config = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    run_config.update(budget="smoke", device="cpu", threads=1)
    cfg = grid.resolve_cell(load_study("nlstm"), run_config,
                            grid.Cell("nlstm", "synth_autocomplete", model, 100, 5, "smoke"))
    cfg["data"] = {"dir": str(data_dir), "train_file": str(data_dir / "train.txt")}
    cfg["architecture"].update(embedding_size=16, hidden_size=16)
    cfg["recipe"].update(epochs=2, validation_every=5, **recipe)
    return cfg


@pytest.fixture(scope="module")
def autocomplete_reference_run(tmp_path_factory, autocomplete_dir):
    """An uninterrupted 2-epoch GRU autocomplete run, the baseline of the resume test."""
    run_dir = tmp_path_factory.mktemp("runs") / "autocomplete_reference"
    cfg = autocomplete_config(autocomplete_dir)
    code, err = train_here(run_dir, cfg)
    assert code == 0, err
    return run_dir, cfg


def test_autocomplete_outputs(autocomplete_reference_run):
    run_dir, cfg = autocomplete_reference_run
    assert json.loads((run_dir / "config.json").read_text()) == cfg
    metrics = json.loads((run_dir / "metrics.json").read_text())
    train_observations = 865
    batches = math.ceil(train_observations / cfg["recipe"]["batch_size"])
    assert metrics["iterations"] == 2 * batches and metrics["train_sequences"] == 2 * train_observations
    assert metrics["classes"] == 130
    assert metrics["params"] == metrics["params_embedding"] + metrics["params_recurrent"] + metrics["params_dense"]
    assert 0 < metrics["test_accuracy"] < 1 and math.isfinite(metrics["test_cross_entropy"])
    assert metrics["test_cross_entropy"] < math.log(130)  # it learned something in two passes
    # the frequency model's loss, from the cell's own splits (the `stalled` flag's reference)
    from rnnrepro.data.autocomplete import UNK_ID
    from rnnrepro.train import autocomplete, unigram

    classes, data = autocomplete.load_data(cfg)
    assert metrics["val_unigram_loss"] == pytest.approx(unigram.autocomplete_loss(
        data["train"].targets, data["valid"].targets, len(classes), UNK_ID))
    assert metrics["val_unigram_loss"] < math.log(130)
    history = pd.read_csv(run_dir / "history.csv")
    # a check before training, every 5 batches, and at the last batch
    assert history["iteration"].tolist() == [*range(0, 2 * batches, 5), 2 * batches]
    assert history["val_loss"].iloc[-1] < history["val_loss"].iloc[0]
    saved = torch.load(run_dir / "model.pt", weights_only=False)
    assert saved["config"] == cfg


@pytest.mark.slow
def test_a_raised_autocomplete_cap_goes_on_from_the_checkpoint_bit_for_bit(autocomplete_reference_run, tmp_path):
    """A finished autocomplete cell asked again with one more pass trains only that pass and ends where
    a run started with three passes ends; its history holds one extra row, the check at the old cap
    (and the next row's training loss is the mean over the batches since that check)."""
    run_dir, cfg = autocomplete_reference_run
    extended, err = run_with_a_raised_cap(run_dir, cfg, 3, tmp_path)
    assert "the recipe's epoch cap was raised from 2 to 3: training goes on from epoch 3" in err, err
    assert numbers(extended / "metrics.json") == numbers(tmp_path / "fresh" / "metrics.json")
    batches = json.loads((run_dir / "metrics.json").read_text())["iterations"]
    rows = history_without_timing(extended)
    old_cap_check = [row for row in rows[1:] if row.split(",")[0] == str(batches)]
    assert batches % cfg["recipe"]["validation_every"] and len(old_cap_check) == 1  # the fixture has the extra row
    rows = [row for row in rows if row not in old_cap_check]
    fresh = history_without_timing(tmp_path / "fresh")
    assert len(rows) == len(fresh)
    after = next(i for i, row in enumerate(fresh[1:], 1) if int(row.split(",")[0]) > batches)
    loss = fresh[0].split(",").index("train_loss")
    for i, (ours, theirs) in enumerate(zip(rows, fresh)):
        if i == after:  # its training loss averages the batches since the extra check
            ours, theirs = ours.split(","), theirs.split(",")
            del ours[loss], theirs[loss]
        assert ours == theirs, i


def test_a_raised_cap_leaves_an_autocomplete_cell_its_iteration_limit(autocomplete_dir, tmp_path):
    cfg = autocomplete_config(autocomplete_dir, max_iterations=7)
    cfg["recipe"]["epochs"] = 1
    code, err = train_here(tmp_path, cfg)
    assert code == 0, err
    code, err = train_here(tmp_path, {**cfg, "recipe": {**cfg["recipe"], "epochs": 2}})
    assert code == 0, err
    assert "its own stopping rule had already ended it" in err, err
    assert json.loads((tmp_path / "metrics.json").read_text())["iterations"] == 7


PATIENCE = {"rule": "best", "patience": 2, "min_delta": 0.02}


def autocomplete_patience_config(data_dir: Path, **recipe) -> dict:
    """Four passes at most, stopped by patience on the best (2 checks without a 0.02-nat fall below the
    best), every check over the whole validation split (so a check's loss is the final evaluation's)."""
    cfg = autocomplete_config(data_dir, **{"early_stopping": PATIENCE, "score": "best", "validation_sequences": 10_000,
                                           **recipe})
    cfg["recipe"]["epochs"] = 4
    return cfg


@pytest.fixture(scope="module")
def autocomplete_patience_run(tmp_path_factory, autocomplete_dir):
    """An uninterrupted autocomplete run that patience on the best stops before its cap."""
    run_dir = tmp_path_factory.mktemp("runs") / "autocomplete_patience"
    cfg = autocomplete_patience_config(autocomplete_dir)
    code, err = train_here(run_dir, cfg)
    assert code == 0, err
    return run_dir, cfg


def test_patience_on_the_best_stops_an_autocomplete_run(autocomplete_patience_run):
    from rnnrepro.train.stopping import epochs_since_best, has_stalled

    run_dir, cfg = autocomplete_patience_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    history = pd.read_csv(run_dir / "history.csv").to_dict("records")
    cap = 4 * math.ceil(865 / cfg["recipe"]["batch_size"])
    assert 10 < metrics["iterations"] < cap and metrics["stopped_by_patience"]
    assert metrics["iterations"] == history[-1]["iteration"] and metrics["epochs"] == history[-1]["epoch"]
    # it stopped at the first check that made the patience (counted in checks, not passes) run out
    assert epochs_since_best(history, PATIENCE["min_delta"]) == PATIENCE["patience"]
    assert has_stalled(PATIENCE, history) and not has_stalled(PATIENCE, history[:-1])
    best = min(history, key=lambda row: row["val_loss"])
    assert (metrics["best_iteration"], metrics["best_epoch"]) == (best["iteration"], best["epoch"])


def test_patience_after_the_plateau_counts_from_the_runs_exit(autocomplete_dir, tmp_path):
    """`after_plateau: true`: the trainer reads the unigram loss it writes to metrics.json, and its run
    ends where the rule, replayed on its checks from that number, ends it: patience counted from the first
    check 5 % below the plateau, or at its cap where it never got there."""
    from rnnrepro.train.stopping import plateau_exit, same_stop

    rule = {**PATIENCE, "after_plateau": True}
    cfg = autocomplete_patience_config(autocomplete_dir, early_stopping=rule)
    code, err = train_here(tmp_path, cfg)
    assert code == 0, err
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    history = pd.read_csv(tmp_path / "history.csv").to_dict("records")
    plateau = metrics["val_unigram_loss"]
    assert same_stop(rule, history, plateau, metrics["stopped_by_patience"])
    exit_ = plateau_exit(history, plateau)
    if exit_ is None:
        assert not metrics["stopped_by_patience"] and metrics["epochs"] == cfg["recipe"]["epochs"]
    else:
        assert metrics["stopped_by_patience"] and len(history) - 1 - exit_ >= PATIENCE["patience"]


def test_an_autocomplete_run_patience_stopped_is_not_flagged_still_improving(autocomplete_patience_run, tmp_path):
    """Its last check may be a new lowest by less than min_delta: converged by the rule's measure, so
    neither still improving nor capped. The same history under a fixed number of passes is flagged."""
    from rnnrepro.analysis.run_endings import run_ending

    run_dir, cfg = autocomplete_patience_run
    ending = run_ending(run_dir)
    assert not ending["capped"] and math.isnan(ending["improving_pct"])
    history = pd.read_csv(run_dir / "history.csv")
    assert history["val_loss"].iloc[-1] == history["val_loss"].min()  # the fixture is the case the rule exempts
    fixed = tmp_path / "fixed"
    shutil.copytree(run_dir, fixed)
    passes = int(history["epoch"].iloc[-1])
    (fixed / "config.json").write_text(json.dumps(
        {**cfg, "recipe": {**cfg["recipe"], "early_stopping": None, "epochs": passes}}))
    assert run_ending(fixed)["improving_pct"] > 0


def test_an_autocomplete_run_is_scored_on_its_best_check_where_its_recipe_says_so(autocomplete_dir, tmp_path):
    """`score: best`: the final evaluation and model.pt are the weights of the check with the lowest
    validation loss, not the last; `score: final` the last."""
    for score in ("best", "final"):
        cfg = autocomplete_patience_config(autocomplete_dir, score=score)
        cfg["recipe"]["early_stopping"] = {"rule": "best", "patience": 1, "min_delta": 0.0}  # stops after a worse check
        code, err = train_here(tmp_path / score, cfg)
        assert code == 0, err
        metrics = json.loads((tmp_path / score / "metrics.json").read_text())
        history = pd.read_csv(tmp_path / score / "history.csv")
        best, last = history["val_loss"].min(), history["val_loss"].iloc[-1]
        assert last > best
        # every check reads the whole validation split: the scored weights' check has the final number
        assert metrics["val_cross_entropy"] == pytest.approx(best if score == "best" else last, rel=1e-9)
        assert metrics["scored_iteration"] == (metrics["best_iteration"] if score == "best"
                                               else history["iteration"].iloc[-1])


# --- both tasks: a kill, and a loss that is not finite ---------------------------------------------

@dataclass(frozen=True)
class Task:
    """How the resume and NaN tests drive one task's trainer."""
    reference_run: str      # the fixture with its uninterrupted run: (run folder, config)
    checkpointed: str       # a log line printed after a checkpoint is written
    kill_after: float       # seconds from that line to the kill
    data: str               # the fixture with its prepared corpus
    diverging: Callable[[Path], dict]   # a config, on that corpus, whose loss leaves the floats
    loss_error: str         # what the trainer then says (a regular expression)
    hint: str               # and what to change


TASKS = {
    "language_model": Task("reference_run", "epoch 1:", 0.5, "corpus_dir",  # killed well inside epoch 2
                           lambda data: smoke_config(data, "lstm_m1000", lr=1e38, clip=1e38, epochs=1, ar_alpha=0.0,
                                                     tar_beta=0.0),
                           r"the training loss is (nan|inf)", "Lower `lr` or `clip`"),
    "autocomplete": Task("autocomplete_reference_run", "iteration 10/", 0.0, "autocomplete_dir",
                         lambda data: autocomplete_config(data, lr=1e36),
                         r"the (training|validation) loss is (nan|inf)", "Lower `lr`"),
    "autocomplete_patience": Task("autocomplete_patience_run", "iteration 10/", 0.0, "autocomplete_dir",
                                  lambda data: autocomplete_patience_config(data, lr=1e36),
                                  r"the (training|validation) loss is (nan|inf)", "Lower `lr`"),
}


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_killed_run_resumes_bit_for_bit(task, request, tmp_path):
    reference_dir, cfg = request.getfixturevalue(TASKS[task].reference_run)
    run_dir = tmp_path / "killed"
    proc = train_cli(run_dir, cfg)
    deadline = time.time() + 300
    log = ""
    while TASKS[task].checkpointed not in log:
        line = proc.stderr.readline()
        assert line or proc.poll() is None, "training ended before it could be killed"
        log += line
        assert time.time() < deadline
    time.sleep(TASKS[task].kill_after)
    proc.kill()
    proc.wait()
    assert not (run_dir / "metrics.json").exists()
    code, err = train_here(run_dir, cfg)
    assert code == 0, err
    assert "resuming from" in err
    assert numbers(run_dir / "metrics.json") == numbers(reference_dir / "metrics.json")
    assert history_without_timing(run_dir) == history_without_timing(reference_dir)


@pytest.mark.parametrize("task", TASKS)
def test_nan_loss_stops_with_a_clear_error(task, request, tmp_path):
    cfg = TASKS[task].diverging(request.getfixturevalue(TASKS[task].data))
    code, err = train_here(tmp_path / "nan", cfg)
    assert code == 1
    assert re.search(TASKS[task].loss_error, err), err
    assert TASKS[task].hint in err
    assert not (tmp_path / "nan" / "metrics.json").exists()


CELL_OF_YOUR_OWN = """from examples.mgu import MGULayer


class Broken(MGULayer):
    def forward(self, x, state):
        outputs, last = super().forward(x, state)
        if x.size(1) > 2:  # the trial's batch is 2: only training's batches
            {broken}
        return outputs, last
"""


@pytest.mark.parametrize("broken, said", [
    ("raise ValueError('a bug in the cell')", "the cell of your own 'lstm_m1000' (broken_raises:Broken) raised "
                                              "ValueError: a bug in the cell at {file}, line 8, while training"),
    ("outputs = outputs * float('nan')", "Model 'lstm_m1000' is a cell of your own (broken_nan:Broken, {file}): "
                                         "if it gives NaN or infinite outputs"),
])
def test_a_cell_of_your_own_that_fails_in_training_is_named_with_its_file(corpus_dir, tmp_path, monkeypatch, broken,
                                                                         said):
    """An error from inside a cell of your own is one line naming the cell, the line of its file and the
    error (not a traceback through the package); a cell giving NaN is named beside the recipe advice."""
    name = "broken_raises" if "raise" in broken else "broken_nan"
    (tmp_path / f"{name}.py").write_text(CELL_OF_YOUR_OWN.format(broken=broken))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(REPO_ROOT))  # examples.mgu
    cfg = smoke_config(corpus_dir, "lstm_m1000", epochs=1)
    cfg["architecture"].update(cell=f"{name}:Broken", cell_options={})
    code, err = train_here(tmp_path / "run", cfg)
    assert code == 1
    assert said.format(file=tmp_path / f"{name}.py") in err, err
    assert "Traceback" not in err


def test_a_cell_another_live_process_trains_is_refused_and_left_alone(tmp_path):
    """Two trainers of one cell (one left running by a killed Snakemake or `records grow`) would write the
    same checkpoint and outputs; the second stops at once, naming the first, and touches nothing."""
    from rnnrepro.train import progress_file
    from rnnrepro.train.loop import run_cell

    # a stand-in trainer: its command line names the package, as `python -m rnnrepro.train` does
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "rnnrepro.train"])
    try:
        record = {"state": "running", "cell": "c", "pid": other.pid, "host": platform.node(),
                  "started_at": "2026-01-01T00:00:00+00:00", "updated_at": progress_file.now_iso()}
        progress_file.write(tmp_path, record)
        before = (tmp_path / "progress.json").read_text()
        with pytest.raises(RunFolderError, match=f"another process on this machine is training this cell "
                                                 f"\\(pid {other.pid}, started 2026-01-01"):
            run_cell(tmp_path, {}, torch.device("cpu"), make_task=None)
        assert (tmp_path / "progress.json").read_text() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["progress.json"]
        # a stale heartbeat or a process that is gone is no trainer: the cell may resume
        progress_file.write(tmp_path, {**record, "updated_at": "2026-01-01T00:00:00+00:00"})
        assert progress_file.another_trainer(tmp_path) is None
    finally:
        other.kill()
        other.wait()
    progress_file.write(tmp_path, record)
    assert progress_file.another_trainer(tmp_path) is None


def test_a_progress_file_naming_an_unrelated_live_process_is_no_trainer(tmp_path):
    """A trainer killed outright leaves progress.json saying running; its pid may since belong to another
    program. That program trains nothing: the cell may resume, not "another process is training it"."""
    from rnnrepro.train import progress_file

    unrelated = subprocess.Popen(["sleep", "60"])
    try:
        progress_file.write(tmp_path, {"state": "running", "cell": "c", "pid": unrelated.pid, "host": platform.node(),
                                       "started_at": "2026-01-01T00:00:00+00:00", "updated_at": progress_file.now_iso()})
        assert progress_file.another_trainer(tmp_path) is None
    finally:
        unrelated.kill()
        unrelated.wait()


@pytest.mark.slow
def test_a_raised_epoch_cap_goes_on_from_the_checkpoint_bit_for_bit(reference_run, corpus_dir, tmp_path):
    """A cell that stopped at its recipe's epoch cap, asked again with a higher cap and nothing else
    changed, trains only the new epochs and ends where a run started with the higher cap ends."""
    run_dir, cfg = reference_run
    extended, err = run_with_a_raised_cap(run_dir, cfg, 5, tmp_path)
    assert "the recipe's epoch cap was raised from 3 to 5: training goes on from epoch 4" in err, err
    assert "epoch 1:" not in err and "epoch 4:" in err and "epoch 5:" in err
    assert numbers(extended / "metrics.json") == numbers(tmp_path / "fresh" / "metrics.json")
    assert history_without_timing(extended) == history_without_timing(tmp_path / "fresh")


def run_with_a_raised_cap(run_dir: Path, cfg: dict, epochs: int, tmp_path: Path) -> tuple[Path, str]:
    """``cfg`` with the cap raised to ``epochs``, trained from scratch into ``tmp_path/fresh`` and on
    from a copy of the finished ``run_dir``: that copy's folder, and what its training said."""
    raised = {**cfg, "recipe": {**cfg["recipe"], "epochs": epochs}}
    code, err = train_here(tmp_path / "fresh", raised)
    assert code == 0, err
    extended = tmp_path / "extended"
    shutil.copytree(run_dir, extended)
    code, err = train_here(extended, raised)
    assert code == 0, err
    return extended, err
    # anything else changed, or a lower cap, starts afresh: raised_cap below, test_changed_config_starts_afresh


def test_a_raised_cap_does_not_undo_the_recipes_own_stop():
    from types import SimpleNamespace

    from rnnrepro.train.language_model import LanguageModelTask
    from rnnrepro.train.loop import Progress, raised_cap

    def rows(*losses):
        return [{"val_loss": loss} for loss in losses]

    def task_of(recipe):  # the task's rules, without its corpus and model
        task = SimpleNamespace(recipe=recipe)
        task.patience_ended = lambda history: LanguageModelTask.patience_ended(task, history)
        return task

    stalled = {"early_stopping": {"patience": 2, "min_delta": 0.01}, "stop_on_nonmono": False, "nonmono": 5}
    task = task_of(stalled)
    assert LanguageModelTask.stopped_by_its_rules(task, Progress(history=rows(3.0, 2.5, 2.499, 2.495)))
    assert not LanguageModelTask.stopped_by_its_rules(task, Progress(history=rows(3.0, 2.5, 2.4, 2.3)))
    task = task_of({"early_stopping": None, "stop_on_nonmono": True, "nonmono": 2})
    assert LanguageModelTask.stopped_by_its_rules(task, Progress(history=rows(3.0, 2.0, 2.1, 2.2, 2.3)))
    assert not LanguageModelTask.stopped_by_its_rules(task, Progress(history=rows(3.0, 2.9, 2.8, 2.7, 2.6)))
    old = {"model": "m", "recipe": {"epochs": 40, "lr": 0.001}}
    assert raised_cap(old, {"model": "m", "recipe": {"epochs": 100, "lr": 0.001}})
    assert not raised_cap(old, {"model": "m", "recipe": {"epochs": 100, "lr": 0.002}})
    assert not raised_cap(old, {"model": "m", "recipe": {"epochs": 30, "lr": 0.001}})
    assert not raised_cap(old, {"model": "n", "recipe": {"epochs": 100, "lr": 0.001}})


class _StateOnAnotherDevice:
    """A random-number state as a checkpoint loaded onto a GPU holds it: a tensor off the CPU, which
    torch.cuda.set_rng_state refuses ("RNG state must be a torch.ByteTensor")."""

    def __init__(self, state: torch.Tensor):
        self.state, self.device = state, torch.device("cuda", 0)

    def cpu(self) -> torch.Tensor:
        return self.state


def test_random_states_loaded_onto_a_gpu_are_restored_from_the_cpu(monkeypatch):
    """A resume checkpoint is loaded onto the training device, its random-number states with it; they go
    back to the CPU before torch sets them (else every resume on a GPU started the cell afresh)."""
    from rnnrepro.train import checkpoint

    given = {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", lambda states: given.setdefault("cuda", list(states)))
    cpu_state = torch.get_rng_state()
    checkpoint.set_rng_state({"torch": cpu_state, "cuda": [_StateOnAnotherDevice(cpu_state.clone())]})
    assert all(isinstance(s, torch.Tensor) and s.device.type == "cpu" for s in given["cuda"])


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_random_states_of_a_checkpoint_loaded_onto_the_gpu_restore_the_streams(tmp_path):
    from rnnrepro.train import checkpoint

    state = checkpoint.rng_state()
    expected = (torch.rand(3), torch.rand(3, device="cuda"))
    checkpoint.save_atomic({"rng": state}, tmp_path / "last.pt")
    checkpoint.set_rng_state(checkpoint.load(tmp_path / "last.pt", torch.device("cuda"))["rng"])
    assert torch.equal(torch.rand(3), expected[0])
    assert torch.equal(torch.rand(3, device="cuda"), expected[1])


def test_a_recipe_scoring_the_final_epoch_scores_its_weights(corpus_dir, short_train_file, tmp_path):
    """`score: final` (Zaremba et al.'s code) evaluates the last epoch's weights, not the best
    validation epoch's; metrics.json says which epoch it scored. Training itself is the same."""
    common = dict(train_file=short_train_file, epochs=3, lr=200.0)  # a rate that makes validation move about
    best_cfg = smoke_config(corpus_dir, "zaremba_small", **common)
    final_cfg = smoke_config(corpus_dir, "zaremba_small", **common, score="final")
    for name, cfg in (("best", best_cfg), ("final", final_cfg)):
        code, err = train_here(tmp_path / name, cfg)
        assert code == 0, err
    best, final = (json.loads((tmp_path / name / "metrics.json").read_text()) for name in ("best", "final"))
    assert history_without_timing(tmp_path / "best") == history_without_timing(tmp_path / "final")
    assert best["scored_epoch"] == best["best_epoch"] and final["scored_epoch"] == 3
    # at smoke the final evaluation reads validation as the epochs' checks do (batch 16): each scored
    # number is its epoch's
    history = pd.read_csv(tmp_path / "final" / "history.csv").set_index("epoch")["val_loss"]
    assert final["val_loss"] == pytest.approx(history[3], rel=1e-9)
    assert best["val_loss"] == pytest.approx(history[best["best_epoch"]], rel=1e-9) == pytest.approx(history.min())


def test_unigram_losses_on_hand_counted_splits():
    """The frequency model behind the `stalled` flag, on splits small enough to count by hand: add-one
    counts, a language model's targets (every token but the first), and the autocomplete task's
    per-observation mean over known-word targets (padding 0 and <unk> 1 never a target)."""
    from rnnrepro.train import unigram

    # counts 2, 1, 0 plus one: 3/6, 2/6, 1/6; targets 0 and 1
    assert unigram.token_loss(np.array([0, 0, 1]), np.array([2, 0, 1]), 3) == pytest.approx(
        (math.log(2) + math.log(3)) / 2)
    # known training targets: class 2 three times, class 3 once; plus one: 4/6, 2/6 among the known
    train = np.array([[2, 2, 3, 0], [1, 2, 0, 0]])
    valid = np.array([[2, 3, 0], [1, 0, 0], [3, 1, 0]])  # the second has no known target: skipped
    row1 = (math.log(6 / 4) + math.log(6 / 2)) / 2
    row3 = math.log(6 / 2)
    assert unigram.autocomplete_loss(train, valid, 4, unk_id=1) == pytest.approx((row1 + row3) / 2)
