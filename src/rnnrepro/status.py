"""The grid at a glance: ``python -m rnnrepro.status [--study S] [--budget B] [--format table|csv]``.

One row per training cell (like DVC's ``exp show``): its parameters, its state and its numbers,
joined from the files of its run folder (``results/runs/`` for smoke, ``results/<budget>/runs/`` for the
other budgets): ``metrics.json`` (written last, when the cell is done) and ``progress.json`` (kept current
by the trainer as it runs, rnnrepro.train.progress_file).
Run it in the repository root, during or after a run, locally or on SLURM: it reads files only.
The cells are those of the budget's grid (config/config.yaml, or --budget) plus any run folder found.

States:
  done         metrics.json is written (and reads as a cell's metrics)
  running      progress.json says running and was rewritten in the last 2 minutes (the trainer
               rewrites it at least every 30 s); on the machine that trains the cell, its process also
               still exists. The note says where it is and about how long it should still take
  failed       the trainer recorded an error (the note is the error), or metrics.json, model.pt or
               progress.json is damaged (the note says how)
  interrupted  stopped (SIGTERM: a time limit or preemption; Ctrl-C), or its process is gone without a
               word: killed (SIGKILL, out of memory, a lost node) or ended with its Snakemake. A rerun
               resumes from its checkpoint
  pending      nothing yet
Numbers of finished cells come from metrics.json (language models: the best checkpoint's validation
loss and perplexity); those of unfinished cells from progress.json (the best validation so far, the
epochs done, the wall time so far).
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import os
import socket
import sys
import time
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from pathlib import Path

import yaml
from tabulate import tabulate

from . import console, grid
from .analysis.run_files import DamagedRunFile, check_weights, read_metrics
from .configuration import ConfigError, check_checkout, load_run_config, load_study
from .train import progress_file

# A running cell's progress.json not rewritten for this long has no live process: the trainer rewrites it
# every HEARTBEAT_SECONDS; the margin covers a loaded machine and a shared file system's delays.
STALE_SECONDS = 4 * progress_file.HEARTBEAT_SECONDS
STATES = ("done", "running", "failed", "interrupted", "pending")
NOTE_WIDTH = 70  # characters per line of the table's note column


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


def grid_cells(config: dict, studies: dict) -> list[grid.Cell]:
    cells = []
    for study in studies.values():
        for artifact in grid.artifacts(study, config):
            cells += grid.artifact_cells(study, config, artifact)
    return list(dict.fromkeys(cells))


def cells_on_disk(root: Path, study_names: list[str], budget: str) -> list[grid.Cell]:
    cells = []
    runs = root / grid.runs_dir(budget)
    for study in study_names:
        for seed_dir in sorted((runs / study).glob("*/*/frac*/seed*")):
            corpus, model, frac, seed = seed_dir.relative_to(runs / study).parts
            if frac[4:].isdigit() and seed[4:].isdigit():
                cells.append(grid.Cell(study, corpus, model, int(frac[4:]), int(seed[4:]), budget))
    return cells


def process_gone(record: dict, now: float) -> str | None:
    """Why a cell whose progress.json says running has no live training process (None while it has one)."""
    try:
        age = now - datetime.fromisoformat(record["updated_at"]).timestamp()
    except (KeyError, TypeError, ValueError):
        age = math.inf
    if age > STALE_SECONDS:
        why = f"progress.json not rewritten for {wall_time(age)}" if math.isfinite(age) else "no heartbeat"
    elif record.get("host") == socket.gethostname() and isinstance(record.get("pid"), int) \
            and not progress_file.process_exists(record["pid"]):
        why = f"its process (pid {record['pid']}) is gone"
    else:
        return None
    return f"no training process ({why}): killed (SIGKILL, out of memory, a lost node) or ended with its Snakemake"


def whereabouts(record: dict) -> str:
    """Where a running cell is: epoch, batch, what it does, the time left."""
    parts = [f"epoch {record.get('epoch')}/{record.get('epochs')}"]
    if record.get("batches_per_epoch"):
        parts.append(f"batch {record.get('batch')}/{record['batches_per_epoch']}")
    if record.get("phase") and record["phase"] != "training":
        parts.append(record["phase"])
    if record.get("eta_seconds") is not None:
        parts.append(f"about {wall_time(record['eta_seconds'])} left")
    return ", ".join(parts)


def cell_status(root: Path, cell: grid.Cell, dataset: str, now: float | None = None) -> CellStatus:
    run_dir = root / cell.run_dir
    row = CellStatus(cell.study, dataset, cell.corpus, cell.model, cell.fraction, cell.seed, "pending")
    metrics_file = run_dir / "metrics.json"
    if metrics_file.exists():
        try:
            m = read_metrics(metrics_file)
            check_weights(run_dir / "model.pt")
        except DamagedRunFile as e:  # flagged, and the other cells still listed
            row.state, row.note = "failed", str(e).removeprefix(f"run folder {metrics_file.parent}: ")
            return row
        row.state, row.dataset = "done", m.get("dataset", dataset)
        row.epochs, row.wall_seconds = m.get("epochs"), m.get("wall_seconds")
        row.val_loss = m.get("val_loss", m.get("val_cross_entropy"))
        row.val_ppl, row.test_ppl, row.test_accuracy = m.get("val_ppl"), m.get("test_ppl"), m.get("test_accuracy")
        return row
    checkpoint = run_dir / "checkpoint" / "last.pt"
    try:
        record = progress_file.read(run_dir)
    except progress_file.DamagedProgressFile as e:
        row.state, row.note = "failed", str(e)
        return row
    if record is None:
        if checkpoint.exists():
            row.state, row.note = "interrupted", "no progress.json (its trainer was an earlier version)"
    else:
        row.epochs, row.wall_seconds = record.get("epochs_done"), record.get("seconds")
        row.val_loss, row.val_ppl = record.get("best_val_loss"), record.get("best_val_ppl")
        row.state = record["state"]
        if row.state == "running":
            gone = process_gone(record, time.time() if now is None else now)
            row.state, row.note = ("interrupted", gone) if gone else ("running", whereabouts(record))
        elif row.state == "failed":
            row.note = record.get("error", "")
        elif row.state == "interrupted":
            row.note = f"stopped by {record.get('stopped_by', 'a signal')}"
        else:  # done, but metrics.json has gone since (deleted, or Snakemake is about to rerun the cell)
            row.state, row.note = "interrupted", "its training ended, but metrics.json is missing"
    if row.state in ("failed", "interrupted") and checkpoint.exists():
        row.note = f"{row.note} (a rerun resumes from {checkpoint.relative_to(root)})"
    return row


def collect(root: Path, study_filter: list[str] | None = None, budget: str | None = None,
            artifact: str | None = None) -> list[CellStatus]:
    config_file = root / "config" / "config.yaml"
    if not config_file.exists():
        raise ConfigError(f"{config_file} not found: run `python -m rnnrepro.status` in the repository root")
    config = yaml.safe_load(config_file.read_text())
    if budget:
        config["budget"] = budget
    config = load_run_config(config, str(config_file))
    if artifact:  # `pru_table1`: the study is the part before the first underscore
        study_filter = [artifact.split("_", 1)[0]]
    names = study_filter or config["studies"]
    unknown = [s for s in names if not (root / "config" / "studies" / f"{s}.yaml").exists()]
    if unknown:
        known = sorted(p.stem for p in (root / "config" / "studies").glob("*.yaml"))
        raise ConfigError(f"--study {', '.join(unknown)}: no such study; the studies are {', '.join(known)}")
    studies = {name: load_study(name, root=root) for name in names}
    if artifact:
        study = studies[names[0]]
        name = artifact.split("_", 1)[-1]
        if name not in study["artifacts"]:
            raise ConfigError(f"--artifact {artifact}: study {names[0]!r} has no artifact {name!r}; its artifacts are "
                              f"{', '.join(f'{names[0]}_{a}' for a in study['artifacts'])}")
        cells = grid.artifact_cells(study, config, name)
    else:
        cells = list(dict.fromkeys(grid_cells(config, studies) + cells_on_disk(root, names, config["budget"])))
    now = time.time()
    rows = [cell_status(root, cell, grid.dataset_for(studies[cell.study], config, cell.corpus), now)
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
    counts = {state: sum(r.state == state for r in rows) for state in STATES}
    summary = f"{len(rows)} cells: " + ", ".join(f"{n} {state}" for state, n in counts.items())
    # the note (an error line) is wrapped, never cut
    widths = [NOTE_WIDTH if key == "note" else None for key in (records[0] if records else {})]
    return (tabulate(records, headers="keys", floatfmt=".4g", missingval="", maxcolwidths=widths or None)
            + "\n" + summary + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnrepro.status", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", action="append", help="only this study (repeatable); default: config's studies")
    parser.add_argument("--budget", help="whose grid to list (paper, reduced, cpu, smoke); default: config/config.yaml's")
    parser.add_argument("--artifact", help="only the cells of this artifact, named as its table (e.g. pru_table1)")
    parser.add_argument("--format", choices=["table", "csv"], default="table")
    args = parser.parse_args(argv)
    try:
        check_checkout()
        rows = collect(Path.cwd(), args.study, args.budget, args.artifact)
    except ConfigError as e:
        print(f"[rnnrepro] error: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(render(rows, args.format))
    return 0


if __name__ == "__main__":
    sys.exit(console.run_command(main))
