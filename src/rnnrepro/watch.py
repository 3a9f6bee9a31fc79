"""The training cells being trained now, refreshed on the console: ``python -m rnnrepro.status --watch
[SECONDS]`` (every 10 s without SECONDS; Ctrl-C ends it). ``--budget`` and ``--study`` narrow it.

One row per cell whose ``progress.json`` says it is running and whose trainer is alive (the same test
as ``status``: rnnrepro.progress_reading.process_gone), in every budget's run folders (``runs/`` and the
precisions' ``runs-<precision>/``), cells of your own included:

  cell        budget, study/corpus/model/frac/seed, and what it does when it is not training
  epoch       the epoch in progress of the recipe's cap, and how far into it (batches)
  train loss  the mean training loss of the batches since the last validation (language models: of
              this epoch so far), nats
  val loss    the last validation's loss (best so far in brackets)
  elapsed     wall time of the cell, over every attempt
  epoch ETA   the time to the end of this epoch
  run ETA     the time to the recipe's epoch cap. Both come from the wall time per epoch so far
              (validations included, the final evaluation not). Where the recipe's stopping rule
              (early stopping, the non-monotone stop, a cap on iterations) can end the run sooner,
              it is an upper bound, shown "at most"

It reads only files (rnnrepro.train.progress_file, and the run folder's config.json for the stopping
rule), so it runs anywhere the results tree is, beside the training, on a login node of a cluster too.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from pathlib import Path

from tabulate import tabulate

from . import layout
from .progress_reading import WATCH_SECONDS, process_gone, progress_problem, wall_time
from .train import progress_file

CLEAR = "\033[H\033[2J"  # cursor home, clear the screen (a terminal only)


def progress_files(root: Path, budgets: list[str] | None = None) -> list[tuple[str, Path]]:
    """(budget, run folder) of every run folder with a progress.json under ``root``'s results trees."""
    found = []
    for budget in layout.budgets_with_results(root):
        if budgets and budget not in budgets:
            continue
        tree = root / layout.results_dir(budget)
        for part in ("runs", *(f"runs-{name}" for name in layout.OTHER_PRECISIONS)):
            pattern = f"*/*/*/frac*/seed*/{progress_file.NAME}"
            found += [(budget, path.parent) for path in sorted((tree / part).glob(pattern))]
    return found


def stops_early(run_dir: Path) -> bool:
    """Whether the cell's recipe has a rule that can end training before its epoch cap."""
    try:
        recipe = json.loads((run_dir / "config.json").read_text())["recipe"]
    except (OSError, ValueError, KeyError, TypeError):  # no readable config: no rule known
        return False
    return bool(recipe.get("early_stopping") or recipe.get("stop_on_nonmono") or recipe.get("max_iterations"))


def estimate(record: dict, age: float) -> tuple[float | None, float | None]:
    """(seconds to the end of the epoch, seconds to the epoch cap) at the wall time per epoch so far;
    ``age``: seconds since the record was written. None where nothing of an epoch is done yet."""
    epoch, epochs, seconds = record.get("epoch"), record.get("epochs"), record.get("seconds")
    batch, per_epoch = record.get("batch") or 0, record.get("batches_per_epoch")
    if not (epoch and epochs and seconds and per_epoch):
        return None, None
    into = min(batch / per_epoch, 1.0)
    done = epoch - 1 + into
    if done <= 0:
        return None, None
    each = seconds / done
    return max(0.0, each * (1 - into) - age), max(0.0, each * (epochs - done) - age)


def _loss(value) -> str:
    return "" if value is None else f"{value:.4f}"


def rows(root: Path, now: float, budgets: list[str] | None = None, studies: list[str] | None = None) -> list[dict]:
    """One row per cell being trained now (the module docstring's columns)."""
    out = []
    for budget, run_dir in progress_files(root, budgets):
        try:
            record = progress_file.read(run_dir)
        except (progress_file.DamagedProgressFile, OSError):  # `status` names it; here only live cells
            continue
        if not record or record["state"] != "running" or progress_problem(record) or process_gone(record, now):
            continue
        cell = record.get("cell") or str(run_dir.relative_to(root))
        if studies and cell.split("/", 1)[0] not in studies:
            continue
        try:
            age = max(0.0, now - datetime.fromisoformat(record["updated_at"]).timestamp())
        except (KeyError, TypeError, ValueError):
            age = 0.0
        epoch_left, run_left = estimate(record, age)
        bound = "at most " if run_left is not None and stops_early(run_dir) else ""
        doing = record.get("phase", "training")
        into = (f" ({record.get('batch') or 0}/{record['batches_per_epoch']} batches)"
                if record.get("batches_per_epoch") else "")
        best = record.get("best_val_loss")
        out.append({
            "cell": f"{budget}: {cell}" + ("" if doing == "training" else f" ({doing})"),
            "epoch": f"{record.get('epoch')}/{record.get('epochs')}{into}",
            "train loss": _loss(record.get("train_loss")),
            "val loss": _loss(record.get("val_loss")) + (f" ({best:.4f})" if best is not None else ""),
            "elapsed": wall_time((record.get("seconds") or 0) + age),
            "epoch ETA": wall_time(epoch_left),
            "run ETA": bound + wall_time(run_left) if run_left is not None else "",
        })
    return out


def view(root: Path, now: float, every: float, budgets: list[str] | None = None,
         studies: list[str] | None = None) -> str:
    """The screen the watch shows: a heading, the table, and what the ETAs mean."""
    found = rows(root, now, budgets, studies)
    clock = datetime.fromtimestamp(now).strftime("%H:%M:%S")
    heading = (f"{clock}  {len(found)} training cell{'' if len(found) == 1 else 's'} being trained "
               f"(refreshed every {every:g} s; Ctrl-C ends)")
    if not found:
        return heading + "\nnone now: `python -m rnnrepro.status` lists every cell and its state\n"
    notes = ["ETA: at the wall time per epoch so far, validations included, the final evaluation not."]
    if any(row["run ETA"].startswith("at most") for row in found):
        notes.append("at most: the recipe's stopping rule can end the run before its epoch cap.")
    return "\n".join([heading, tabulate(found, headers="keys", disable_numparse=True), *notes]) + "\n"


def watch(root: Path, every: float = WATCH_SECONDS, budgets: list[str] | None = None,
          studies: list[str] | None = None, stream=None) -> int:
    """Show :func:`view` every ``every`` seconds until Ctrl-C (which ends it with status 0): over the
    last one on a terminal, one after another otherwise."""
    stream = stream or sys.stdout
    terminal = stream.isatty()
    try:
        while True:
            screen = view(root, time.time(), every, budgets, studies)
            stream.write((CLEAR if terminal else "") + screen + ("" if terminal else "\n"))
            stream.flush()
            time.sleep(every)
    except KeyboardInterrupt:
        stream.write("\n")
        return 0
