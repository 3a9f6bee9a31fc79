"""The one training loop every task runs, and how a training cell stops, resumes and fails.

A task (``LanguageModelTask`` in rnnrepro.train.language_model, ``AutocompleteTask`` in
rnnrepro.train.autocomplete) supplies what differs: the model and optimizer, the batches of an
epoch, one optimizer step, the validation check (a row of history.csv, and when to stop) and the
final metrics. This module owns what they share, written and tested once:

- the run folder: ``config.json`` first; ``history.csv`` rewritten with every validation check's row;
  ``progress.json`` (rnnrepro.train.progress_file: state, epoch, batch, losses, time left, process)
  kept current as the cell runs, for ``python -m rnnrepro.status``; ``metrics.json`` and ``model.pt``
  at the end. ``metrics.json`` is written last and alone marks the cell done: a killed cell's
  ``history.csv`` is only its rows so far. Every file is written atomically (rnnrepro.train.files): a
  full disk or an unwritable folder stops the cell naming the path and the fix, and never replaces a
  good file with a broken one;
- the resume checkpoint (rnnrepro.train.checkpoint), written after every validation check and, on
  SIGTERM (a scheduler's time limit) or Ctrl-C, at the next batch boundary; a killed cell resumes bit
  for bit on a CPU. A checkpoint written for another config is ignored; one that cannot be read back
  is moved aside to ``<name>.damaged`` and the cell starts afresh, with a warning naming both files;
- divergence: a loss that is NaN, infinite, or so large that its perplexity overflows a float
  (above ~709.8 nats per prediction, where ``math.exp`` raises) stops the cell, naming it, the epoch and
  batch, and the recipe values to lower;
- the float32 matmul precision (rnnrepro.precision), set at the start and recorded in metrics.json;
- the progress bar of each epoch and the log (``logging``, for people: nothing parses it).
"""

from __future__ import annotations

import copy
import logging
import math
import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from .. import console, precision
from ..cell_identity import as_written_now
from ..cells import is_outside_cell
from ..custom_cells import module_file
from . import checkpoint
from .common import HISTORY, provenance, start_run, write_history, write_run_outputs
from .files import RunFolderError
from .optimizers import SGD, Adam
from .progress_file import ProgressFile, another_trainer, hold_lock

LOGGER = logging.getLogger(__name__)

# The largest loss whose perplexity is a finite float64: math.exp raises OverflowError above it.
LARGEST_LOSS = math.log(sys.float_info.max)


class TrainingDiverged(RuntimeError):
    """The loss became NaN, infinite, or too large for its perplexity to be a number."""


class TrainingInterrupted(RuntimeError):
    """SIGTERM or Ctrl-C (SIGINT) arrived; a resume checkpoint was written. ``by`` names the signal."""

    def __init__(self, message: str, by: str = "SIGTERM"):
        super().__init__(message)
        self.by = by


def perplexity(loss: float) -> float:
    """exp(loss), or inf where that overflows a float (a diverged model); NaN stays NaN."""
    return math.exp(loss) if loss <= LARGEST_LOSS or math.isnan(loss) else math.inf


def loss_problem(loss: float, what: str) -> str | None:
    """Why ``loss`` means training diverged, or None when it is usable."""
    if math.isfinite(loss) and loss <= LARGEST_LOSS:
        return None
    if math.isfinite(loss):
        return f"the {what} loss is {loss:.4g} nats, too large for its perplexity to be a number"
    return f"the {what} loss is {loss}"


@dataclass
class Progress:
    """Where training stands; saved in the resume checkpoint."""
    epoch: int = 1                   # the epoch in progress (or next to run)
    batch: int = 0                   # batches done in this epoch
    position: int = 0                # where in the epoch's data the next batch starts (the task's unit)
    iteration: int = 0               # batches done in all epochs
    loss_sum: float = 0.0            # sum of the batch losses since the last check
    loss_batches: int = 0
    items: int = 0                   # tokens (or observations) trained on, all epochs
    seconds: float = 0.0             # training seconds (checks excluded), all epochs
    check_items: int = 0             # ... since the last check
    check_seconds: float = 0.0
    history: list = field(default_factory=list)  # one row of history.csv per check
    best_val_loss: float = math.inf
    best_epoch: int = 0
    finished: bool = False
    wall_seconds: float = 0.0        # wall time of this cell up to its last checkpoint
    diverged: str | None = None      # a tuning cell's divergence, which ended it (rnnrepro.tuning)


