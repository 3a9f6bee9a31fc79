"""Training one autocomplete cell (task `autocomplete`): per-character word classification.

As the authors' TensorFlow runs (Distill, "Visualizing memorization in RNNs"): batches of
``batch_size`` observations drawn in a fresh random order each epoch, padded to the longest in the
batch; Adam; the loss is the cross entropy averaged over the characters whose target is a known word
(padding and <unk> targets are masked out, as the authors' loss weights do). Every
``validation_every`` batches the loss on the first ``validation_sequences`` validation observations
is recorded (the convergence figure) and a resume checkpoint is written.

At the end the final weights (one pass, no best-checkpoint selection, as the authors) are evaluated
on the validation and test splits the way the published numbers were measured (their test script runs
batch 1, so nothing is padded):

- cross entropy: per observation, the mean over its known-word characters; then the mean over
  observations (an observation without a known word has no cross entropy and is skipped);
- accuracy: the share of all real characters (padding excluded, <unk> targets included) whose top
  prediction is the target word.

Writes ``config.json``, ``history.csv`` (one row per validation check), ``metrics.json`` and
``model.pt`` (final weights with the config); ``checkpoint/last.pt`` lets a killed run resume bit for
bit on a CPU.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..configuration import ConfigError
from ..data.autocomplete import INPUT_SYMBOLS, PAD_ID, UNK_ID, EncodedSplit, load_classes, load_split
from ..models.autocomplete import AutocompleteModel
from . import checkpoint
from .common import provenance, start_run, write_run_outputs
from .loop import StopFlag, TrainingDiverged, TrainingInterrupted


def build_model(cfg: dict, classes: int) -> AutocompleteModel:
    a = cfg["architecture"]
    if a["tie_weights"]:
        raise ConfigError(f"model {cfg['model']!r}: tie_weights must be false for the autocomplete task (its "
                          f"input symbols and output words are different vocabularies); set "
                          f"`tie_weights: false` in config/studies/{cfg['study']}.yaml")
    return AutocompleteModel(len(INPUT_SYMBOLS), classes, a["cell"], a["embedding_size"], a["hidden_size"],
                             a["layers"], a["cell_options"])


def load_data(cfg: dict) -> tuple[list[str], dict[str, EncodedSplit]]:
    folder = Path(cfg["data"]["dir"])
    classes = load_classes(folder)
    files = {"train": Path(cfg["data"]["train_file"]), "valid": folder / "valid.txt", "test": folder / "test.txt"}
    return classes, {split: load_split(path, classes) for split, path in files.items()}


def batch_tensors(split: EncodedSplit, rows: np.ndarray, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets (T, B) of the observations ``rows``, cut to the longest of them."""
    steps = int(split.lengths[rows].max())
    inputs = torch.from_numpy(split.inputs[rows, :steps].T.astype(np.int64))
    targets = torch.from_numpy(split.targets[rows, :steps].T.astype(np.int64))
    return inputs.to(device), targets.to(device)


def training_step(model: AutocompleteModel, optimizer: torch.optim.Optimizer, inputs: torch.Tensor,
                  targets: torch.Tensor) -> float:
    """One Adam step on a batch (T, B); returns its loss, the mean cross entropy over known-word targets."""
    known = targets > UNK_ID
    logits = model(inputs, known)
    loss = F.cross_entropy(logits, targets[known]) if bool(known.any()) else logits.sum() * 0.0
    if not torch.isfinite(loss):
        raise TrainingDiverged(f"the training loss is {loss.item()}")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.item()


@torch.no_grad()
def evaluate(model: AutocompleteModel, split: EncodedSplit, batch_size: int, device: torch.device,
             observations: int | None = None) -> dict:
    """Cross entropy and accuracy over the first ``observations`` of a split, as the published numbers."""
    model.eval()
    count = len(split.lengths) if observations is None else min(observations, len(split.lengths))
    ce_sum, ce_observations, correct, characters = 0.0, 0, 0, 0
    for start in range(0, count, batch_size):
        inputs, targets = batch_tensors(split, np.arange(start, min(start + batch_size, count)), device)
        logits = model(inputs)
        nll = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none").view_as(targets)
        known = targets > UNK_ID
        real = targets != PAD_ID
        known_per_observation = known.sum(0)
        has_known = known_per_observation > 0
        per_observation = (nll * known).sum(0)[has_known] / known_per_observation[has_known]
        ce_sum += per_observation.sum().item()
        ce_observations += int(has_known.sum())
        correct += int(((logits.argmax(-1) == targets) & real).sum())
        characters += int(real.sum())
    model.train()
    return {"cross_entropy": ce_sum / ce_observations if ce_observations else math.nan,
            "accuracy": correct / characters, "observations": count, "characters": characters}


