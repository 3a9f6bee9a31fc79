"""The grid at a glance: ``python -m rnnrepro.status [--study S] [--budget B] [--format table|csv]``.

One row per training cell (like DVC's ``exp show``): its parameters, its state and its numbers,
joined from the budget's run folders (``results/runs/`` for smoke, ``results/<budget>/runs/`` for the
others) and its training logs (``logs/train/``, ``logs/<budget>/train/``).
Run it in the repository root, during or after a run (locally or on SLURM: it reads files only).
The cells are those of the budget's grid (config/config.yaml, or --budget) plus any run folder found.

States:
  done         metrics.json is written (and reads as a cell's metrics)
  running      a live process trains the cell: on this machine, a process whose command line names the
               run folder or that holds the cell's GPU lock; with jobs on other machines (SLURM), while a
               Snakemake runs in this folder, the cell's log or checkpoint changed in the last 10 minutes
  failed       the log ends in an error (the note is the error line itself), or metrics.json or model.pt
               is damaged (the note says how; the file is skipped)
  interrupted  the training process is gone without an error: stopped (SIGTERM, time limit, Ctrl-C) or
               killed (SIGKILL, out of memory, a lost node); a rerun resumes from the checkpoint
  pending      nothing yet
Numbers of finished cells come from metrics.json (language models: the best checkpoint's validation
loss and perplexity); those of unfinished cells from the log of their last attempt (the best
validation so far, the epochs or iterations done, the training seconds).
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import yaml
from tabulate import tabulate

from . import grid
from .analysis.run_files import DamagedRunFile, check_weights, read_metrics
from .configuration import ConfigError, load_run_config, load_study
from .gpus import DEFAULT_LOCK_DIR, held_leases

# A log or checkpoint written this recently belongs to a live job: training logs progress at least
# every 30 s and checkpoints every epoch; the final evaluation of a paper-size model takes minutes.
RECENT_SECONDS = 600
# What the trainers log (rnnrepro.train): language models per epoch, autocomplete per validation.
EPOCH_LINE = re.compile(r"\[rnnrepro\] epoch (\d+): .*val ppl ([0-9.]+|inf|nan), ([0-9.]+)s")
ITERATION_LINE = re.compile(r"\[rnnrepro\] (iteration \d+/\d+): val loss ([0-9.]+|inf|nan), .*, ([0-9.]+)s")
RESUME_LINE = re.compile(r"\[rnnrepro\] resuming from .*\bepoch (\d+)")
# How a training process reports its end without metrics: an error or a crash, or a stop.
ERROR = re.compile(r"\[rnnrepro\] error:|^Traceback \(most recent call last\)")
STOPPED = re.compile(r"stopped by SIGTERM|^KeyboardInterrupt")
# A Python exception line (the end of a traceback): `ValueError: ...`, `KeyboardInterrupt`.
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(: |$)")
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


def log_path(cell: grid.Cell) -> Path:
    return Path(grid.logs_dir(cell.budget), "train", f"{cell.key}.log")


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


def live_run_dirs(root: Path) -> set[Path]:
    """Run folders of training processes that hold a GPU lock on this machine."""
    live = set()
    for holder in held_leases(DEFAULT_LOCK_DIR).values():
        argv = holder.get("argv", [])
        if "--run-dir" in argv[:-1]:
            live.add((Path(holder.get("cwd", root)) / argv[argv.index("--run-dir") + 1]).resolve())
    return live


def training_processes(root: Path) -> set[Path] | None:
    """Run folders of this project's training processes alive on this machine (None without /proc)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    found = set()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = [arg.decode(errors="replace") for arg in (entry / "cmdline").read_bytes().split(b"\0") if arg]
            if "rnnrepro.train" not in argv or "--run-dir" not in argv[:-1]:
                continue
            run_dir = (Path(os.readlink(entry / "cwd")) / argv[argv.index("--run-dir") + 1]).resolve()
        except OSError:  # ended meanwhile, or another user's
            continue
        if run_dir.is_relative_to((root / grid.RESULTS).resolve()):
            found.add(run_dir)
    return found


def snakemake_running(root: Path) -> bool:
    """Whether a Snakemake holds its lock in this folder (it removes the lock when it exits)."""
    return any((root / ".snakemake" / "locks").glob("*.lock"))


def _exception_line(raw_lines: list[str]) -> str | None:
    """The exception line of the log's last traceback (the first unindented line after its header)."""
    starts = [i for i, line in enumerate(raw_lines) if line.startswith("Traceback (most recent call last)")]
    if not starts:
        return None
    after = raw_lines[starts[-1] + 1:]
    return next((line.strip() for line in after if EXCEPTION_LINE.match(line) and not line.startswith(" ")), None)


