"""Recorded runs: the small files of real-data runs, kept in the repository, grown one cell at a time,
and rendered into every table, figure and the claims scorecard on any machine without retraining.

    python -m rnnrepro.records grow --budget cpu --minutes 120 --config data_mirror=DIR [--commit]
    python -m rnnrepro.records list --budget cpu          # recorded, stale, damaged and missing units
    python -m rnnrepro.records render --budget cpu        # records/cpu -> results/cpu/tables, figures, index.html
    python -m rnnrepro.records pack --budget cpu          # results/cpu/runs -> records/cpu/runs

Layout: ``records/<budget>/`` mirrors the budget's results tree (``results/<budget>/``, rnnrepro.grid):
``runs/<study>/<corpus>/<model>/frac<f>/seed<s>/`` holds a cell's ``config.json``, ``history.csv`` and
``metrics.json`` plus the JSON outputs of its evaluations (``dynamic_eval.json``, ...), and
``speed/<study>.json`` a study's speed benchmark. Never weights, checkpoints or data. Each
``metrics.json`` carries the machine (CPU model, cores, threads, GPU, load average), the torch version,
the git sha, the precision and the wall time of the run.

A record is *stale* when its ``config.json`` is not what the study file now resolves for that cell (a
recipe, a width or a cell option changed since it was trained): ``render`` does not use it and ``grow``
trains the cell again.

``grow`` splits the budget's grid into units of work (``--unit`` patterns keep some of them): a training
cell with the cells it is finetuned from and every evaluation output the budget's artifacts read from
it, or one study's speed benchmark. It takes them study by study (as the run config lists them), each
study's learning-rate tuning cells first (rnnrepro.tuning), then its cells seed by seed, so that a grow
cut short leaves whole comparisons at fewer seeds; a unit whose tuning cells are not recorded waits for
them. It skips recorded units, prepares the data of the rest (one Snakemake run), then ``--jobs``
workers each run one unit at a time through Snakemake (disjoint targets, so side by side with
``--nolock``) and pack it into ``records/`` the moment it finishes (with ``--commit``, one git commit per
unit, of exactly the files packed: rnnrepro.record_commits). No unit starts after the deadline (``--minutes``); at the deadline, or when ``grow``
itself gets SIGTERM or Ctrl-C, running units get SIGTERM: training writes its resume checkpoint, a later
``grow`` on this machine resumes it, on another machine it starts afresh. Killing ``grow`` at any point
(even with SIGKILL) loses no recorded unit.

One grow of a budget runs at a time in a working tree (a lock in its log folder), and each unit's
Snakemake runs in a process group of its own that gets SIGTERM when grow dies, even by SIGKILL
(rnnrepro.process_group): no trainer outlives the grow that started it, and none is left for the next
grow to clash with. A unit whose cell another process trains (rnnrepro.train.progress_file) is skipped,
saying so.

``render`` copies a budget's records into its results tree and runs each artifact's notebook through
papermill with exactly the parameters the Snakemake rule gives it (rnnrepro.analysis.run_notebook), then
the scorecard notebook, then writes the budget's results page (rnnrepro.results_page). It runs notebooks
directly rather than Snakemake: records have no data and no weights, and Snakemake would plan to
download, preprocess and retrain what a record's inputs lack. An artifact is rendered when every cell of
its grid at that budget is recorded and current, with every evaluation output and speed result it reads;
otherwise the scorecard gives the reason. Artifacts that need a cell's weights (``model.pt``) cannot be
rendered from records. Files an earlier render restored are listed in ``<results tree>/.records.json`` (written
atomically) so the next render refreshes them, and removes those whose record is gone; a file that differs
from its record and was not restored by a render (a run of this machine) is never overwritten. The tables and
figures of an artifact not rendered now (its records missing, damaged or stale, or its notebook failed) are
removed, so that the results page says why they are missing rather than show what older records made.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import fnmatch
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import console, grid, layout, record_commits
from .record_checks import RECORDED, check_pairing, damage as _damage, evaluation_outputs, record_problem
from .analysis.claims import is_synthetic
from .artifact_inputs import write_inputs_list
from .analysis.claims import outputs as claims_outputs
from .analysis.run_files import RESTORED_MANIFEST
from .configuration import (ConfigError, check_budget, check_checkout, load_config_file, load_run_config, load_study,
                            load_yaml)
from .custom_cell_checks import check_custom_cells
from .custom_cells import export as export_custom_cells
from .evaluation.plan import artifact_evaluation_files
from .runtime import GIT_SHA_ENV
from .train import progress_file
from .train.files import write_text_atomic
from . import tuning

RECORDS = Path("records")
MANIFEST = RESTORED_MANIFEST  # files a render restored, with their digests


def record_dir(records: Path, budget: str) -> Path:
    return records / budget


def results_dir(budget: str) -> Path:
    return Path(grid.results_dir(budget))


# ---------------------------------------------------------------- packing

def pack_run(run_dir: Path, budget: str, records: Path = RECORDS) -> Path:
    """Copy one finished run folder's small files into ``records/<budget>/runs/``; returns the record.

    A run made from a working tree with uncommitted changes (its ``git_sha`` ends in ``-dirty``) is
    refused: no commit holds the code that made it."""
    missing = [name for name in RECORDED if not (run_dir / name).exists()]
    if missing:
        raise FileNotFoundError(f"run folder {run_dir} has no {', '.join(missing)}: rerun that cell before "
                                f"recording it")
    sha = str(json.loads((run_dir / "metrics.json").read_text()).get("git_sha", ""))
    if sha.endswith("-dirty"):
        raise RuntimeError(f"{run_dir} was trained from a working tree with uncommitted changes (git_sha {sha}): "
                           f"no commit holds the code that made it, so it is not recorded; commit, then train "
                           f"it again (delete its metrics.json, or `records grow` from a clean checkout)")
    check_pairing(run_dir)
    target = record_of_run(run_dir, budget, records)
    target.mkdir(parents=True, exist_ok=True)
    sources = [run_dir / name for name in RECORDED] + evaluation_outputs(run_dir)
    for source in sources:
        shutil.copy2(source, target / source.name)
    for earlier in evaluation_outputs(target):  # an earlier model's evaluation, which this run has not
        if earlier.name not in {source.name for source in sources}:
            earlier.unlink()
    return target


def record_of_run(run_dir: Path, budget: str, records: Path = RECORDS) -> Path:
    return record_dir(records, budget) / Path(run_dir).relative_to(results_dir(budget))


def packed_files(run_dir: Path, budget: str, records: Path = RECORDS) -> list[Path]:
    """The files :func:`pack_run` writes for ``run_dir``."""
    target = record_of_run(run_dir, budget, records)
    return [target / name for name in RECORDED] + [target / p.name for p in evaluation_outputs(Path(run_dir))]


def pack_speed(speed_file: Path, budget: str, records: Path = RECORDS) -> Path:
    target = record_dir(records, budget) / "speed" / speed_file.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(speed_file, target)
    return target


def pack(budget: str | None = None, records: Path = RECORDS, include_synthetic: bool = False) -> list[Path]:
    """Copy the small files of every finished run of ``budget`` (default: every budget with a results
    tree here) into ``records/<budget>/``, and its speed results.

    Runs on synthetic corpora (the smoke budget) are left out unless ``include_synthetic``: records
    exist to render the papers' tables from real data. Returns the records written.
    """
    packed = []
    for name in [budget] if budget else grid.budgets_with_results():
        tree = results_dir(name)
        # runs/, and runs-bf16/ of the cells of another precision (rnnrepro.grid.runs_dir)
        for metrics_file in sorted(tree.glob("runs*/*/*/*/frac*/seed*/metrics.json")):
            metrics = json.loads(metrics_file.read_text())
            if is_synthetic(metrics["corpus"]) and not include_synthetic:
                continue
            packed.append(pack_run(metrics_file.parent, name, records))
        if name == grid.SMOKE and not include_synthetic:
            continue
        packed += [pack_speed(path, name, records) for path in sorted((tree / "speed").glob("*.json"))]
    return packed


# ---------------------------------------------------------------- what is recorded

@dataclasses.dataclass
class Unit:
    """One piece of ``grow``'s work: Snakemake targets, and the records they make."""
    name: str
    study: str
    cells: list[grid.Cell]          # training cells, parents first
    targets: list[str]              # what Snakemake builds (results paths)
    evaluations: list[str]          # evaluation outputs among the targets
    speed: str | None = None        # results/<budget>/speed/<study>.json of a speed unit
    needs: list[str] = dataclasses.field(default_factory=list)  # units recorded first: its tuning cells'

    def problems(self, studies: dict, config: dict, records: Path) -> list[str]:
        """Why this unit is not (fully) recorded; empty when it is."""
        study = studies[self.study]
        out = [p for p in (record_problem(study, config, cell, records) for cell in self.cells) if p]
        root = results_dir(config["budget"])
        for path in self.evaluations + ([self.speed] if self.speed else []):
            if not (record_dir(records, config["budget"]) / Path(path).relative_to(root)).exists():
                out.append(f"{Path(path).relative_to(root)}: not recorded")
        return out


