"""Training and evaluation of one language-model cell (AWD-LSTM recipe, as the PRU code runs it).

Per batch: a random BPTT length (N(bptt, 5) w.p. 0.95, N(bptt/2, 5) otherwise, at least 5), the
learning rate scaled by seq_len/bptt for that step, loss = cross entropy + AR + TAR, global gradient
clipping, SGD. Per epoch: validation (with averaged weights once NT-ASGD averaging has started), the
non-monotone trigger, the best checkpoint, and a resume checkpoint. The LRU recipe instead runs
Adam at a fixed BPTT without clipping, stops early when validation stalls (recipe `early_stopping`)
and also scores the test stream after every epoch (`test_every_epoch`, history.csv `test_loss`). At
the end the best weights are evaluated on the validation and test streams with the test batch size.
"""

from __future__ import annotations

import math
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from ..cells import detach_state
from ..data.corpus import batchify, get_batch
from ..models.language_model import LanguageModel
from . import checkpoint
from .averaging import WeightAverager


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


class TrainingInterrupted(RuntimeError):
    """SIGTERM arrived; a resume checkpoint was written."""


@dataclass
class Progress:
    """What is carried between epochs and saved in the resume checkpoint."""
    epoch: int = 1                   # the epoch in progress (or next to run)
    position: int = 0                # row of the batchified training stream where the epoch resumes
    batches: int = 0
    loss_sum: float = 0.0            # sum of per-batch cross entropies (this epoch)
    tokens: int = 0
    seconds: float = 0.0             # training seconds spent in this epoch so far
    state: list | None = None        # carried hidden state mid-epoch
    history: list = field(default_factory=list)  # one dict per finished epoch
    best_val_loss: float = math.inf
    best_epoch: int = 0
    finished: bool = False
    wall_seconds: float = 0.0        # wall time of earlier attempts (resumes)


class StopFlag:
    """Set by SIGTERM (a SLURM time limit or preemption); checked between batches."""

    def __init__(self):
        self.requested = False

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum, frame) -> None:
        self.requested = True


def make_optimizer(model: LanguageModel, recipe: dict) -> torch.optim.Optimizer:
    """Adam for `adam`; plain SGD otherwise (NT-ASGD's averaging is the WeightAverager's job)."""
    if recipe["optimizer"] == "adam":
        return torch.optim.Adam(model.parameters(), lr=recipe["lr"], weight_decay=recipe["weight_decay"])
    return torch.optim.SGD(model.parameters(), lr=recipe["lr"], weight_decay=recipe["weight_decay"])


def training_step(model: LanguageModel, optimizer: torch.optim.Optimizer, recipe: dict, x: torch.Tensor,
                  y: torch.Tensor, state: list) -> tuple[torch.Tensor, list]:
    """One optimizer step on a BPTT window; returns the window's cross entropy and the carried state."""
    for group in optimizer.param_groups:
        group["lr"] = recipe["lr"] * x.size(0) / recipe["bptt"]
    out = model(x, [detach_state(s) for s in state])
    ce = F.cross_entropy(out.logits.reshape(-1, out.logits.size(-1)), y.reshape(-1))
    loss = ce
    if recipe["ar_alpha"]:
        loss = loss + recipe["ar_alpha"] * out.last_dropped.pow(2).mean()
    if recipe["tar_beta"]:
        loss = loss + recipe["tar_beta"] * (out.last_raw[1:] - out.last_raw[:-1]).pow(2).mean()
    if not torch.isfinite(loss):
        raise TrainingDiverged(f"the training loss is {loss.item()}")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if recipe["clip"] is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe["clip"])
    optimizer.step()
    return ce.detach(), out.state