@dataclass
class Step:
    """What one optimizer step reports to the loop."""
    loss: float        # the batch's training loss (cross entropy, nats per prediction)
    items: int         # predictions (tokens) or observations it trained on
    advance: int       # how far it moved Progress.position


class Task(Protocol):
    """What a task supplies to the training loop."""
    model: nn.Module
    optimizer: Adam | SGD
    position_unit: str    # what Progress.position counts, for the log ("row", "batch")
    advice: str           # the recipe values to lower when the loss diverges ("`lr` or `clip`")
    check_at_start: bool  # validate the untrained model too (where a convergence curve starts)

    def start(self, progress: Progress) -> None:
        """A fresh start only (no checkpoint to resume): e.g. load a parent's weights."""

    def epoch_length(self) -> int:
        """The progress bar's total for one epoch, in units of Progress.position."""

    def fraction_done(self, progress: Progress) -> float:
        """How much of the planned training is done (0 to 1), for the estimate of the time left."""

    def batches(self, progress: Progress) -> Iterator[Any]:
        """The epoch's remaining batches, from ``progress.position``; draws its randomness lazily."""

    def step(self, batch: Any, progress: Progress) -> Step:
        """One optimizer step; raises TrainingDiverged (without the cell's name) before a bad update."""

    def check_due(self, progress: Progress) -> bool:
        """After a batch: is a validation check (and checkpoint) due?"""

    def validate(self, progress: Progress) -> dict:
        """The check's row of history.csv (with ``val_loss``); changes nothing else."""

    def after_validation(self, row: dict, progress: Progress) -> None:
        """Once the row is in ``progress.history``: keep the best weights, set ``progress.finished`` to stop."""

    def report(self, row: dict, progress: Progress) -> str:
        """The log line of a check."""

    def state_dict(self) -> dict:
        """The task's own resumable state."""

    def load_state_dict(self, state: dict, progress: Progress) -> None:
        """Restore it; raise checkpoint.DamagedCheckpoint if a file it needs cannot be read."""

    def final_metrics(self, progress: Progress) -> dict:
        """Metrics of the trained model, and leave in ``model`` the weights model.pt keeps."""

    def summary(self, metrics: dict) -> str:
        """The headline numbers for the last log line."""


class StopFlag:
    """Set by SIGTERM (a SLURM time limit or preemption) or Ctrl-C (SIGINT) while installed; checked
    between batches, where the loop writes a resume checkpoint and stops. A second Ctrl-C does not wait
    for the batch: it raises KeyboardInterrupt at once."""

    NAMES = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "Ctrl-C"}

    def __init__(self):
        self.requested = False
        self.by = ""
        self._previous = {}

    def _handle(self, signum, frame) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested, self.by = True, self.by or self.NAMES[signum]

    def __enter__(self) -> StopFlag:
        self._previous = {signum: signal.signal(signum, self._handle) for signum in self.NAMES}
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def cell_name(cfg: dict) -> str:
    return f"{cfg['study']}/{cfg['corpus']}/{cfg['model']}/frac{cfg['fraction']}/seed{cfg['seed']}"