def record_of(cell: grid.Cell, records: Path = RECORDS) -> Path:
    """The folder that records a cell (it may not exist)."""
    return record_dir(records, cell.budget) / "runs" / cell.key


class Restorer:
    """Which cells' records stand in for training them in a Snakemake run (workflow/rules/records.smk):
    a cell is restored from ``records/<budget>/`` when its whole unit is recorded and current (its
    record, the records of the cells it is finetuned from, and every evaluation output the budget's
    artifacts read from it: :meth:`Unit.problems`), this machine has not trained it (no ``model.pt`` in
    its run folder: a run of this machine is never replaced), and the run needs none of its weights
    (``weights_needed``: the cells of the targeted artifacts that read ``model.pt``, which records do
    not keep). Otherwise the cell trains, as it would without records."""

    def __init__(self, studies: dict, config: dict, weights_needed: set[grid.Cell] = frozenset(),
                 records: Path = RECORDS):
        self.studies, self.config, self.records = studies, config, records
        self.weights_needed = set(weights_needed)
        self.unit_of = {cell: unit for unit in units(studies, config) for cell in unit.cells}
        self._problems: dict[str, list[str]] = {}

    def problem(self, cell: grid.Cell) -> str | None:
        """Why the cell is trained rather than restored, or None when its record stands in for it."""
        if Path(cell.run_dir, "model.pt").exists():
            return f"{cell.key}: trained on this machine ({cell.run_dir}/model.pt)"
        unit = self.unit_of.get(cell)
        if unit is None:  # a run folder asked for by path, outside the budget's artifacts
            return record_problem(self.studies[cell.study], self.config, cell, self.records)
        needed = [c for c in unit.cells if c in self.weights_needed]
        if needed:
            return f"{cell.key}: the run needs the weights of {needed[0].key}, which records do not keep"
        if unit.name not in self._problems:
            self._problems[unit.name] = unit.problems(self.studies, self.config, self.records)
        found = self._problems[unit.name]
        if not found:
            return None
        return found[0] if found[0].startswith(cell.key) else f"{cell.key}: {found[0]}"


def _chain(study: dict, cell: grid.Cell) -> list[grid.Cell]:
    """The cell and the cells it is finetuned from, parents first."""
    chain = [cell]
    while (parent := grid.parent_cell(study, chain[0])) is not None:
        chain.insert(0, parent)
    return chain


def units(studies: dict, config: dict) -> list[Unit]:
    """The budget's grid as units of work, in the study files' order; cells shared by two chains (a
    parent finetuned twice) make one unit, so units never share a target."""
    found: list[Unit] = []
    for name, study in studies.items():
        evaluations: dict[grid.Cell, set[str]] = {}
        order: list[grid.Cell] = []
        for artifact in grid.artifacts(study, config):
            spec = study["artifacts"][artifact]
            for cell in grid.artifact_cells(study, config, artifact):
                order.append(cell)
                evaluations.setdefault(cell, set()).update(spec.get("evaluations", []))
        for cell in dict.fromkeys(order):
            chain = _chain(study, cell)
            evals = [f"{cell.run_dir}/{e}.json" for e in sorted(evaluations[cell])]
            owner = next((u for u in found if u.study == name and set(u.cells) & set(chain)), None)
            if owner is None:
                needs = [variant.key for variant in grid.tuning_cells_of(study, config, chain[0])]
                found.append(Unit(cell.key, name, chain, [f"{c.run_dir}/metrics.json" for c in chain] + evals, evals,
                                  needs=needs))
                continue
            new = [c for c in chain if c not in owner.cells]
            owner.cells += new
            owner.targets += [f"{c.run_dir}/metrics.json" for c in new] + evals
            owner.evaluations += evals
        if any(study["artifacts"][a].get("speed") for a in grid.artifacts(study, config)):
            path = f"{grid.results_dir(config['budget'])}/speed/{name}.json"
            found.append(Unit(f"{name}/speed", name, [], [path], [], speed=path))
    return found


