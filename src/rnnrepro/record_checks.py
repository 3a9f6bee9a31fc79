"""Whether a record (``records/<budget>/runs/<cell>/``) can stand for its cell: whole, of one run, of
this cell, current, and made from a commit this repository holds.

A record is *damaged* when one of its files (config.json, history.csv, metrics.json) is missing, a folder
or a link to nothing, not JSON or not a table of numbers; when its metrics.json and history.csv are of
different runs (the epochs or the best validation loss disagree: one rolled back or copied in); when one
of its files names another cell; or when an evaluation output was made before its metrics.json (it
evaluated an earlier model). It is *stale* when its config.json is not what the study file resolves for
the cell now (the cell's code is part of that: rnnrepro.cell_identity), or when its ``git_sha`` is not a
commit of this repository. Either way ``records render`` does not use it and ``records grow`` trains the
cell again; the fix of a damaged record is git.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from . import grid, record_commits
from .analysis.run_files import DamagedRunFile, finite_problems, read_history
from .cell_identity import stale_reason
from .configuration import schema_problems
from .train import progress_file
from .tuning import TuningPending

RECORDED = ("config.json", "history.csv", "metrics.json")


def evaluation_outputs(run_dir: Path) -> list[Path]:
    """The JSON files of a run folder besides its config, metrics and training progress (which names the
    machine and process that trained it): its evaluations' outputs."""
    return [path for path in sorted(run_dir.glob("*.json")) if path.name not in (*RECORDED, progress_file.NAME)]


def check_pairing(run_dir: Path) -> None:
    """Refuse a run folder whose evaluation output was made before its metrics.json (``finished_at``):
    it evaluated an earlier model of the cell, and a record pairing the two would show that model's
    numbers beside this one's."""
    finished = str(json.loads((run_dir / "metrics.json").read_text()).get("finished_at", ""))
    for path in evaluation_outputs(run_dir):
        try:
            output = json.loads(path.read_text())
            made, sha = str(output.get("finished_at", "")), str(output.get("git_sha", ""))
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
            raise RuntimeError(f"{path} is not a JSON object: delete it and rerun the cell's target, so that its "
                               f"evaluation runs again, then record it") from None
        if sha.endswith("-dirty"):
            raise RuntimeError(f"{path} was made from a working tree with uncommitted changes (git_sha {sha}): no "
                               f"commit holds the code that made it, so it is not recorded; commit, then delete it "
                               f"and rerun the cell's target (the evaluation runs again)")
        if made and finished and made < finished:
            raise RuntimeError(f"{path} (finished {made}) was made before the cell's metrics.json (finished "
                               f"{finished}): it evaluated an earlier model of the cell, so the two are not "
                               f"recorded together. Delete it and rerun the cell's target (the evaluation runs "
                               f"on this model), then record it")