@dataclass
class Progress:
    """What the resume checkpoint carries."""
    epoch: int = 1
    batch: int = 0                # batches done in this epoch
    iteration: int = 0            # batches done in all epochs
    sequences: int = 0            # training observations seen
    loss_sum: float = 0.0         # batch losses since the last validation check
    loss_batches: int = 0
    seconds: float = 0.0          # training seconds (validation excluded)
    history: list = field(default_factory=list)
    wall_seconds: float = 0.0     # wall time of earlier attempts


class AutocompleteTrainer:
    def __init__(self, cfg: dict, model: AutocompleteModel, data: dict[str, EncodedSplit], run_dir: Path,
                 device: torch.device):
        self.cfg, self.model, self.data, self.device = cfg, model, data, device
        self.recipe = r = cfg["recipe"]
        self.ckpt_path = checkpoint.checkpoint_dir(run_dir) / checkpoint.LAST
        self.optimizer = torch.optim.Adam(model.parameters(), lr=r["lr"], betas=(r["adam_beta1"], r["adam_beta2"]),
                                          eps=r["adam_eps"])
        self.progress = Progress()
        self.stop = StopFlag()
        self._attempt_started = time.perf_counter()

    def wall_seconds(self) -> float:
        return self.progress.wall_seconds + time.perf_counter() - self._attempt_started

    def batches_per_epoch(self) -> int:
        return math.ceil(len(self.data["train"].lengths) / self.recipe["batch_size"])

    def total_iterations(self) -> int:
        full = self.recipe["epochs"] * self.batches_per_epoch()
        limit = self.recipe["max_iterations"]
        return full if limit is None else min(full, limit)

    def epoch_order(self, epoch: int) -> np.ndarray:
        """The epoch's observation order: a function of seed and epoch, so a resumed run draws the same."""
        return np.random.default_rng([self.cfg["seed"], epoch]).permutation(len(self.data["train"].lengths))

    # ---- checkpointing -------------------------------------------------------------------
    def save(self) -> None:
        self.progress.wall_seconds = self.wall_seconds()
        self._attempt_started = time.perf_counter()
        checkpoint.save_atomic({"config": self.cfg, "model": self.model.state_dict(),
                                "optimizer": self.optimizer.state_dict(), "progress": self.progress},
                               self.ckpt_path)

    def try_resume(self) -> bool:
        if not self.ckpt_path.exists():
            return False
        saved = checkpoint.load(self.ckpt_path, self.device)
        if saved["config"] != self.cfg:
            print(f"[rnnrepro] {self.ckpt_path} was written for a different config; starting this cell afresh",
                  file=sys.stderr)
            return False
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.progress = saved["progress"]
        print(f"[rnnrepro] resuming from {self.ckpt_path}: iteration {self.progress.iteration}, "
              f"epoch {self.progress.epoch}, batch {self.progress.batch}", file=sys.stderr)
        return True

    # ---- training ------------------------------------------------------------------------
    def _where(self) -> str:
        c, p = self.cfg, self.progress
        return (f"cell {c['study']}/{c['corpus']}/{c['model']}/frac{c['fraction']}/seed{c['seed']}, "
                f"iteration {p.iteration + 1} (epoch {p.epoch}, batch {p.batch + 1})")

    def _diverged(self, problem: str) -> TrainingDiverged:
        return TrainingDiverged(
            f"{self._where()}: {problem} (lr {self.recipe['lr']}). The last good resume checkpoint is kept in "
            f"{self.ckpt_path.parent}. Lower `lr` of recipe {self.cfg['recipe_name']!r} in "
            f"config/studies/{self.cfg['study']}.yaml and rerun (a changed config starts the cell afresh).")

    def train_step(self, rows: np.ndarray) -> float:
        inputs, targets = batch_tensors(self.data["train"], rows, self.device)
        try:
            return training_step(self.model, self.optimizer, inputs, targets)
        except TrainingDiverged as e:
            raise self._diverged(str(e)) from None

    def validation_check(self) -> None:
        """A row of history.csv, then a resume checkpoint."""
        p, r = self.progress, self.recipe
        result = evaluate(self.model, self.data["valid"], r["eval_batch_size"], self.device,
                          r["validation_sequences"])
        if not math.isfinite(result["cross_entropy"]):
            raise self._diverged(f"the validation loss is {result['cross_entropy']}")
        p.history.append({
            "iteration": p.iteration, "epoch": p.epoch, "sequences": p.sequences,
            "train_loss": p.loss_sum / p.loss_batches if p.loss_batches else math.nan,
            "val_loss": result["cross_entropy"], "val_accuracy": result["accuracy"],
            "seconds": p.seconds, "sequences_per_s": p.sequences / p.seconds if p.seconds else math.nan,
        })
        p.loss_sum, p.loss_batches = 0.0, 0
        self.save()
        print(f"[rnnrepro] iteration {p.iteration}/{self.total_iterations()}: val loss {result['cross_entropy']:.4f}, "
              f"val accuracy {result['accuracy']:.4f}, {p.seconds:.1f}s", file=sys.stderr)

    def fit(self) -> None:
        p, r = self.progress, self.recipe
        self.stop.install()
        if not p.history:
            self.validation_check()  # the untrained model: where every convergence curve starts
        total = self.total_iterations()
        while p.iteration < total:
            order = self.epoch_order(p.epoch)
            while p.iteration < total and p.batch < self.batches_per_epoch():
                started = time.perf_counter()
                rows = order[p.batch * r["batch_size"]: (p.batch + 1) * r["batch_size"]]
                p.loss_sum += self.train_step(rows)
                p.loss_batches += 1
                p.batch += 1
                p.iteration += 1
                p.sequences += len(rows)
                p.seconds += time.perf_counter() - started
                if p.iteration % r["validation_every"] == 0 or p.iteration == total:
                    self.validation_check()
                elif self.stop.requested:
                    self.save()
                if self.stop.requested:
                    raise TrainingInterrupted(f"{self._where()}: stopped by SIGTERM; resume checkpoint written "
                                              f"to {self.ckpt_path}")
            if p.batch == self.batches_per_epoch():
                p.epoch, p.batch = p.epoch + 1, 0


