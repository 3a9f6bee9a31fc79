"""The grid at a glance: ``python -m rnnrepro.status [--study S] [--budget B] [--format table|csv]``.

One row per training cell (like DVC's ``exp show``): its parameters, its state and its numbers,
joined from the run folders under ``results/runs/`` and the training logs under ``logs/train/``.
Run it in the repository root, during or after a run (locally or on SLURM: it reads files only).
The cells are those of the budget's grid (config/config.yaml, or --budget) plus any run folder found.

States:
  done     metrics.json is written
  running  a live process holds the cell's GPU lock, or its log or checkpoint changed recently
  failed   the log ends in an error or a stop (SIGTERM, time limit), or a checkpoint or log is left
           without metrics and nothing is running; a rerun resumes from the checkpoint
  pending  nothing yet
Numbers of finished cells come from metrics.json (language models: the best checkpoint's validation
loss and perplexity); those of unfinished cells from the log of their last attempt (the best
validation so far, the epochs or iterations done, the training seconds).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import yaml
from tabulate import tabulate

from . import grid
from .configuration import ConfigError, load_run_config, load_study
from .gpus import DEFAULT_LOCK_DIR, held_leases

LOGS = "logs/train"
# A log or checkpoint written this recently belongs to a live job: training logs progress at least
# every 30 s and checkpoints every epoch; the final evaluation of a paper-size model takes minutes.
RECENT_SECONDS = 600
# What the trainers log (rnnrepro.train): language models per epoch, autocomplete per validation.
EPOCH_LINE = re.compile(r"\[rnnrepro\] epoch (\d+): .*val ppl ([0-9.]+|inf|nan), ([0-9.]+)s")
ITERATION_LINE = re.compile(r"\[rnnrepro\] (iteration \d+/\d+): val loss ([0-9.]+|inf|nan), .*, ([0-9.]+)s")
RESUME_LINE = re.compile(r"\[rnnrepro\] resuming from .*\bepoch (\d+)")
# How a training process reports its end without metrics: an error, a SIGTERM stop, a crash.
ENDED = re.compile(r"\[rnnrepro\] error:|stopped by SIGTERM|^Traceback \(most recent call last\)")


@dataclass
class CellStatus:
    study: str
    dataset: str
    corpus: str
    model: str
    fraction: int
    seed: int
    state: str
    epochs: int | None = None
    val_loss: float | None = None
    val_ppl: float | None = None
    test_ppl: float | None = None
    test_accuracy: float | None = None
    wall_seconds: float | None = None
    note: str = ""


def log_path(cell: grid.Cell) -> Path:
    return Path(LOGS, cell.study, cell.corpus, cell.model, f"frac{cell.fraction}", f"seed{cell.seed}.log")


def grid_cells(config: dict, studies: dict) -> list[grid.Cell]:
    cells = []
    for study in studies.values():
        for artifact in study["artifacts"]:
            cells += grid.artifact_cells(study, config, artifact)
    return list(dict.fromkeys(cells))


def cells_on_disk(root: Path, study_names: list[str]) -> list[grid.Cell]:
    cells = []
    for study in study_names:
        for seed_dir in sorted((root / grid.RUNS / study).glob("*/*/frac*/seed*")):
            corpus, model, frac, seed = seed_dir.relative_to(root / grid.RUNS / study).parts
            if frac[4:].isdigit() and seed[4:].isdigit():
                cells.append(grid.Cell(study, corpus, model, int(frac[4:]), int(seed[4:])))
    return cells


def live_run_dirs(root: Path) -> set[Path]:
    """Run folders of training processes that hold a GPU lock on this machine."""
    live = set()
    for holder in held_leases(DEFAULT_LOCK_DIR).values():
        argv = holder.get("argv", [])
        if "--run-dir" in argv[:-1]:
            live.add((Path(holder.get("cwd", root)) / argv[argv.index("--run-dir") + 1]).resolve())
    return live


def read_log(path: Path) -> dict:
    """Progress of the last attempt (epochs, best validation loss, seconds) and how it ended."""
    if not path.exists():
        return {}
    lines = [line.strip() for line in path.read_text(errors="replace").replace("\r", "\n").splitlines()]
    lines = [line for line in lines if line]
    epochs = [m for m in map(EPOCH_LINE.search, lines) if m]
    iterations = [m for m in map(ITERATION_LINE.search, lines) if m]
    resumed = [int(m.group(1)) - 1 for m in map(RESUME_LINE.search, lines) if m]
    ppls = [float(m.group(2)) for m in epochs]
    losses = [math.log(ppl) for ppl in ppls if ppl > 0] + [float(m.group(2)) for m in iterations]
    ended = next((line for line in reversed(lines) if ENDED.search(line)), None)
    if ended and ended.startswith("Traceback"):
        ended = lines[-1]  # the exception itself
    return {
        "epochs": max([int(m.group(1)) for m in epochs] + resumed, default=None),
        "val_loss": min(losses, default=None),
        "val_ppl": min(ppls, default=None),
        # epoch lines give each epoch's seconds, iteration lines the running total
        "seconds": round(sum(float(m.group(3)) for m in epochs) or
                         (float(iterations[-1].group(3)) if iterations else 0), 1) or None,
        "progress": iterations[-1].group(1) if iterations else "",
        "ended": ended,
        "last": lines[-1] if lines else "",
    }


def modified_recently(paths: list[Path], now: float) -> bool:
    return any(p.exists() and now - p.stat().st_mtime < RECENT_SECONDS for p in paths)


def cell_status(root: Path, cell: grid.Cell, dataset: str, live: set[Path], now: float) -> CellStatus:
    run_dir = root / cell.run_dir
    row = CellStatus(cell.study, dataset, cell.corpus, cell.model, cell.fraction, cell.seed, "pending")
    metrics_file = run_dir / "metrics.json"
    if metrics_file.exists():
        m = json.loads(metrics_file.read_text())
        row.state, row.dataset = "done", m.get("dataset", dataset)
        row.epochs, row.wall_seconds = m.get("epochs"), m.get("wall_seconds")
        row.val_loss = m.get("val_loss", m.get("val_cross_entropy"))
        row.val_ppl, row.test_ppl, row.test_accuracy = m.get("val_ppl"), m.get("test_ppl"), m.get("test_accuracy")
        return row
    log = read_log(root / log_path(cell))
    checkpoint = run_dir / "checkpoint" / "last.pt"
    row.epochs, row.val_loss, row.val_ppl = log.get("epochs"), log.get("val_loss"), log.get("val_ppl")
    row.wall_seconds, row.note = log.get("seconds"), log.get("progress", "")
    if not log.get("ended") and (run_dir.resolve() in live
                                 or modified_recently([root / log_path(cell), checkpoint], now)):
        row.state = "running"
    elif log.get("ended") or checkpoint.exists() or log:
        row.state = "failed"
        row.note = (log.get("ended") or log.get("last") or "")[:120]
        if checkpoint.exists():
            row.note = f"{row.note} (a rerun resumes from {checkpoint.relative_to(root)})".strip()
    return row


def collect(root: Path, study_filter: list[str] | None = None, budget: str | None = None) -> list[CellStatus]:
    config_file = root / "config" / "config.yaml"
    if not config_file.exists():
        raise ConfigError(f"{config_file} not found: run `python -m rnnrepro.status` in the repository root")
    config = yaml.safe_load(config_file.read_text())
    if budget:
        config["budget"] = budget
    config = load_run_config(config, str(config_file))
    names = study_filter or config["studies"]
    unknown = [s for s in names if not (root / "config" / "studies" / f"{s}.yaml").exists()]
    if unknown:
        known = sorted(p.stem for p in (root / "config" / "studies").glob("*.yaml"))
        raise ConfigError(f"--study {', '.join(unknown)}: no such study; the studies are {', '.join(known)}")
    studies = {name: load_study(name, root=root) for name in names}
    cells = list(dict.fromkeys(grid_cells(config, studies) + cells_on_disk(root, names)))
    live, now = live_run_dirs(root), time.time()
    rows = [cell_status(root, cell, grid.dataset_for(studies[cell.study], config, cell.corpus), live, now)
            for cell in cells]
    return sorted(rows, key=lambda r: (r.study, r.dataset, r.corpus, r.model, r.fraction, r.seed))


def wall_time(seconds: float | None) -> str:
    if seconds is None:
        return ""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def render(rows: list[CellStatus], fmt: str) -> str:
    records = [asdict(r) for r in rows]
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=[f.name for f in fields(CellStatus)])
        writer.writeheader()
        writer.writerows(records)
        return out.getvalue()
    records = [{("wall_time" if k == "wall_seconds" else k): (wall_time(v) if k == "wall_seconds" else v)
                for k, v in record.items()} for record in records]
    counts = {state: sum(r.state == state for r in rows) for state in ("done", "running", "failed", "pending")}
    summary = f"{len(rows)} cells: " + ", ".join(f"{n} {state}" for state, n in counts.items())
    return tabulate(records, headers="keys", floatfmt=".4g", missingval="") + "\n" + summary + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnrepro.status", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", action="append", help="only this study (repeatable); default: config's studies")
    parser.add_argument("--budget", help="whose grid to list (paper, reduced, smoke); default: config/config.yaml's")
    parser.add_argument("--format", choices=["table", "csv"], default="table")
    args = parser.parse_args(argv)
    try:
        rows = collect(Path.cwd(), args.study, args.budget)
    except ConfigError as e:
        print(f"[rnnrepro] error: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(render(rows, args.format))
    return 0


if __name__ == "__main__":
    sys.exit(main())
