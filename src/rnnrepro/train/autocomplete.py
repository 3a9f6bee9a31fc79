"""Training one autocomplete cell (task `autocomplete`): per-character word classification.

As the authors' TensorFlow runs (Distill, "Visualizing memorization in RNNs"): batches of
``batch_size`` observations drawn in a fresh random order each epoch, padded to the longest in the
batch; Adam; the loss is the cross entropy averaged over the characters whose target is a known word
(padding and <unk> targets are masked out, as the authors' loss weights do). Every
``validation_every`` batches the loss on the first ``validation_sequences`` validation observations
is recorded (the convergence figure) and a resume checkpoint is written. Training ends after
``epochs`` passes (or ``max_iterations`` batches), or earlier by the recipe's ``early_stopping``:
patience on the best, counted in checks (rnnrepro.train.stopping), so that every unit of a comparison
trains to its own convergence under one rule.

At the end the weights the recipe's ``score`` names are evaluated: ``final``, the last weights (one
pass, no selection, as the authors), or ``best``, those of the check with the lowest validation loss
(kept in ``checkpoint/best.pt`` as the language models' are). They are evaluated on the validation and
test splits the way the published numbers were measured (their test script runs batch 1, so nothing is
padded):

- cross entropy: per observation, the mean over its known-word characters; then the mean over
  observations (an observation without a known word has no cross entropy and is skipped);
- accuracy: the share of all real characters (padding excluded, <unk> targets included) whose top
  prediction is the target word.

Writes ``config.json``, ``history.csv`` (one row per validation check), ``metrics.json`` and
``model.pt`` (the scored weights with the config); ``checkpoint/last.pt`` lets a killed run resume bit
for bit on a CPU, ``checkpoint/best.pt`` holds the weights to score. The loop itself (resume, SIGTERM,
divergence, the run files) is rnnrepro.train.loop.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from .. import console, precision
from ..configuration import ConfigError
from ..data.autocomplete import INPUT_SYMBOLS, PAD_ID, UNK_ID, EncodedSplit, load_classes, load_split
from ..models.autocomplete import AutocompleteModel
from . import checkpoint, optimizers, unigram
from .loop import Progress, Step, TrainingDiverged, run_cell
from .stopping import patience_ended


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


def make_optimizer(model: AutocompleteModel, recipe: dict) -> optimizers.Adam:
    """The recipe's Adam (step size, betas, epsilon) over every parameter of the model."""
    return optimizers.Adam(model.parameters(), lr=recipe["lr"], betas=(recipe["adam_beta1"], recipe["adam_beta2"]),
                           eps=recipe["adam_eps"])


def training_step(model: AutocompleteModel, optimizer: optimizers.Adam, inputs: torch.Tensor,
                  targets: torch.Tensor, precision_name: str = precision.DEFAULT) -> float:
    """One Adam step on a batch (T, B); returns its loss, the mean cross entropy over known-word targets."""
    known = targets > UNK_ID
    with precision.autocast(precision_name, inputs.device):
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
             observations: int | None = None, precision_name: str = precision.DEFAULT,
             what: str = "evaluation") -> dict:
    """Cross entropy and accuracy over the first ``observations`` of a split, as the published numbers;
    ``what`` names it in the progress lines."""
    model.eval()
    count = len(split.lengths) if observations is None else min(observations, len(split.lengths))
    ce_sum, ce_observations, correct, characters = 0.0, 0, 0, 0
    starts = range(0, count, batch_size)
    for start in console.progress(len(starts), what, "batch", iterable=starts):
        inputs, targets = batch_tensors(split, np.arange(start, min(start + batch_size, count)), device)
        with precision.autocast(precision_name, device):
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