def _load(budget: str, config_file: Path, study_names: list[str] | None = None,
          settings: dict | None = None, custom_file: Path | None = None) -> tuple[dict, dict]:
    """The run config (``config_file``, then ``custom_file``'s keys, with ``budget`` and the command line's
    ``settings`` over it) and its studies that define the budget, with the cells of your own that
    ``custom_file`` adds (exported, so the notebooks run here see them too)."""
    check_budget(budget)
    source = " merged with ".join(map(str, filter(None, [config_file, custom_file])))
    config = load_run_config({**load_config_file(config_file), **(load_config_file(custom_file) if custom_file else {}),
                              **(settings or {}), "budget": budget}, source=source, command_line=settings)
    names = study_names or config["studies"]
    unknown = [n for n in names if n not in config["studies"]]
    if unknown:
        raise ConfigError(f"--study {', '.join(unknown)}: not a study of {config_file} "
                          f"({', '.join(config['studies'])})")
    studies = {name: load_study(name, custom_cells={}) for name in names}
    custom = config["custom_cells"]
    if custom:
        check_custom_cells(custom, studies, str(custom_file or config_file))
        studies = {name: load_study(name, custom_cells=custom, custom_source=str(custom_file or config_file))
                   for name in names}
    export_custom_cells(custom, str(custom_file or config_file))
    return config, grid.studies_with_budget(studies, budget)


# ---------------------------------------------------------------- restoring and rendering

def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_manifest(path: Path) -> dict:
    """The files an earlier render restored, with their digests ({} before the first render)."""
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except IsADirectoryError:
        manifest = "is a folder"
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        manifest = f"is not valid JSON ({e})"
    if isinstance(manifest, dict) and all(isinstance(v, str) for v in manifest.values()):
        return manifest
    problem = manifest if isinstance(manifest, str) else "is not an object of file: digest"
    raise ValueError(f"{path} {problem}: it lists the files earlier renders restored here. Delete it and render "
                     f"again (a restored file that differs from its record is then named, to move away), or remove "
                     f"the whole results tree {path.parent} if nothing in it is a run of this machine")