def write_outputs(run_dir: Path, cfg: dict, trainer: AutocompleteTrainer, device: torch.device) -> dict:
    p, r, model = trainer.progress, trainer.recipe, trainer.model
    final = {split: evaluate(model, trainer.data[split], r["eval_batch_size"], device) for split in ("valid", "test")}
    counts = model.parameter_counts()
    metrics = {
        "study": cfg["study"], "dataset": cfg["dataset"], "corpus": cfg["corpus"], "model": cfg["model"],
        "fraction": cfg["fraction"], "seed": cfg["seed"], "budget": cfg["budget"],
        "params": sum(counts.values()), **{f"params_{part}": n for part, n in counts.items()},
        "classes": model.dense.out_features,
        "iterations": p.iteration, "epochs": r["epochs"], "train_sequences": p.sequences,
        "val_cross_entropy": final["valid"]["cross_entropy"], "val_accuracy": final["valid"]["accuracy"],
        "test_cross_entropy": final["test"]["cross_entropy"], "test_accuracy": final["test"]["accuracy"],
        "test_observations": final["test"]["observations"], "test_characters": final["test"]["characters"],
        "train_seconds": p.seconds,
        "seconds_per_1000_sequences": 1000 * p.seconds / p.sequences,
        "wall_seconds": trainer.wall_seconds(),
        **provenance(device),
    }
    write_run_outputs(run_dir, cfg, model.state_dict(), p.history, metrics)
    return metrics


def train_autocomplete(run_dir: Path, cfg: dict) -> dict:
    device = start_run(run_dir, cfg)
    classes, data = load_data(cfg)
    model = build_model(cfg, len(classes)).to(device)
    trainer = AutocompleteTrainer(cfg, model, data, run_dir, device)
    if not trainer.try_resume():
        trainer.ckpt_path.unlink(missing_ok=True)
    trainer.fit()
    metrics = write_outputs(run_dir, cfg, trainer, device)
    print(f"[rnnrepro] done: test cross entropy {metrics['test_cross_entropy']:.4f}, test accuracy "
          f"{100 * metrics['test_accuracy']:.2f} %, {metrics['params']:,} params, {metrics['wall_seconds']:.0f}s",
          file=sys.stderr)
    return metrics
