"""The grid at a glance: ``python -m rnnrepro.status [--study S] [--budget B] [--format table|csv]``;
``--watch [SECONDS]``: only the cells being trained now, with their epoch, loss and ETAs, refreshed on
the console (rnnrepro.watch).

One row per training cell (like DVC's ``exp show``): its parameters, its state and its numbers,
joined from the files of its run folder (``results/runs/`` for the default budget, paper;
``results/<budget>/runs/`` for every other one): ``metrics.json`` (written last, when the cell is done)
and ``progress.json`` (kept current by the trainer as it runs, rnnrepro.train.progress_file).
Run it in the repository root, during or after a run, locally or on SLURM: it reads files only.
The cells are those of the budget's grid plus any run folder found; with ``--configfile FILE`` (cells of
your own, docs/custom_cells.md) their training cells too, pending ones included, and after the table, for
each, how many will train and about how long (rnnrepro.estimates). Without ``--budget``: every budget
that has results here, each under a heading (the CSV has a ``budget`` column); where none has, the
grid of config/config.yaml's budget, saying so.

States:
  done         metrics.json is written (and reads as a cell's metrics)
  stale        done, but with another config than the study file gives the cell now (a recipe, a width
               or a cell option changed since): no table reads it, and a rerun trains it again
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
import difflib
import io
import os
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from tabulate import tabulate

from . import console, grid
from .analysis.run_files import DamagedRunFile, check_weights, read_metrics, stale_problem
from .configuration import ConfigError, budgets, check_budget, check_checkout, load_config_file, load_run_config, load_yaml
from .custom_cell_checks import check_custom_cells
from .record_checks import record_problem
from .progress_reading import STALE_SECONDS, WATCH_SECONDS, process_gone, progress_problem, wall_time  # noqa: F401
from .train import progress_file

STATES = ("done", "stale", "running", "failed", "interrupted", "pending")
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
    budget: str = ""


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


def cell_status(root: Path, cell: grid.Cell, dataset: str, now: float | None = None,
                study: dict | None = None) -> CellStatus:
    """One cell's row; with its ``study``, a finished cell whose config.json is not what the study file
    makes of it now is ``stale``, not done."""
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
        stale = study is not None and (run_dir / "config.json").exists() and stale_problem(metrics_file, study)
        if stale:
            row.state, row.note = "stale", stale.removeprefix(f"{run_dir}: ")
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
    problem = record and progress_problem(record)
    if problem:
        row.state, row.note = "failed", (f"{progress_file.NAME} is damaged ({problem}): the cell's state is unknown. "
                                         f"Rerun its target: training resumes from its checkpoint and writes the "
                                         f"file anew")
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


def run_config(root: Path, budget: str | None = None, custom_file: Path | None = None) -> tuple[dict, str]:
    """config/config.yaml (with ``custom_file``'s keys over it, as snakemake --configfile merges them) with
    ``budget`` in place of its own (checked first: an unknown one is named as the command line's), and the
    config file's name."""
    config_file = root / "config" / "config.yaml"
    if not config_file.exists():
        raise ConfigError(f"{config_file} not found: run `python -m rnnrepro.status` in the repository root")
    if budget:
        check_budget(budget)
    config = {**load_yaml(config_file), **(load_config_file(custom_file) if custom_file else {})}
    if budget:
        config["budget"] = budget
    return load_run_config(config, str(config_file)), str(config_file.relative_to(root))


def artifact_named(name: str, studies: dict) -> tuple[str, str]:
    """(study, artifact) of an artifact named ``<study>_<artifact>`` (or by one of its tables); an
    unknown name is an error naming the nearest ones."""
    known = {f"{study}_{artifact}": (study, artifact) for study, spec in studies.items() for artifact in spec["artifacts"]}
    tables = {table: (study, artifact) for study, spec in studies.items()
              for artifact, definition in spec["artifacts"].items() for table in definition["tables"]}
    if name in known or name in tables:
        return known.get(name) or tables[name]
    near = difflib.get_close_matches(name, sorted(known), n=3)
    raise ConfigError(f"--artifact {name}: no such artifact{'; the nearest: ' + ', '.join(near) if near else ''} "
                      f"(artifacts are named <study>_<artifact>; those of {', '.join(studies)}: "
                      f"{', '.join(sorted(known))})")


def load_studies(root: Path, names: list[str], config: dict, custom_file: Path | None) -> dict:
    """The studies, with the cells of your own that ``custom_file`` adds (checked as the workflow checks
    them); without it, those a running workflow exported."""
    if custom_file is None:
        return {name: grid.load_study(name, root=root) for name in names}
    if config["custom_cells"]:  # checked against every study it names, whichever --study shows
        check_custom_cells(config["custom_cells"], {name: grid.load_study(name, root=root, custom_cells={})
                                                    for name in config["studies"]}, str(custom_file))
    return {name: grid.load_study(name, root=root, custom_cells=config["custom_cells"], custom_source=str(custom_file))
            for name in names}


def collect(root: Path, study_filter: list[str] | None = None, budget: str | None = None,
            artifact: str | None = None, custom_file: Path | None = None) -> list[CellStatus]:
    config, _ = run_config(root, budget, custom_file)
    names = study_filter or config["studies"]
    unknown = [s for s in names if not (root / "config" / "studies" / f"{s}.yaml").exists()]
    if unknown:
        known = sorted(p.stem for p in (root / "config" / "studies").glob("*.yaml"))
        raise ConfigError(f"--study {', '.join(unknown)}: no such study; the studies are {', '.join(known)}")
    studies = load_studies(root, names, config, custom_file)
    if artifact:
        study_name, name = artifact_named(artifact, studies)
        studies = {study_name: studies[study_name]}
        if config["budget"] not in studies[study_name]["budgets"]:
            raise ConfigError(f"--artifact {artifact}: study {study_name} has no budget {config['budget']} (its "
                              f"budgets: {', '.join(studies[study_name]['budgets'])}; config/studies/{study_name}.yaml)")
        cells = grid.artifact_cells(studies[study_name], config, name)
    else:
        cells = list(dict.fromkeys(grid_cells(config, studies) + cells_on_disk(root, names, config["budget"])))
    now = time.time()
    rows = [cell_status(root, cell, grid.dataset_for(studies[cell.study], config, cell.corpus), now,
                        studies[cell.study]) for cell in cells]
    for row in rows:
        row.budget = config["budget"]
    return sorted(rows, key=lambda r: (r.study, r.dataset, r.corpus, r.model, r.fraction, r.seed))


def training_estimates(root: Path, rows: list[CellStatus], budget: str, study_filter: list[str] | None,
                       custom_file: Path) -> list[str]:
    """For each cell of your own, how many of its training cells are not done and about how long they take
    (rnnrepro.estimates, from its baseline's records)."""
    from .estimates import estimates

    config, _ = run_config(root, budget, custom_file)
    studies = load_studies(root, study_filter or config["studies"], config, custom_file)
    # what is not done here and has no current record to restore trains (workflow/rules/records.smk)
    cells = [grid.Cell(r.study, r.corpus, r.model, r.fraction, r.seed, budget) for r in rows if r.state != "done"]
    to_train = [cell for cell in cells if cell.study in studies
                and record_problem(studies[cell.study], config, cell, root / "records")]
    return [estimate.line() for estimate in estimates(studies, config, to_train, root / "records")]


CSV_FIELDS = ["budget"] + [f.name for f in fields(CellStatus) if f.name != "budget"]


def render(rows: list[CellStatus], fmt: str, header: bool = True) -> str:
    records = [asdict(r) for r in rows]
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=CSV_FIELDS)
        if header:
            writer.writeheader()
        writer.writerows(records)
        return out.getvalue()
    records = [{("wall_time" if k == "wall_seconds" else k): (wall_time(v) if k == "wall_seconds" else v)
                for k, v in record.items() if k != "budget"} for record in records]
    counts = {state: sum(r.state == state for r in rows) for state in STATES}
    summary = f"{len(rows)} cells: " + ", ".join(f"{n} {state}" for state, n in counts.items()
                                                 if n or state != "stale")  # stale: only where there are some
    # the note (an error line) is wrapped, never cut
    widths = [NOTE_WIDTH if key == "note" else None for key in (records[0] if records else {})]
    return (tabulate(records, headers="keys", floatfmt=".4g", missingval="", maxcolwidths=widths or None)
            + "\n" + summary + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnrepro.status", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", action="append", help="only this study (repeatable); default: config's studies")
    parser.add_argument("--budget", help=f"whose grid to list ({', '.join(budgets())}); default: every budget "
                                          "with results here, else config/config.yaml's")
    parser.add_argument("--artifact", help="only the cells of this artifact, named <study>_<artifact> as its table "
                                           "(e.g. pru_table1)")
    parser.add_argument("--format", choices=["table", "csv"], default="table")
    parser.add_argument("--configfile", type=Path, metavar="FILE",
                        help="a config file of cells of your own (custom_cells, docs/custom_cells.md), merged over "
                             "config/config.yaml: their training cells are listed, pending ones too, with how many "
                             "will train and about how long they take, e.g. examples/mgu.yaml")
    parser.add_argument("--watch", nargs="?", type=float, const=WATCH_SECONDS, metavar="SECONDS",
                        help="only the cells being trained now, with epoch, loss and ETAs, refreshed every SECONDS "
                             f"(default {WATCH_SECONDS:g}) until Ctrl-C (rnnrepro.watch)")
    args = parser.parse_args(argv)
    root = Path.cwd()
    if args.watch is not None:
        if args.watch <= 0:
            parser.error(f"--watch {args.watch:g}: the seconds between refreshes must be more than 0")
        from .watch import watch

        return watch(root, args.watch, [args.budget] if args.budget else None, args.study)
    try:
        check_checkout()
        shown = [args.budget] if args.budget else grid.budgets_with_results(root)
        none_here = not shown
        if none_here:
            config, source = run_config(root, custom_file=args.configfile)
            shown = [config["budget"]]
        tables = [(budget, collect(root, args.study, budget, args.artifact, args.configfile)) for budget in shown]
        said = {budget: training_estimates(root, rows, budget, args.study, args.configfile)
                for budget, rows in tables} if args.configfile else {}
    except ConfigError as e:
        print(f"[rnnrepro] error: {e}", file=sys.stderr)
        return 1
    for line in grid.earlier_layout():
        print(f"[rnnrepro] warning: {line}", file=sys.stderr)
    if none_here:
        print(f"[rnnrepro] no budget has results here yet: the grid of budget {shown[0]} ({source}); --budget B "
              f"shows another ({', '.join(budgets())})", file=sys.stderr)
    try:
        for position, (budget, rows) in enumerate(tables):
            if args.format == "table" and not args.budget:
                print(f"{chr(10) if position else ''}budget {budget} ({grid.runs_dir(budget)}/):")
            sys.stdout.write(render(rows, args.format, header=position == 0))
            for line in said.get(budget, []):  # beside a CSV, on stderr: the CSV stays a table
                print(line, file=sys.stdout if args.format == "table" else sys.stderr)
        sys.stdout.flush()
    except BrokenPipeError:  # its reader stopped early (`| head`): what it read is all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(console.run_command(main))