def restore(records: Path, budget: str) -> list[Path]:
    """Copy one budget's records into its results tree; returns the metrics files now in place.

    A file there that differs from its record is replaced only if an earlier render put it there
    (it is listed, with its digest, in the tree's .records.json); any other is a run of this machine,
    and the error names it.
    """
    source = record_dir(records, budget)
    if not (source / "runs").is_dir() and not (source / "speed").is_dir():
        known = sorted(p.name for p in records.iterdir() if p.is_dir()) if records.is_dir() else []
        raise FileNotFoundError(f"no recorded runs for budget {budget!r}: {source} holds no runs/ or speed/ "
                                f"(recorded budgets: {', '.join(known) or 'none'})")
    results = results_dir(budget)
    manifest_file = results / MANIFEST
    manifest = read_manifest(manifest_file)
    placed = []
    # a damaged record is not restored (render names it; its notebooks and the scorecard never read it)
    damaged = {folder for folder in {p.parent for name in RECORDED for p in source.glob(f"runs*/**/{name}")}
               if _damage(folder)}
    for record in sorted(source.glob("**/*")):
        if not record.is_file() or record.parent in damaged:
            continue
        relative = str(record.relative_to(source))
        target = results / relative
        if target.exists() and _digest(target) != _digest(record):
            if manifest.get(relative) != _digest(target):
                raise FileExistsError(f"{target} differs from its record {record} and was not written by an "
                                      f"earlier render: move it away (it is a run of this machine) or delete "
                                      f"it, then render again")
        # a copy with a time of its own, once: Snakemake finds the restored files no older than their
        # records (workflow/rules/records.smk) and what was built from them newer still
        if not target.exists() or _digest(target) != _digest(record):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(record, target)
        manifest[relative] = _digest(target)
        if target.name == "metrics.json":
            placed.append(target)
    # a file an earlier render restored whose record is gone (deleted to retrain it, or dropped by a newer
    # pack) goes too, unless it changed since: a run folder never mixes one record's files with another's
    for relative, digest in sorted(manifest.items()):
        target = results / relative
        if not (source / relative).exists() or (source / relative).parent in damaged:
            if target.is_file() and _digest(target) == digest:
                target.unlink()
                if not any(target.parent.iterdir()):
                    target.parent.rmdir()
            if not target.exists():
                del manifest[relative]
    write_text_atomic(manifest_file, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return placed


def _outputs(study: dict, name: str, artifact: str, budget: str) -> tuple[list[str], list[str], str]:
    spec, root = study["artifacts"][artifact], grid.results_dir(budget)
    return ([f"{root}/tables/{t}.csv" for t in spec["tables"]],
            [f"{root}/figures/{f}.png" for f in spec["figures"]],
            f"{root}/notebooks/{name}_{artifact}.ipynb")


def _artifact_problem(study: dict, config: dict, artifact: str, records: Path) -> str | None:
    """Why an artifact cannot be rendered from this budget's records, or None."""
    cells = grid.artifact_cells(study, config, artifact)
    unusable = [p for p in (record_problem(study, config, c, records) for c in cells) if p]
    root = results_dir(config["budget"])
    files = artifact_evaluation_files(study, config, artifact)
    if study["artifacts"][artifact].get("speed"):
        files.append(f"{root}/speed/{study['study']}.json")
    unusable += [f"{Path(f).relative_to(root)}: not recorded" for f in files
                 if not (record_dir(records, config["budget"]) / Path(f).relative_to(root)).exists()]
    if not unusable:
        return None
    stale = sum("stale record" in p for p in unusable)
    what = f"{len(unusable)} of its {len(cells) + len(files)} records are missing or unusable"
    return f"{what}{f' ({stale} stale)' if stale else ''}, e.g. {unusable[0]}"


@dataclasses.dataclass
class Rendering:
    """One artifact of a render: the notebook to run and its parameters, or why it is not run."""
    key: str                        # <study>/<artifact>
    notebook: Path | None = None
    executed: Path | None = None
    parameters: dict | None = None
    tables: list[str] = dataclasses.field(default_factory=list)
    state: str = ""                 # "rendered", "not rendered: <why>", "not in ...", "failed: <error>"
    seconds: float = 0.0


def render_plan(budget: str, config: dict, studies: dict, records: Path) -> list[Rendering]:
    """Every artifact of the budget's studies: a notebook run where its records are all there and
    current, or the reason it is not rendered."""
    plan = []
    for name, study in studies.items():
        for artifact, spec in study["artifacts"].items():
            item = Rendering(f"{name}/{artifact}")
            plan.append(item)
            if artifact not in grid.artifacts(study, config):
                item.state = f"not in the {budget} budget (its `omit`)"
                continue
            out_tables, out_figures, notebook = _outputs(study, name, artifact, budget)
            item.tables = out_tables
            problem = _artifact_problem(study, config, artifact, records)
            if problem is not None:
                item.state = f"not rendered: {problem}"
                continue
            metrics = [f"{cell.run_dir}/metrics.json" for cell in grid.artifact_cells(study, config, artifact)]
            # what the tables are made from, as the workflow lists it: a rendered table stays up to date
            # for Snakemake until the grid changes (rnnrepro.artifact_inputs)
            write_inputs_list(study, config, artifact)
            item.notebook, item.executed = Path(spec["notebook"]), Path(notebook)
            item.parameters = {"study": name, "artifact": artifact,
                               "metrics_files": [str(Path(m).resolve()) for m in metrics],
                               "tables": [str(Path(t).resolve()) for t in out_tables],
                               "figures": [str(Path(f).resolve()) for f in out_figures]}
    return plan


WEIGHTS_NEEDED = "not rendered: it needs the cells' weights"
_WORKER_KERNEL = None  # a render worker's kernel, shared by the notebooks the worker runs


def _start_worker_kernel() -> None:
    """A render worker's start: one kernel for every notebook it runs (run_notebook.shared_kernel),
    shut down when the worker process ends."""
    from multiprocessing import util

    from .analysis.run_notebook import shared_kernel

    global _WORKER_KERNEL
    kernel = shared_kernel()
    _WORKER_KERNEL = kernel.__enter__()
    util.Finalize(None, kernel.__exit__, args=(None, None, None), exitpriority=10)


def _run_notebook(notebook: Path, executed: Path, parameters: dict) -> tuple[str, float]:
    """Run one artifact's notebook in the worker's kernel; returns its state and seconds."""
    from .analysis.run_notebook import run

    started = time.monotonic()
    for path in parameters["tables"] + parameters["figures"]:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    try:
        run(notebook, executed, parameters, kernel=_WORKER_KERNEL)
        state = "rendered"
    except RuntimeError as error:
        if "model.pt" in str(error) or f"{grid.PROCESSED}/" in str(error):
            state = (f"{WEIGHTS_NEEDED} (model.pt) or the prepared corpus ({grid.PROCESSED}/), which records do "
                     f"not keep")
        else:
            state = f"failed: {error}"
    return state, time.monotonic() - started


def stop_quietly(signum, frame) -> None:
    """Ctrl-C during a render: one line, then the kernels and workers shut down without a word (their
    clients' threads would print dozens of lines of tracebacks as they are torn down)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C does not cut the shutdown short
    print("[rnnrepro] stopped by Ctrl-C: the notebooks already running end first (seconds), no other starts; "
          "this render is incomplete (what it wrote stays): render again", file=sys.stderr, flush=True)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    sys.stderr = open(os.devnull, "w")
    raise KeyboardInterrupt


def say_rendered(budget: str, item: Rendering) -> None:
    """One line per artifact as its render ends: ``[rnnrepro] <budget> <study>/<artifact>: <state>``."""
    timing = f" in {item.seconds:.1f} s" if item.state == "rendered" else ""
    print(f"[rnnrepro] {budget} {item.key}: {item.state}{timing}", flush=True)


def render(budget: str, records: Path = RECORDS, config_file: Path = Path("config/config.yaml"),
           jobs: int = 2, kernel=None, custom_file: Path | None = None) -> dict:
    """Render every artifact whose records are all there and current (``jobs`` worker processes side by
    side, each running its notebooks in turn in one kernel), then the scorecard, saying each as it ends,
    with the cells of your own of ``custom_file`` where given. Returns artifact -> state ("rendered", "not
    rendered: <why>", "not in the <budget> budget ...", "failed: <error>"). ``kernel``: where the
    scorecard's notebook runs (run_notebook.shared_kernel; a fresh one without)."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from .analysis.run_notebook import run

    started = time.monotonic()
    config, studies = _load(budget, config_file, custom_file=custom_file)
    restore(records, budget)
    root = grid.results_dir(budget)
    plan = render_plan(budget, config, studies, records)
    for item in plan:
        if item.notebook is None:
            say_rendered(budget, item)
    runnable = [item for item in plan if item.notebook is not None]
    # each worker keeps one kernel for the notebooks it runs: one start and one set of imports each;
    # spawned, so that no worker inherits the kernel this process holds for the scorecard
    with ProcessPoolExecutor(max_workers=max(1, min(jobs, len(runnable))), initializer=_start_worker_kernel,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        # the workers start with Ctrl-C ignored (inherited): the main process handles it (stop_quietly)
        handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            running = {pool.submit(_run_notebook, item.notebook, item.executed, item.parameters): item
                       for item in runnable}
        finally:
            signal.signal(signal.SIGINT, handler)
        try:
            for future in as_completed(running):
                item = running[future]
                item.state, item.seconds = future.result()
                say_rendered(budget, item)
        except KeyboardInterrupt:
            pool.shutdown(wait=False, cancel_futures=True)  # the notebooks not started never start
            raise
    tables = [t for item in runnable if item.state == "rendered" for t in item.tables]
    remove_earlier_outputs(budget, studies, plan)
    unrendered = {}
    for item in plan:
        if item.state.startswith("not rendered: "):
            unrendered.update({Path(t).stem: f"not rendered from records: {item.state.removeprefix('not rendered: ')}"
                               for t in item.tables})
        elif item.state.startswith("failed: "):
            unrendered.update({Path(t).stem: f"its notebook failed on the records: {item.state.removeprefix('failed: ')}"
                               for t in item.tables})
    for path in (f"{root}/tables", f"{root}/figures"):
        Path(path).mkdir(parents=True, exist_ok=True)
    files = claims_outputs(root, list(studies))
    scorecard = {"run_config": {"budget": budget, "seeds": config["seeds"], "studies": list(studies)},
                 "table_files": [str(Path(t).resolve()) for t in tables],
                 "unrendered": unrendered,
                 "tables": [str(Path(t).resolve()) for t in files["tables"]],
                 "figures": [str(Path(f).resolve()) for f in files["figures"]]}
    claims = Rendering("claims")
    begun = time.monotonic()
    run(Path("notebooks/claims.py"), Path(f"{root}/notebooks/claims.ipynb"), scorecard, kernel=kernel)
    claims.state, claims.seconds = "rendered", time.monotonic() - begun
    say_rendered(budget, claims)
    from . import results_page  # matplotlib, through the tables' rounding: not for the Snakefile's import

    page = results_page.build(scorecard["run_config"], {item.key: item.state.removeprefix("not rendered: ")
                                                        for item in plan if item.state != "rendered"})
    print(f"[rnnrepro] {budget}: {render_summary(plan)}, in {time.monotonic() - started:.0f} s; tables, figures "
          f"and the scorecard ({root}/tables/claims.csv) are in {root}/; read them on the results page: {page}",
          flush=True)
    return {**{item.key: item.state for item in plan}, "claims": claims.state}


def remove_earlier_outputs(budget: str, studies: dict, plan: list[Rendering]) -> None:
    """Remove the tables and figures an earlier render (or run) left of the artifacts not rendered now:
    the page and the scorecard then say why each is missing, instead of showing what older records made
    as current."""
    for item in plan:
        if item.state == "rendered" or item.state.startswith(("not in the ", WEIGHTS_NEEDED)):
            continue  # (what needs weights is never rendered from records: a run of this machine made it)
        name, artifact = item.key.split("/", 1)
        tables, figures, _ = _outputs(studies[name], name, artifact, budget)
        # each table with the forms written beside it (its .md and .tex)
        made = [p for table in map(Path, tables) for p in sorted(table.parent.glob(f"{table.stem}.*"))]
        gone = [path for path in made + list(map(Path, figures)) if path.exists() or path.is_symlink()]
        for path in gone:
            path.unlink()
        if gone:
            print(f"[rnnrepro] {budget}: removed the earlier {', '.join(p.name for p in gone)} of {item.key}, "
                  f"not rendered now", flush=True)


def render_summary(plan: list[Rendering]) -> str:
    """The counts of a render, with the reasons where artifacts were not rendered."""
    rendered = [i for i in plan if i.state == "rendered"]
    weights = [i.key for i in plan if i.state.startswith("not rendered: it needs the cells' weights")]
    missing = [i.key for i in plan if i.state.startswith("not rendered: ") and i.key not in weights]
    omitted = [i.key for i in plan if i.state.startswith("not in the ")]
    failed = [i.key for i in plan if i.state.startswith("failed: ")]
    parts = [f"{len(rendered)} of {len(plan)} artifacts rendered"]
    if weights:
        parts.append(f"{len(weights)} need weights or data that records do not keep ({', '.join(weights)})")
    if missing:
        parts.append(f"{len(missing)} lack records or have stale or damaged ones ({', '.join(missing)})")
    if omitted:
        parts.append(f"{len(omitted)} not in this budget ({', '.join(omitted)})")
    parts.append(f"{len(failed)} failed" + (f" ({', '.join(failed)})" if failed else ""))
    return "; ".join(parts)


def scales_first(budgets: list[str], config_file: Path) -> list[str]:
    """The budgets to render, each other scale of a budget (``scale_of``) before that budget, whose
    scorecard reads the other scale's beside its own."""
    config = load_run_config(load_yaml(config_file), source=str(config_file))
    scales = {name for study in config["studies"] for name, spec in load_study(study)["budgets"].items()
              if "scale_of" in spec}
    return sorted(dict.fromkeys(budgets), key=lambda budget: budget not in scales)


BY_BUDGET = tuple(f"{grid.RESULTS}/{name}" for name in layout.BY_BUDGET)


def render_by_budget(kernel=None) -> list[str]:
    """The side-by-side verdicts of every budget with a scorecard here (smoke aside): results/
    claims_by_budget.csv and .png (notebooks/claims_by_budget.py). Returns the budgets shown."""
    from .analysis.run_notebook import run

    results = Path(grid.RESULTS)
    budgets = [grid.DEFAULT_BUDGET] + ([p.name for p in sorted(results.iterdir()) if p.name not in grid.RESERVED_NAMES]
                                       if results.is_dir() else [])
    found = {budget: Path(grid.results_dir(budget), "tables", "claims.csv") for budget in budgets
             if budget != grid.SMOKE and Path(grid.results_dir(budget), "tables", "claims.csv").is_file()}
    if not found:
        return []
    run(Path("notebooks/claims_by_budget.py"), Path(BY_BUDGET[2]),
        {"scorecards": {b: str(p.resolve()) for b, p in found.items()},
         "tables": [str(Path(BY_BUDGET[0]).resolve())], "figures": [str(Path(BY_BUDGET[1]).resolve())]},
        kernel=kernel)
    return list(found)


# ---------------------------------------------------------------- growing

class Grower:
    """The workers of ``grow``: each runs one unit at a time through Snakemake and records it."""

    def __init__(self, budget: str, todo: list[Unit], studies: dict, config: dict, args: argparse.Namespace):
        self.budget, self.todo, self.studies, self.config, self.args = budget, list(todo), studies, config, args
        self.deadline = time.monotonic() + args.minutes * 60
        self.why_stopped = "the deadline"  # or the signal that moved the deadline to now
        self.lock = threading.Lock()
        self.saying = threading.Lock()
        self.running: dict[str, subprocess.Popen] = {}
        self.done: list[str] = []
        self.failed: list[str] = []
        self.interrupted: list[str] = []
        self.busy: list[str] = []  # units another process was training
        self.total = len(todo)
        self.taken = 0  # units handed to a worker so far
        self.log_dir = Path(grid.logs_dir(budget)) / "grow"

    def say(self, text: str) -> None:
        with self.saying:  # the workers' lines, whole and one at a time
            print(f"[rnnrepro] {time.strftime('%H:%M:%S')} {text}", flush=True)

    def snakemake(self, targets: list[str], threads: int, *extra: str) -> list[str]:
        """A Snakemake command line that ends with this process (rnnrepro.process_group): a grow that is
        killed, even with SIGKILL, stops its units as its deadline does, leaving no trainer behind."""
        settings = [f"budget={self.budget}", f"threads={self.args.threads}", *self.args.config]
        custom = ["--configfile", str(self.args.configfile)] if getattr(self.args, "configfile", None) else []
        return [sys.executable, "-m", "rnnrepro.process_group", "--", sys.executable, "-m", "snakemake",
                "--cores", str(threads), *extra, *custom, "--config", *settings, "--", *targets]

    def data_files(self) -> list[str]:
        """The prepared files every cell of the units trains and is evaluated on."""
        files = {}
        for unit in self.todo:
            study = self.studies[unit.study]
            for cell in unit.cells:
                corpus = grid.trained_corpus(study, self.config, cell)
                files.update(dict.fromkeys([grid.train_file(corpus, cell.fraction)] + [
                    f"{grid.PROCESSED}/{corpus}/{name}" for name in ("valid.txt", "test.txt", "vocab.txt")]))
        return list(files)

    def prepare_data(self) -> bool:
        """Fetch and prepare every corpus the units read, in one (locked) Snakemake run, before the
        units' Snakemake runs go side by side."""
        targets = self.data_files()
        if not targets:
            return True
        self.say(f"preparing the data of {len(self.todo)} units")
        log = self.log_dir / "prepare_data.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w") as out:
            code = subprocess.run(self.snakemake(targets, max(self.args.jobs * self.args.threads, 1)),
                                  stdout=out, stderr=subprocess.STDOUT).returncode
        if code != 0:
            self.say(f"error: preparing the data failed (exit {code}); see {log}{why_it_failed(log)}")
        return code == 0

    def next_unit(self) -> tuple[int, Unit] | None:
        """The next unit and its position in the run (taken together: two workers never share one): the
        first whose needs (its tuning cells' units) are recorded, waiting while one of them is running."""
        while True:
            with self.lock:
                if not self.todo or time.monotonic() >= self.deadline:
                    return None
                pending = {u.name for u in self.todo} | set(self.running) | set(self.failed) | set(self.interrupted)
                ready = next((u for u in self.todo if not set(u.needs) & pending), None)
                if ready is not None:
                    self.todo.remove(ready)
                    self.taken += 1
                    return self.taken, ready
                if not set().union(*(set(u.needs) for u in self.todo)) & set(self.running):
                    blocked = self.todo[0]
                    self.say(f"not started: {len(self.todo)} units whose tuning did not finish, e.g. {blocked.name} "
                             f"(needs {', '.join(sorted(set(blocked.needs) & pending)[:2])})")
                    self.todo.clear()
                    return None
            time.sleep(5)

    def record(self, unit: Unit, records: Path) -> list[Path]:
        """Pack the unit; returns exactly the files written (listed first as packed and not committed,
        rnnrepro.record_commits)."""
        files = [f for cell in unit.cells for f in packed_files(Path(cell.run_dir), self.budget, records)]
        if unit.speed:
            files.append(record_dir(records, self.budget) / "speed" / Path(unit.speed).name)
        if self.args.commit:
            record_commits.note_packing(self.budget, files)
        for cell in unit.cells:
            pack_run(Path(cell.run_dir), self.budget, records)
        if unit.speed:
            pack_speed(Path(unit.speed), self.budget, records)
        return files

    def commit(self, unit: Unit, paths: list[Path], summary: str) -> None:
        problem = record_commits.commit(paths, f"records: {self.budget} {unit.name} ({summary})")
        if problem:
            self.say(f"warning: could not commit {unit.name}: {problem}")
        else:
            record_commits.note_committed(self.budget, paths)

    def summary(self, unit: Unit) -> str:
        if unit.speed:
            return "speed benchmark"
        metrics = json.loads(Path(unit.cells[-1].run_dir, "metrics.json").read_text())
        value = next((f"{k} {metrics[k]:.4g}" for k in ("val_ppl", "val_loss", "val_cross_entropy")
                      if isinstance(metrics.get(k), (int, float))), "")
        return f"{value}, trained in {metrics.get('wall_seconds', 0) / 60:.1f} min".lstrip(", ")

    def work(self) -> None:
        while (taken := self.next_unit()) is not None:
            position, unit = taken
            busy = [f"{cell.run_dir} ({who})" for cell in unit.cells
                    if (who := progress_file.another_trainer(Path(cell.run_dir)))]
            if busy:  # its Snakemake would refuse the unit: say why here
                self.busy.append(unit.name)
                self.say(f"skipped {unit.name}: another process on this machine trains {busy[0]}; a later "
                         f"grow records it once that process has ended")
                continue
            log = self.log_dir / f"{unit.name.replace('/', '_')}.log"
            started = time.monotonic()
            self.say(f"unit {position} of {self.total}: {unit.name} (log {log})")
            with open(log, "w") as out:
                process = subprocess.Popen(self.snakemake(unit.targets, self.args.threads, "--nolock"),
                                           stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
                with self.lock:
                    self.running[unit.name] = process
                code = process.wait()
                with self.lock:
                    self.running.pop(unit.name, None)
            if code != 0:
                if time.monotonic() >= self.deadline:
                    self.interrupted.append(unit.name)
                    self.say(f"stopped by {self.why_stopped}: {unit.name} (a later grow resumes it); see {log}")
                else:
                    self.failed.append(unit.name)
                    self.say(f"failed (exit {code}): {unit.name}; see {log}{why_it_failed(log)}")
                continue
            try:
                written = self.record(unit, self.args.records)
            except (RuntimeError, FileNotFoundError) as error:  # a run pack refuses (uncommitted code, ...)
                self.failed.append(unit.name)
                self.say(f"failed: {unit.name} trained but is not recorded: {error}")
                continue
            summary = self.summary(unit)
            if self.args.commit:
                self.commit(unit, written, summary)
            self.done.append(unit.name)
            self.say(f"recorded {unit.name}: {summary} (this run of the unit, evaluations included: "
                     f"{(time.monotonic() - started) / 60:.1f} min)")

    def stop_running(self) -> None:
        """SIGTERM to every running unit's process group: training writes its resume checkpoint."""
        with self.lock:
            processes = list(self.running.items())
        for name, process in processes:
            self.say(f"{self.why_stopped}: stopping {name}")
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop_now(self, signum, frame) -> None:
        """SIGTERM or Ctrl-C: the deadline is now (running units checkpoint and stop, none starts)."""
        self.why_stopped = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        self.deadline = time.monotonic()

    def run(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self.stop_now)
        workers = [threading.Thread(target=self.work, daemon=True) for _ in range(self.args.jobs)]
        for worker in workers:
            worker.start()
        while any(worker.is_alive() for worker in workers):
            if time.monotonic() >= self.deadline:
                self.stop_running()
                for worker in workers:
                    worker.join()
                break
            time.sleep(2)


FAILED_JOB_LOG = re.compile(r"^\s*log: (.+?) \(check log file\(s\) for error details\)", re.M)


def why_it_failed(snakemake_log: Path, lines: int = 4) -> str:
    """The last lines of the logs of the jobs that failed in a Snakemake run (its own log names them), or
    of the run's log where no job ran (it stopped while planning): shown where the failure is reported,
    so that the error itself is one look away, not two logs deep."""
    try:
        text = snakemake_log.read_text(errors="replace")
    except OSError:
        return ""
    parts = []
    for job_log in dict.fromkeys(FAILED_JOB_LOG.findall(text)):
        try:
            tail = [line for line in Path(job_log).read_text(errors="replace").splitlines() if line.strip()][-lines:]
        except OSError:
            continue
        parts.append(f"{job_log}:\n    " + "\n    ".join(tail))
    if not parts:
        tail = [line for line in text.splitlines() if line.strip() and not line.startswith("  File ")][-lines:]
        parts = ["\n    ".join(tail)] if tail else []
    return "".join(f"\n  {part}" for part in parts)


def selected(found: list[Unit], patterns: list[str] | None) -> list[Unit]:
    """The units whose name matches one of the shell patterns (``--unit``; all without any), in order.
    A pattern that matches no unit is an error naming the units there are."""
    if not patterns:
        return found
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(u.name, p) for u in found)]
    if unmatched:
        names = ", ".join(u.name for u in found[:8]) + (", ..." if len(found) > 8 else "")
        raise ConfigError(f"--unit {', '.join(unmatched)}: matches no unit of this budget and these studies "
                          f"(units are named like {names}; `python -m rnnrepro.records list` lists them)")
    return [u for u in found if any(fnmatch.fnmatchcase(u.name, p) for p in patterns)]


def commit_leftovers(budget: str, records: Path, say) -> None:
    """Commit the files an earlier grow packed into ``records/<budget>`` but was stopped (killed, or the
    session ended) before it could commit, and only those (rnnrepro.record_commits)."""
    record_commits.commit_leftovers(budget, Path(records) / budget, say)


def uncommitted_changes() -> list[str]:
    """Tracked files of the working tree that differ from HEAD (records/ aside: grow commits those). None
    where RNNREPRO_GIT_SHA states the commit (a copy of a clean working tree, train.common.git_sha)."""
    if os.environ.get(GIT_SHA_ENV, "").strip():
        return []
    listed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                             f":(exclude){RECORDS}"], capture_output=True, text=True)
    return [line[3:] for line in listed.stdout.splitlines()] if listed.returncode == 0 else []