def damage(run: Path) -> str | None:
    """How a record's files are unusable (missing beside the others, a link to nowhere, not JSON, not a
    CSV table, off the metrics schema), or None."""
    for name in RECORDED:
        if (run / name).is_symlink() and not (run / name).exists():
            return f"{name} is a link to a file that does not exist ({os.readlink(run / name)})"
        if (run / name).is_dir():
            return f"{name} is a folder, not a file"
        if not (run / name).is_file():
            return f"{name} is missing"
    for name in ("metrics.json", "config.json"):
        try:
            data = json.loads((run / name).read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            return f"{name} is not valid JSON ({e})"
        if name == "metrics.json" and (problems := schema_problems(data, "metrics") + finite_problems(data)):
            return f"{name} is damaged: {'; '.join(problems[:3])}"
        if not isinstance(data, dict):
            return f"{name} is not a JSON object"
    try:
        history = read_history(run)
    except DamagedRunFile as e:
        return str(e).split(": ", 1)[1].split(". ", 1)[0]  # "history.csv is damaged: ...", without the advice
    metrics = json.loads((run / "metrics.json").read_text())
    epochs, last = metrics.get("epochs"), history["epoch"].max()
    if isinstance(epochs, (int, float)) and epochs != last:
        return (f"metrics.json says {epochs:g} epochs but history.csv ends at epoch {last:g}: the two are of "
                f"different runs (one rolled back or copied in)")
    best, lowest = metrics.get("best_val_loss_during_training"), history["val_loss"].min()
    # best_epoch 0: the weights it started from (a finetune's Base), evaluated before its first epoch and
    # better than every epoch after, which history.csv does not list
    started_best = metrics.get("best_epoch") == 0 and isinstance(best, (int, float)) and best < lowest
    if isinstance(best, (int, float)) and abs(best - lowest) > 1e-9 * abs(lowest) and not started_best:
        return (f"metrics.json's best_val_loss_during_training {best:.6g} is not history.csv's lowest val_loss "
                f"{lowest:.6g}: the two are of different runs (one rolled back or copied in)")
    finished = str(metrics.get("finished_at", ""))
    for path in evaluation_outputs(run):
        try:
            made = str(json.loads(path.read_text()).get("finished_at", ""))
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
            return f"{path.name} is not a JSON object"
        if made and finished and made < finished:
            return (f"{path.name} (finished {made}) was made before metrics.json (finished {finished}): it "
                    f"evaluated an earlier model of the cell")
    return None


def record_problem(study: dict, config: dict, cell: grid.Cell, records: Path) -> str | None:
    """Why a cell's record cannot be used (missing, damaged or stale), or None. A folder that holds some
    of a record's files is a damaged record, not a missing one."""
    run = Path(records) / cell.budget / Path(cell.run_dir).relative_to(grid.results_dir(cell.budget))
    if not any((run / name).exists() or (run / name).is_symlink() for name in RECORDED):
        return f"{cell.key}: not recorded"
    found = damage(run)
    if found:
        return (f"{cell.key}: damaged record ({run}: {found}; restore it from git, `git checkout -- {run}`, or "
                f"delete the folder and `records grow` trains the cell again)")
    metrics = json.loads((run / "metrics.json").read_text())
    for path in [run / "metrics.json"] + evaluation_outputs(run):
        if foreign := other_cell(json.loads(path.read_text()) if path.name != "metrics.json" else metrics, cell):
            return (f"{cell.key}: damaged record ({path}: {foreign}, not this folder's; a file copied in from "
                    f"another record: restore it from git, `git checkout -- {run}`, or delete the folder and "
                    f"`records grow` trains the cell again)")
    sha = str(metrics.get("git_sha", ""))
    if sha and not record_commits.in_history(sha):
        return (f"{cell.key}: stale record ({run}: trained from commit {sha}, which is not in this repository's "
                f"history, so the code that made it cannot be checked out; fetch that commit, or delete the "
                f"folder and `records grow` trains the cell again)")
    recorded = json.loads((run / "config.json").read_text())
    try:
        expected = grid.resolve_cell(study, config, cell)
    except TuningPending as e:
        return f"{cell.key}: stale record ({e})"
    why = stale_reason(recorded, expected, sha, epochs=metrics.get("epochs"), folder=run)
    return f"{cell.key}: stale record ({why})" if why else None


def other_cell(made: dict, cell: grid.Cell) -> str | None:
    """Which other cell a record's file (metrics or an evaluation's output) says it belongs to, or None."""
    if not isinstance(made, dict):
        return "not a JSON object"
    own = {"study": cell.study, "corpus": cell.corpus, "model": cell.model, "fraction": cell.fraction,
           "seed": cell.seed, "budget": cell.budget}
    differ = [f"{key} {made[key]!r}" for key, value in own.items() if key in made and made[key] != value]
    return f"made by the cell of {', '.join(differ)}" if differ else None


def stale_copy(study: dict, config: dict, cell: grid.Cell) -> str | None:
    """Why a cell's run folder holds a stale copy of its record, or None: its config.json, history.csv and
    metrics.json were copied from the record (records.smk, ``records render``: no model.pt, no resume
    checkpoint, so this machine did not train it) and are not the cell the study files and its code make
    now. Snakemake keeps files that exist and retrains only a job whose every output it made, so it would
    plan nothing for such a cell."""
    run = Path(cell.run_dir)
    if (run / "model.pt").exists() or (run / "checkpoint").exists():
        return None
    try:
        copied = json.loads((run / "config.json").read_text())
        metrics = json.loads((run / "metrics.json").read_text())
        sha, epochs = str(metrics.get("git_sha", "")), metrics.get("epochs")
        expected = grid.resolve_cell(study, config, cell)
    except (OSError, ValueError, AttributeError, TuningPending):
        return None  # not there (it trains), damaged (the notebooks name it), or its rate is not chosen yet
    return stale_reason(copied, expected, sha, epochs=epochs, folder=run)