class TrainingLoop:
    def __init__(self, cfg: dict, task: Task, run_dir: Path, device: torch.device, record: ProgressFile):
        self.cfg, self.task, self.run_dir, self.device, self.record = cfg, task, Path(run_dir), device, record
        self.ckpt_dir = checkpoint.checkpoint_dir(run_dir)
        self.progress = Progress()
        self._attempt_started = time.perf_counter()
        self._earlier_wall = 0.0
        self.parent = parent_digest(cfg)
        record.snapshot = self.snapshot

    def snapshot(self) -> dict:
        """Where training stands, for progress.json (read from the heartbeat thread too: reads only)."""
        t, p = self.task, self.progress
        length, done, seconds = t.epoch_length(), t.fraction_done(p), self.wall_seconds()
        covered = (p.epoch - 1) * length + p.position  # units of Progress.position in all epochs
        last = p.history[-1] if p.history else {}
        best = min((row["val_loss"] for row in p.history), default=None)
        return {
            "epoch": p.epoch, "epochs": self.cfg["recipe"]["epochs"], "epochs_done": p.epoch - 1 + p.finished,
            "batch": p.batch, "batches_per_epoch": round(p.iteration * length / covered) if covered else None,
            "iteration": p.iteration,
            "train_loss": p.loss_sum / p.loss_batches if p.loss_batches else None,
            **{key: value for key, value in last.items() if key.startswith("val_")},
            "best_val_loss": best, **({"best_val_ppl": perplexity(best)} if "val_ppl" in last else {}),
            "seconds": round(seconds, 1),
            "eta_seconds": round(seconds * (1 - done) / done) if done > 0 else None,
        }

    def wall_seconds(self) -> float:
        """Wall time of this cell over every attempt (up to each attempt's last checkpoint)."""
        return self._earlier_wall + time.perf_counter() - self._attempt_started

    def where(self, batch: int) -> str:
        c = self.cfg
        return (f"cell {c['study']}/{c['corpus']}/{c['model']}/frac{c['fraction']}/seed{c['seed']}, "
                f"epoch {self.progress.epoch}, batch {batch}")

    def diverged(self, batch: int, problem: str) -> TrainingDiverged:
        c = self.cfg
        cell = c["architecture"]["cell"]
        own = "" if not is_outside_cell(cell) else (
            f" Model {c['model']!r} is a cell of your own ({cell}, {module_file(cell) or 'its module'}): if it gives "
            f"NaN or infinite outputs, states or gradients, fix it there; the recipe is the baseline's.")
        return TrainingDiverged(
            f"{self.where(batch)}: {problem} (lr {c['recipe']['lr']}). The last good resume checkpoint is kept "
            f"in {self.ckpt_dir}. Lower {self.task.advice} of recipe {c['recipe_name']!r} in "
            f"config/studies/{c['study']}.yaml and rerun (a changed config starts the cell afresh).{own}")

    # ---- checkpointing -------------------------------------------------------------------
    def save(self) -> None:
        t = self.task
        self.progress.wall_seconds = self.wall_seconds()
        checkpoint.save_atomic({
            "config": self.cfg,
            "model": t.model.state_dict(),
            "optimizer": t.optimizer.state_dict(),
            "rng": checkpoint.rng_state(),
            "progress": self.progress,
            "task": t.state_dict(),
            "parent": self.parent,
        }, self.ckpt_dir / checkpoint.LAST)

    def try_resume(self) -> bool:
        """Continue from the resume checkpoint if there is a usable one for this config."""
        path = self.ckpt_dir / checkpoint.LAST
        if not path.exists():
            return False
        t = self.task
        fresh = (copy.deepcopy(t.model.state_dict()), copy.deepcopy(t.optimizer.state_dict()),
                 copy.deepcopy(t.state_dict()), checkpoint.rng_state())
        try:
            saved = checkpoint.load(path, self.device, ("config",))
            # a checkpoint written before the config held the cell's numerics version is of version 1
            saved["config"] = as_written_now(saved["config"], self.cfg)
            raised = saved["config"] != self.cfg and raised_cap(saved["config"], self.cfg) \
                and hasattr(t, "stopped_by_its_rules")
            if saved["config"] != self.cfg and not raised:
                LOGGER.info(f"{path} was written for a different config; starting this cell afresh")
                return False
            if saved.get("parent") != self.parent:
                LOGGER.info(f"{path} was written when the weights this cell starts from were others "
                            f"({self.cfg['init_from']} has changed since); starting this cell afresh")
                return False
            missing = [key for key in ("model", "optimizer", "rng", "progress", "task") if key not in saved]
            if missing:
                raise checkpoint.DamagedCheckpoint(path, f"it holds no {', '.join(missing)}")
            try:
                t.model.load_state_dict(saved["model"])
                t.optimizer.load_state_dict(saved["optimizer"])
                checkpoint.set_rng_state(saved["rng"])
                progress = saved["progress"]
                if not isinstance(progress, Progress):
                    raise TypeError(f"its progress is a {type(progress).__name__}")
                t.load_state_dict(saved["task"], progress)
            except checkpoint.DamagedCheckpoint:
                raise
            except (RuntimeError, KeyError, ValueError, TypeError, AttributeError) as e:
                raise checkpoint.DamagedCheckpoint(path, f"it does not fit this model: {type(e).__name__}: "
                                                   f"{str(e).splitlines()[0] if str(e) else ''}") from None
        except checkpoint.DamagedCheckpoint as e:
            t.model.load_state_dict(fresh[0])
            t.optimizer.load_state_dict(fresh[1])
            t.load_state_dict(fresh[2], Progress())
            checkpoint.set_rng_state(fresh[3])
            kept = ""
            if e.path.exists():
                kept = f"; moved it to {checkpoint.move_aside(e.path)} (delete that once you no longer need it)"
            LOGGER.warning(f"warning: {e}{kept}; starting this cell afresh")
            return False
        if raised:
            before = saved["config"]["recipe"]["epochs"]
            if progress.finished and not t.stopped_by_its_rules(progress):
                progress.finished = False
                progress.epoch, progress.batch, progress.position = progress.epoch + 1, 0, 0
            LOGGER.info(f"the recipe's epoch cap was raised from {before} to {self.cfg['recipe']['epochs']}"
                        + ("" if progress.finished else f": training goes on from epoch {progress.epoch}")
                        + (": its own stopping rule had already ended it" if progress.finished else ""))
        self.progress = p = progress
        self._earlier_wall = p.wall_seconds
        write_history(self.run_dir, p.history)  # as of this checkpoint
        LOGGER.info(f"resuming from {path}: epoch {p.epoch}, {t.position_unit} {p.position}, "
                    f"iteration {p.iteration}")
        return True

    def start_afresh(self) -> None:
        for stale in (checkpoint.LAST, checkpoint.BEST):
            (self.ckpt_dir / stale).unlink(missing_ok=True)
        (self.run_dir / HISTORY).unlink(missing_ok=True)  # an earlier attempt's rows
        self.task.start(self.progress)
        if self.task.check_at_start:
            self._check()
        else:
            self.save()

    # ---- training ------------------------------------------------------------------------
    def _check(self) -> None:
        p = self.progress
        self.record.write(phase="validating")
        row = self.task.validate(p)
        problem = loss_problem(row["val_loss"], "validation")
        if problem:
            raise self.diverged(p.batch, problem)
        p.history.append(row)
        self.task.after_validation(row, p)
        p.loss_sum, p.loss_batches, p.check_items, p.check_seconds = 0.0, 0, 0, 0.0
        self.save()  # first the checkpoint: history.csv never holds a row a resume would not have
        write_history(self.run_dir, p.history)
        self.record.write(phase="training")
        LOGGER.info(self.task.report(row, p))

    def _epoch(self, stop: StopFlag) -> None:
        t, p = self.task, self.progress
        bar = console.progress(t.epoch_length(), f"epoch {p.epoch}/{self.cfg['recipe']['epochs']}", t.position_unit,
                               initial=p.position)
        try:
            for batch in t.batches(p):
                started = time.perf_counter()
                try:
                    step = t.step(batch, p)
                except TrainingDiverged as e:
                    step, problem = None, str(e)
                else:
                    problem = loss_problem(step.loss, "training")
                if problem and self.ends_at_divergence(p, problem):
                    return
                if problem:
                    raise self.diverged(p.batch + 1, problem)
                p.position += step.advance
                p.batch += 1
                p.iteration += 1
                p.loss_sum += step.loss
                p.loss_batches += 1
                p.items += step.items
                p.check_items += step.items
                bar.update(step.advance)
                bar.set_postfix(loss=f"{step.loss:.3f}", refresh=False)
                seconds = time.perf_counter() - started
                p.seconds += seconds
                p.check_seconds += seconds
                if t.check_due(p):
                    self._check()
                elif stop.requested:
                    self.save()
                if stop.requested:
                    raise TrainingInterrupted(f"{self.where(p.batch)}: stopped by {stop.by}; resume checkpoint "
                                              f"written to {self.ckpt_dir}", by=stop.by)
                if p.finished:
                    return
        finally:
            bar.close()
        p.epoch, p.batch, p.position = p.epoch + 1, 0, 0
        self.record.write()

    def ends_at_divergence(self, p: Progress, problem: str) -> bool:
        """A tuning cell (rnnrepro.tuning) ends where training diverges, before the step that would have
        spoilt its weights: it is scored on its best epoch so far, or on these weights where no epoch
        was validated. Any other cell raises."""
        if not self.cfg.get("tuning", {}).get("diverged_is_a_result") or not hasattr(self.task, "save_best"):
            return False
        p.diverged = f"epoch {p.epoch}, batch {p.batch + 1}: {problem} (lr {self.cfg['recipe']['lr']})"
        if p.best_val_loss == math.inf:
            self.task.save_best()
        p.finished = True
        self.save()
        LOGGER.warning(f"{self.where(p.batch + 1)}: {problem}; a tuning cell ends here, scored on its best "
                       f"weights before it")
        return True

    def fit(self) -> None:
        self.record.write(phase="training")
        with StopFlag() as stop:
            while not self.progress.finished:
                self._epoch(stop)

    def finish(self) -> dict:
        """Final metrics, and the run folder's outputs."""
        t, p = self.task, self.progress
        self.record.write(phase="final evaluation")
        metrics = {**t.final_metrics(p), "wall_seconds": self.wall_seconds(), **provenance(self.device),
                   **precision.describe(self.cfg["precision"]), **({"diverged": p.diverged} if p.diverged else {})}
        write_run_outputs(self.run_dir, self.cfg, t.model.state_dict(), p.history, metrics)
        return metrics