def hold_grow_lock(budget: str) -> int:
    """One grow of a budget at a time in a working tree: two would train the same units side by side.
    The lock (``flock`` on ``<logs>/grow/grow.lock``) lasts as long as this process."""
    path = Path(grid.logs_dir(budget)) / "grow" / "grow.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = Path(path).read_text().strip() or "another process"
        os.close(fd)
        raise RuntimeError(f"another `records grow --budget {budget}` runs in this working tree ({holder}): "
                           f"wait for it to end, or stop it (it stops its units at the next batch, each "
                           f"resumable), then grow again") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
    return fd


def command_line_settings(words: list[str]) -> dict[str, str]:
    """``--config KEY=VALUE ...`` as a dict (checked with the run config, like Snakemake's ``--config``);
    the budget and the threads have options of their own."""
    settings = {}
    for word in words:
        key, equals, value = word.partition("=")
        if not equals or not key:
            raise ConfigError(f"--config {word}: write KEY=VALUE, e.g. data_mirror=/path/to/mirror")
        if key in ("budget", "threads"):
            raise ConfigError(f"--config {word}: give the {key} with --{key}, not after --config")
        settings[key] = value
    return settings


def grow(args: argparse.Namespace) -> int:
    # every argument is checked here, before any Snakemake run: an error in one is this command's
    config, studies = _load(args.budget, args.run_config, args.study, command_line_settings(args.config),
                            getattr(args, "configfile", None))
    if args.budget == grid.SMOKE:
        raise ConfigError("grow records real-data runs: the smoke budget trains on synthetic corpora")
    hold_grow_lock(args.budget)
    changed = uncommitted_changes()
    if changed:
        raise RuntimeError(f"the working tree has uncommitted changes ({', '.join(changed[:5])}"
                           f"{', ...' if len(changed) > 5 else ''}): a record must name the commit that made "
                           f"it. Commit or stash them, or grow from a clean checkout (git worktree add ../grow)")
    if args.commit:
        record_commits.check_branch()
        commit_leftovers(args.budget, args.records, lambda text: print(f"[rnnrepro] {text}", flush=True))
    pending = seed_by_seed([u for u in selected(units(studies, config), args.unit)
                            if u.problems(studies, config, args.records)])
    grower = Grower(args.budget, pending, studies, config, args)
    grower.say(f"budget {args.budget}: {len(pending)} units to record (studies {', '.join(studies)}), "
               f"{args.jobs} at a time x {args.threads} thread{'' if args.threads == 1 else 's'}, for at most "
               f"{args.minutes:g} minutes")
    if not pending or not grower.prepare_data():
        return 0 if not pending else 1
    grower.run()
    grower.say(f"recorded {len(grower.done)} units, {len(grower.failed)} failed"
               f"{(': ' + ', '.join(grower.failed)) if grower.failed else ''}, {len(grower.interrupted)} stopped "
               f"by {grower.why_stopped}, {len(grower.todo)} not started"
               + (f", {len(grower.busy)} skipped (another process trains them)" if grower.busy else ""))
    return 1 if grower.failed or grower.busy else 0