class Trainer:
    def __init__(self, cfg: dict, model: LanguageModel, corpus, run_dir: Path, device: torch.device):
        self.cfg, self.model, self.corpus, self.device = cfg, model, corpus, device
        self.recipe = cfg["recipe"]
        self.ckpt_dir = checkpoint.checkpoint_dir(run_dir)
        self.vocab_size = len(corpus.vocab)
        self.train_data = batchify(corpus.train, self.recipe["batch_size"]).to(device)
        self.optimizer = make_optimizer(model, self.recipe)
        self.averager = WeightAverager()
        if self.recipe["optimizer"] == "asgd":
            self.averager.start()
        self.bptt_rng = np.random.default_rng(cfg["seed"])
        self.progress = Progress()
        self.stop = StopFlag()
        self._attempt_started = time.perf_counter()
        self._earlier_wall = 0.0

    def wall_seconds(self) -> float:
        """Wall time of this cell over every attempt (up to each attempt's last checkpoint)."""
        return self._earlier_wall + time.perf_counter() - self._attempt_started

    # ---- checkpointing -------------------------------------------------------------------
    def save(self) -> None:
        self.progress.wall_seconds = self.wall_seconds()
        checkpoint.save_atomic({
            "config": self.cfg,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "averager": self.averager.state_dict(),
            "bptt_rng": self.bptt_rng.bit_generator.state,
            "rng": checkpoint.rng_state(),
            "progress": self.progress,
        }, self.ckpt_dir / checkpoint.LAST)

    def try_resume(self) -> bool:
        path = self.ckpt_dir / checkpoint.LAST
        if not path.exists():
            return False
        saved = checkpoint.load(path, self.device)
        if saved["config"] != self.cfg:
            print(f"[rnnrepro] {path} was written for a different config; starting this cell afresh",
                  file=sys.stderr)
            return False
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.averager.load_state_dict(saved["averager"])
        self.bptt_rng.bit_generator.state = saved["bptt_rng"]
        checkpoint.set_rng_state(saved["rng"])
        self.progress = saved["progress"]
        p = self.progress
        self._earlier_wall = p.wall_seconds
        print(f"[rnnrepro] resuming from {path}: epoch {p.epoch}, row {p.position}", file=sys.stderr)
        return True

    def save_best(self) -> None:
        with self.averager.averaged(self.model):
            checkpoint.save_atomic(self.model.state_dict(), self.ckpt_dir / checkpoint.BEST)

    def load_best(self) -> None:
        self.model.load_state_dict(checkpoint.load(self.ckpt_dir / checkpoint.BEST, self.device))

    # ---- one epoch -----------------------------------------------------------------------
    def _seq_len(self) -> int:
        r = self.recipe
        if not r["variable_bptt"]:
            return r["bptt"]
        base = r["bptt"] if self.bptt_rng.random() < 0.95 else r["bptt"] / 2
        seq_len = max(5, int(self.bptt_rng.normal(base, 5)))
        return min(seq_len, r["seq_len_cap"]) if r["seq_len_cap"] else seq_len

    def _where(self, batch: int) -> str:
        c = self.cfg
        return (f"cell {c['study']}/{c['corpus']}/{c['model']}/frac{c['fraction']}/seed{c['seed']}, "
                f"epoch {self.progress.epoch}, batch {batch}")

    def train_epoch(self) -> None:
        r, p, model = self.recipe, self.progress, self.model
        model.train()
        data = self.train_data
        rows = data.size(0)
        state = p.state if p.state is not None else model.init_state(r["batch_size"])
        started = time.perf_counter()
        bar = tqdm(total=rows - 1, initial=p.position, desc=f"epoch {p.epoch}/{r['epochs']}",
                   unit="step", file=sys.stderr, mininterval=1 if sys.stderr.isatty() else 30)
        # AWD-LSTM's loop bound: every batch has at least two time steps (TAR needs a difference).
        while p.position < rows - 2:
            seq_len = self._seq_len()
            x, y = get_batch(data, p.position, seq_len)
            try:
                ce, state = training_step(model, self.optimizer, r, x, y, state)
            except TrainingDiverged as e:
                raise TrainingDiverged(
                    f"{self._where(p.batches + 1)}: {e} (lr {r['lr']}). The last good resume checkpoint is "
                    f"kept in {self.ckpt_dir}. Lower `lr` or `clip` of recipe {self.cfg['recipe_name']!r} in "
                    f"config/studies/{self.cfg['study']}.yaml and rerun (a changed config starts the cell "
                    f"afresh).") from None
            self.averager.update(model)
            p.position += x.size(0)
            p.batches += 1
            p.loss_sum += ce.item()
            p.tokens += y.numel()
            bar.update(x.size(0))
            bar.set_postfix(loss=f"{ce.item():.3f}", refresh=False)
            if self.stop.requested:
                p.seconds += time.perf_counter() - started
                p.state = state
                self.save()
                bar.close()
                raise TrainingInterrupted(f"{self._where(p.batches)}: stopped by SIGTERM; "
                                          f"resume checkpoint written to {self.ckpt_dir}")
        bar.close()
        for group in self.optimizer.param_groups:
            group["lr"] = r["lr"]
        p.seconds += time.perf_counter() - started

    # ---- evaluation ----------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self, data: torch.Tensor, batch_size: int) -> float:
        """Mean cross entropy (nats per token) over every prediction in the stream."""
        model = self.model
        model.eval()
        source = batchify(data, batch_size).to(self.device)
        state = model.init_state(batch_size)
        total, count = 0.0, 0
        for i in range(0, source.size(0) - 1, self.recipe["bptt"]):
            x, y = get_batch(source, i, self.recipe["bptt"])
            out = model(x, state)
            state = out.state
            total += F.cross_entropy(out.logits.reshape(-1, self.vocab_size), y.reshape(-1),
                                     reduction="sum").item()
            count += y.numel()
        return total / count

    def _validate(self) -> float:
        with self.averager.averaged(self.model):
            return self.evaluate(self.corpus.valid, self.recipe["eval_batch_size"])

    def _non_monotone(self, val_loss: float) -> bool:
        """AWD-LSTM's test: worse than the best of all but the last `nonmono` recorded epochs."""
        seen = [row["val_loss"] for row in self.progress.history]
        n = self.recipe["nonmono"]
        return len(seen) > n and val_loss > min(seen[:-n])

    def _stalled(self) -> bool:
        """The LRU authors' early stop: validation has failed `patience` epochs in a row to fall at
        least `min_delta` below the previous epoch's (their char.py, `stop_thresh` and `eps`)."""
        rule = self.recipe["early_stopping"]
        if rule is None:
            return False
        recent = [row["val_loss"] for row in self.progress.history][-(rule["patience"] + 1):]
        return (len(recent) > rule["patience"]
                and all(later > earlier - rule["min_delta"] for earlier, later in zip(recent, recent[1:])))

    # ---- the whole run -------------------------------------------------------------------
    def initialise_from(self, path: Path) -> None:
        """Finetuning: start from another cell's best weights; they are the first 'best'."""
        saved = checkpoint.load(path, self.device)
        self.model.load_state_dict(saved["state_dict"])
        p = self.progress
        p.best_val_loss, p.best_epoch = self._validate(), 0
        self.save_best()

    def fit(self) -> None:
        r, p = self.recipe, self.progress
        self.stop.install()
        while not p.finished and p.epoch <= r["epochs"]:
            self.train_epoch()
            val_loss = self._validate()
            if not math.isfinite(val_loss):
                raise TrainingDiverged(f"{self._where(p.batches)}: the validation loss is {val_loss}")
            non_monotone = self._non_monotone(val_loss)
            if r["test_every_epoch"]:
                with self.averager.averaged(self.model):
                    test_loss = self.evaluate(self.corpus.test, r["test_batch_size"])
            epoch_row = {
                "epoch": p.epoch,
                "train_loss": p.loss_sum / p.batches,
                "train_ppl": math.exp(p.loss_sum / p.batches),
                "val_loss": val_loss,
                "val_ppl": math.exp(val_loss),
                **({"test_loss": test_loss} if r["test_every_epoch"] else {}),
                "lr": r["lr"],
                "averaging": self.averager.active,
                "seconds": p.seconds,
                "tokens_per_s": p.tokens / p.seconds,
            }
            p.history.append(epoch_row)
            print(f"[rnnrepro] epoch {p.epoch}: train ppl {epoch_row['train_ppl']:.2f}, "
                  f"val ppl {epoch_row['val_ppl']:.2f}, {p.seconds:.1f}s, "
                  f"{epoch_row['tokens_per_s']:.0f} tok/s", file=sys.stderr)
            if val_loss < p.best_val_loss:
                p.best_val_loss, p.best_epoch = val_loss, p.epoch
                self.save_best()
            if non_monotone and r["stop_on_nonmono"]:
                p.finished = True
            elif non_monotone and r["optimizer"] == "nt_asgd" and not self.averager.active:
                self.averager.start()
            if self._stalled():
                p.finished = True
            p.epoch += 1
            p.position, p.batches, p.loss_sum, p.tokens, p.seconds, p.state = 0, 0, 0.0, 0, 0.0, None
            if p.epoch > r["epochs"]:
                p.finished = True
            self.save()