def parent_digest(cfg: dict) -> str | None:
    """For a cell that starts from another cell's weights (``init_from``), a digest of those weights:
    kept in the resume checkpoint, so that a cell whose parent was retrained since (its cap raised, its
    recipe changed) starts afresh from the new weights instead of resuming from the old ones. None for a
    cell trained from scratch; "missing" where the file is absent (the fresh start then names it)."""
    parent = cfg.get("init_from")
    if not parent:
        return None
    if not Path(parent).exists():
        return "missing"
    return checkpoint.weights_digest(Path(parent), "the cell this one finetunes")


def raised_cap(saved: dict, wanted: dict) -> bool:
    """Whether ``wanted`` is ``saved`` with a higher epoch cap and nothing else changed. Such a cell goes on
    from its checkpoint (a run that stopped at the old cap continues): its numbers are those of a run
    started with the higher cap, as no recipe reads the cap before it is reached."""
    before, after = saved.get("recipe", {}).get("epochs"), wanted.get("recipe", {}).get("epochs")
    if not isinstance(before, int) or not isinstance(after, int) or after <= before:
        return False
    return {**saved, "recipe": {**saved["recipe"], "epochs": after}} == wanted


def run_cell(run_dir: Path, cfg: dict, device: torch.device, make_task) -> dict:
    """Train one cell on ``device``: ``make_task(cfg, run_dir, device)`` builds the task (after the seed
    is set). progress.json says how it went, whatever happens; the exception, if any, goes on to the
    caller."""
    if (other := another_trainer(run_dir)) is not None:
        raise another_process(run_dir, other)
    start_run(run_dir, cfg)  # config.json first
    lock = hold_lock(run_dir)  # held until this process ends
    if lock is None:
        raise another_process(run_dir, another_trainer(run_dir) or "it has just started")
    record = ProgressFile(run_dir, cell_name(cfg), snapshot=dict)  # the loop's snapshot once there is one
    try:
        record.start()
        task = make_task(cfg, run_dir, device)
        loop = TrainingLoop(cfg, task, run_dir, device, record)
        if not loop.try_resume():
            loop.start_afresh()
        loop.fit()
        metrics = loop.finish()
    except TrainingInterrupted as e:
        record.end("interrupted", stopped_by=f"{e.by} (a resume checkpoint was written)")
        raise
    except KeyboardInterrupt:
        record.end("interrupted", stopped_by="Ctrl-C (a rerun resumes from the last checkpoint)")
        raise
    except Exception as e:
        record.end("failed", error=f"{type(e).__name__}: {e}")
        raise
    else:
        record.end("done")
    finally:
        os.close(lock)
    LOGGER.info(f"done: {task.summary(metrics)}, {metrics['params']:,} params, {metrics['wall_seconds']:.0f}s")
    return metrics


def another_process(run_dir: Path, who: str) -> RunFolderError:
    return RunFolderError(f"{run_dir}: another process on this machine is training this cell ({who}), for one "
                          "left running by a Snakemake or `records grow` that was killed; wait for it to end "
                          "(`python -m rnnrepro.status`) or stop it, then run the target again")