def seed_by_seed(found: list[Unit]) -> list[Unit]:
    """The order ``grow`` takes units in: study by study, each study's tuning cells first, then its cells
    seed by seed (every model's first seed, then every model's second, ...), its speed benchmark last, so
    that a grow cut short leaves whole comparisons at fewer seeds rather than some models at every seed."""
    studies = list(dict.fromkeys(u.study for u in found))

    def key(unit: Unit) -> tuple:
        tuning_cell = bool(unit.cells) and tuning.parse_variant(unit.cells[-1].model) is not None
        seed = unit.cells[-1].seed if unit.cells else float("inf")
        return studies.index(unit.study), not tuning_cell, seed
    return sorted(found, key=key)


def list_units(args: argparse.Namespace) -> int:
    config, studies = _load(args.budget, args.run_config, args.study, custom_file=args.configfile)
    found = selected(units(studies, config), args.unit)
    counts = {"recorded": 0, "stale": 0, "damaged": 0, "missing": 0}
    for unit in found:
        problems = unit.problems(studies, config, args.records)
        state = next((s for s in ("damaged", "stale") if any(f"{s} record" in p for p in problems)),
                     "missing" if problems else "recorded")
        counts[state] += 1
        shown = next((p for p in problems if f"{state} record" in p), None)
        print(f"{state:9s} {unit.name}" + (f"  ({shown})" if shown else ""))
    print(f"{len(found)} units: " + ", ".join(f"{n} {state}" for state, n in counts.items()))
    return 0