def read_log(path: Path) -> dict:
    """Progress of the last attempt (epochs, best validation loss, seconds) and how it ended."""
    if not path.exists():
        return {}
    # A progress bar redraws its line with \r and leaves no newline: what follows it shares its line.
    raw_lines = path.read_text(errors="replace").replace("\r", "\n").splitlines()
    lines = [line.strip() for line in raw_lines]
    lines = [line for line in lines if line]
    epochs = [m for m in map(EPOCH_LINE.search, lines) if m]
    iterations = [m for m in map(ITERATION_LINE.search, lines) if m]
    resumed = [int(m.group(1)) - 1 for m in map(RESUME_LINE.search, lines) if m]
    ppls = [float(m.group(2)) for m in epochs]
    losses = [math.log(ppl) for ppl in ppls if ppl > 0] + [float(m.group(2)) for m in iterations]
    end = next(((line, m) for line in reversed(lines) if (m := ERROR.search(line) or STOPPED.search(line))), None)
    ended, stopped = None, False
    if end:
        line, match = end
        start = line.rfind("[rnnrepro]", 0, match.start() + 1)
        ended = line[start if start >= 0 else match.start():]  # without the progress bar the line began with
        if ended.startswith("Traceback"):
            ended = _exception_line(raw_lines) or lines[-1]
        stopped = bool(STOPPED.search(ended))
    return {
        "epochs": max([int(m.group(1)) for m in epochs] + resumed, default=None),
        "val_loss": min(losses, default=None),
        "val_ppl": min(ppls, default=None),
        # epoch lines give each epoch's seconds, iteration lines the running total
        "seconds": round(sum(float(m.group(3)) for m in epochs) or
                         (float(iterations[-1].group(3)) if iterations else 0), 1) or None,
        "progress": iterations[-1].group(1) if iterations else "",
        "ended": ended,
        "stopped": stopped,
    }


def modified_recently(paths: list[Path], now: float) -> bool:
    return any(p.exists() and now - p.stat().st_mtime < RECENT_SECONDS for p in paths)


@dataclass
class Liveness:
    """What says whether a cell's training process is alive, read once per status call."""

    leased: set[Path]  # run folders whose process holds a GPU lock on this machine
    processes: set[Path] | None  # run folders of this project's training processes on this machine
    snakemake: bool  # a Snakemake runs in this folder
    now: float

    def alive(self, run_dir: Path, recent: bool) -> bool:
        run_dir = run_dir.resolve()
        if run_dir in self.leased or (self.processes is not None and run_dir in self.processes):
            return True
        if not recent:
            return False
        if self.processes is None:  # no process table to look in: trust a recent write
            return True
        # Jobs on other machines (SLURM) leave no process here: a recent write, while the Snakemake that
        # submitted them runs, is the only sign. With training processes of this project here, jobs run
        # locally, and this cell's process is gone.
        return self.snakemake and not self.processes


def liveness(root: Path) -> Liveness:
    return Liveness(live_run_dirs(root), training_processes(root), snakemake_running(root), time.time())


def cell_status(root: Path, cell: grid.Cell, dataset: str, live: Liveness) -> CellStatus:
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
    log = read_log(root / log_path(cell))
    checkpoint = run_dir / "checkpoint" / "last.pt"
    row.epochs, row.val_loss, row.val_ppl = log.get("epochs"), log.get("val_loss"), log.get("val_ppl")
    row.wall_seconds, row.note = log.get("seconds"), log.get("progress", "")
    recent = not log.get("ended") and modified_recently([root / log_path(cell), checkpoint], live.now)
    if live.alive(run_dir, recent):
        row.state = "running"
    elif log.get("ended") and not log["stopped"]:
        row.state, row.note = "failed", log["ended"]
    elif log or checkpoint.exists():
        row.state = "interrupted"
        row.note = log.get("ended") or ("no training process, and no error in its log: killed (SIGKILL, out of "
                                        "memory, a lost node) or ended with its Snakemake")
    if row.state in ("failed", "interrupted") and checkpoint.exists():
        row.note = f"{row.note} (a rerun resumes from {checkpoint.relative_to(root)})"
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
    cells = list(dict.fromkeys(grid_cells(config, studies) + cells_on_disk(root, names, config["budget"])))
    live = liveness(root)
    rows = [cell_status(root, cell, grid.dataset_for(studies[cell.study], config, cell.corpus), live)
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