class AutocompleteTask:
    """The autocomplete task for rnnrepro.train.loop."""
    position_unit = "batch"    # of the epoch's observation order
    advice = "`lr`"
    check_at_start = True      # the untrained model: where every convergence curve starts

    def __init__(self, cfg: dict, run_dir: Path, device: torch.device):
        self.cfg, self.device, self.recipe = cfg, device, cfg["recipe"]
        self._unigram_loss: float | None = None
        self.precision = cfg["precision"]
        classes, self.data = load_data(cfg)
        self.model = build_model(cfg, len(classes)).to(device)
        self.best_path = checkpoint.checkpoint_dir(run_dir) / checkpoint.BEST
        r = self.recipe
        self.optimizer = make_optimizer(self.model, r)

    def batches_per_epoch(self) -> int:
        return math.ceil(len(self.data["train"].lengths) / self.recipe["batch_size"])

    def total_iterations(self) -> int:
        full = self.recipe["epochs"] * self.batches_per_epoch()
        limit = self.recipe["max_iterations"]
        return full if limit is None else min(full, limit)

    def epoch_order(self, epoch: int) -> np.ndarray:
        """The epoch's observation order: a function of seed and epoch, so a resumed run draws the same."""
        return np.random.default_rng([self.cfg["seed"], epoch]).permutation(len(self.data["train"].lengths))

    # ---- state (the model, the optimizer, and the weights to score in best.pt) -------------
    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict, progress: Progress) -> None:
        if progress.best_val_loss < math.inf:  # the weights the final evaluation needs
            if not self.best_path.exists():
                raise checkpoint.DamagedCheckpoint(self.best_path, "it is missing")
            checkpoint.load(self.best_path, self.device)

    # ---- training ------------------------------------------------------------------------
    def start(self, progress: Progress) -> None:
        pass

    def epoch_length(self) -> int:
        return self.batches_per_epoch()

    def fraction_done(self, progress: Progress) -> float:
        return min(1.0, progress.iteration / self.total_iterations())

    def batches(self, progress: Progress) -> Iterator[np.ndarray]:
        order, size, total = self.epoch_order(progress.epoch), self.recipe["batch_size"], self.total_iterations()
        while progress.iteration < total and progress.position < self.batches_per_epoch():
            yield order[progress.position * size: (progress.position + 1) * size]

    def step(self, rows: np.ndarray, progress: Progress) -> Step:
        inputs, targets = batch_tensors(self.data["train"], rows, self.device)
        loss = training_step(self.model, self.optimizer, inputs, targets, self.precision)
        return Step(loss=loss, items=len(rows), advance=1)

    def check_due(self, progress: Progress) -> bool:
        return (progress.iteration % self.recipe["validation_every"] == 0
                or progress.iteration == self.total_iterations())

    # ---- validation ----------------------------------------------------------------------
    def validate(self, progress: Progress) -> dict:
        p, r = progress, self.recipe
        result = evaluate(self.model, self.data["valid"], r["eval_batch_size"], self.device,
                          r["validation_sequences"], self.precision, f"iteration {p.iteration} validation")
        return {
            "iteration": p.iteration, "epoch": p.epoch, "sequences": p.items,
            "train_loss": p.loss_sum / p.loss_batches if p.loss_batches else math.nan,
            "val_loss": result["cross_entropy"], "val_accuracy": result["accuracy"],
            "seconds": p.seconds, "sequences_per_s": p.items / p.seconds if p.seconds else math.nan,
        }

    def after_validation(self, row: dict, progress: Progress) -> None:
        p, r = progress, self.recipe
        improved = row["val_loss"] < p.best_val_loss
        if improved:
            p.best_val_loss, p.best_epoch = row["val_loss"], p.epoch
        if improved or r["score"] == "final":
            self.save_best()  # the weights the final evaluation scores
        p.finished = p.iteration >= self.total_iterations() or self.patience_ended(p.history)

    def stopped_by_its_rules(self, progress: Progress) -> bool:
        """Whether something other than the epoch cap ended training: ``max_iterations``, or the recipe's
        patience on the best. A finished cell whose cap is raised goes on otherwise; the steps are those of
        a run started with the higher cap (the observation order is a function of seed and epoch, Adam's
        state is in the checkpoint), and its history keeps the check made at the old cap."""
        limit = self.recipe["max_iterations"]
        return (limit is not None and progress.iteration >= limit) or self.patience_ended(progress.history)

    def patience_ended(self, history: list[dict]) -> bool:
        return patience_ended(self.recipe["early_stopping"], history, lambda: self.unigram_loss())

    def unigram_loss(self) -> float:
        """The validation loss of predicting the training split's word-class frequencies (metrics.json's
        ``val_unigram_loss``, and the plateau `early_stopping.after_plateau` waits to leave)."""
        if self._unigram_loss is None:
            self._unigram_loss = unigram.autocomplete_loss(self.data["train"].targets, self.data["valid"].targets,
                                                           self.model.dense.out_features, UNK_ID)
        return self._unigram_loss

    def save_best(self) -> None:
        checkpoint.save_atomic(self.model.state_dict(), self.best_path)

    def report(self, row: dict, progress: Progress) -> str:
        return (f"iteration {row['iteration']}/{self.total_iterations()}: val loss {row['val_loss']:.4f}, "
                f"val accuracy {row['val_accuracy']:.4f}, {row['seconds']:.1f}s")

    # ---- the end -------------------------------------------------------------------------
    def final_metrics(self, progress: Progress) -> dict:
        cfg, p, r, model = self.cfg, progress, self.recipe, self.model
        model.load_state_dict(checkpoint.load(self.best_path, self.device))
        best = next(row for row in p.history if row["val_loss"] == p.best_val_loss)
        scored = p.history[-1] if r["score"] == "final" else best
        final = {split: evaluate(model, self.data[split], r["eval_batch_size"], self.device, None, self.precision,
                                 f"final {split}") for split in ("valid", "test")}
        counts = model.parameter_counts()
        return {
            "study": cfg["study"], "dataset": cfg["dataset"], "corpus": cfg["corpus"], "model": cfg["model"],
            "fraction": cfg["fraction"], "seed": cfg["seed"], "budget": cfg["budget"],
            "params": sum(counts.values()), **{f"params_{part}": n for part, n in counts.items()},
            "classes": model.dense.out_features,
            "iterations": p.iteration, "epochs": p.epoch, "train_sequences": p.items,
            "best_epoch": best["epoch"], "best_iteration": best["iteration"],
            "best_val_loss_during_training": p.best_val_loss, "scored_iteration": scored["iteration"],
            "stopped_by_patience": self.patience_ended(p.history),
            "val_cross_entropy": final["valid"]["cross_entropy"], "val_accuracy": final["valid"]["accuracy"],
            "test_cross_entropy": final["test"]["cross_entropy"], "test_accuracy": final["test"]["accuracy"],
            "test_observations": final["test"]["observations"], "test_characters": final["test"]["characters"],
            "val_unigram_loss": self.unigram_loss(),
            "train_seconds": p.seconds,
            "seconds_per_1000_sequences": 1000 * p.seconds / p.items,
        }

    def summary(self, metrics: dict) -> str:
        return (f"test cross entropy {metrics['test_cross_entropy']:.4f}, test accuracy "
                f"{100 * metrics['test_accuracy']:.2f} %")


def train_autocomplete(run_dir: Path, cfg: dict, device: torch.device) -> dict:
    return run_cell(run_dir, cfg, device, AutocompleteTask)