def positive(kind):
    """An argparse type: a number of ``kind`` above 0 (none of grow's counts and times can be 0)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value > 0 or value != value or value == float("inf"):
            raise argparse.ArgumentTypeError(f"{text}: give a number above 0")
        return value
    parse.__name__ = kind.__name__
    return parse


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnrepro.records", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=Path, default=RECORDS, help="the records folder (default: records)")
    parser.add_argument("--run-config", type=Path, default=Path("config/config.yaml"),
                        help="run config whose studies and seeds are used (its budget is replaced)")
    commands = parser.add_subparsers(dest="command", required=True)
    grow_cmd = commands.add_parser("grow", help="train and record the next unrecorded units of a budget")
    list_cmd = commands.add_parser("list", help="each unit of a budget: recorded, stale, damaged or missing")
    for command in (grow_cmd, list_cmd):
        command.add_argument("--budget", required=True)
        command.add_argument("--study", action="append", help="only this study (repeatable)")
        command.add_argument("--unit", action="append", metavar="PATTERN",
                             help="only the units whose name matches this shell pattern, e.g. 'pru/ptb/*' or "
                                  "'lrn/speed' (repeatable; names as `list` prints them)")
    grow_cmd.add_argument("--minutes", type=positive(float), required=True, help="start no unit after this many "
                          "minutes, and stop the running ones then (they resume from their checkpoints)")
    grow_cmd.add_argument("--jobs", type=positive(int), default=2, help="units side by side (default 2)")
    grow_cmd.add_argument("--threads", type=positive(int), default=1, help="CPU threads per unit (default 1)")
    grow_cmd.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                          help="more run-config values for Snakemake, e.g. data_mirror=DIR device=cpu")
    grow_cmd.add_argument("--commit", action="store_true", help="git-commit each unit's records as it is packed")
    pack_cmd = commands.add_parser("pack", help="record the small files of every finished real-data run")
    pack_cmd.add_argument("--budget", help="only this budget (default: every budget with a results tree)")
    pack_cmd.add_argument("--include-synthetic", action="store_true",
                          help="also record runs on synthetic corpora (to try rendering on smoke runs)")
    render_cmd = commands.add_parser("render", help="tables, figures and the scorecard from one budget's records")
    render_cmd.add_argument("--budget", required=True, action="append",
                            help="a recorded budget (repeatable: each is rendered into its own results tree)")
    render_cmd.add_argument("--jobs", type=int, default=2,
                            help="notebooks run side by side (default 2): worker processes, each running its "
                                 "notebooks in turn in one kernel")
    readme_cmd = commands.add_parser("readme", help="write README.md's scorecard section from the rendered scorecards")
    readme_cmd.add_argument("--budget", action="append",
                            help="a budget to list (repeatable; default: every recorded budget but another scale "
                                 "of one, which shows beside its own)")
    readme_cmd.add_argument("--check", action="store_true",
                            help="write nothing; fail when the README's section differs from the scorecards")
    for command in (grow_cmd, list_cmd, render_cmd):
        command.add_argument("--configfile", type=Path, metavar="FILE",
                             help="a config file of cells of your own (custom_cells, docs/custom_cells.md), merged "
                                  "over the run config as snakemake --configfile merges it, e.g. examples/mgu.yaml")
    args = parser.parse_args(argv)
    try:
        check_checkout()
        if args.command == "readme":
            from .readme_scorecard import shown_budgets, update

            studies = load_run_config(load_yaml(args.run_config), source=str(args.run_config))["studies"]
            fresh, message = update(Path("README.md"), args.budget or shown_budgets(args.records, studies),
                                    args.check)
            print(f"[rnnrepro] {message}", file=sys.stdout if fresh else sys.stderr)
            return 0 if fresh else 1
        if args.command == "grow":
            return grow(args)
        if args.command == "list":
            return list_units(args)
        if args.command == "pack":
            if args.budget:
                check_budget(args.budget)
            packed = pack(args.budget, args.records, args.include_synthetic)
            speed = sum(path.parent.name == "speed" for path in packed)
            print(f"[rnnrepro] recorded {len(packed) - speed} runs and {speed} speed results under {args.records}/")
            return 0
        from .analysis.run_notebook import shared_kernel

        signal.signal(signal.SIGINT, stop_quietly)
        failed = False
        budgets = list(scales_first(args.budget, args.run_config))
        if args.configfile:  # the scorecards' kernel sees the cells of your own only if exported before it starts
            _load(budgets[0], args.run_config, custom_file=args.configfile)
        states = {}
        with shared_kernel() as kernel:  # the scorecards' notebooks, one after another
            for budget in budgets:
                states[budget] = render(budget, args.records, args.run_config, jobs=args.jobs, kernel=kernel,
                                        custom_file=args.configfile)
                failed |= any(state.startswith("failed") for state in states[budget].values())
            shown = render_by_budget(kernel)
        if shown:  # each page shows the side-by-side figure, which the later budgets changed
            from . import results_page

            for budget, status in states.items():
                config, studies = _load(budget, args.run_config, custom_file=args.configfile)
                results_page.build({"budget": budget, "seeds": config["seeds"], "studies": list(studies)},
                                   {key: state.removeprefix("not rendered: ") for key, state in status.items()
                                    if state != "rendered"})
        if shown:
            print(f"[rnnrepro] the verdicts of every budget side by side ({', '.join(shown)}): {BY_BUDGET[1]}")
        return 1 if failed else 0
    except (ConfigError, FileNotFoundError, FileExistsError, RuntimeError, ValueError) as error:
        print(f"[rnnrepro] error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(console.run_command(main))
