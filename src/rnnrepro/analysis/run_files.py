"""Reading a training cell's ``metrics.json`` and ``config.json`` with errors that name its run folder.

A notebook that met a damaged file (truncated JSON, a string where a number goes, a missing key)
used to fail in one of its cells without saying which of its dozens of inputs was wrong. Every file
is checked here first, against ``workflow/schemas/metrics.schema.yaml`` for the metrics, and the
error names the run folder and how to rebuild it. A cell's weights (``model.pt``, a zip archive
written by ``torch.save``) are checked by their zip directory only (``check_weights``): that finds a
truncated file without reading it whole. No torch, no pandas: ``rnnrepro.status`` uses it.
"""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path

from ..cell_identity import stale_reason
from ..configuration import schema_problems


# Where and how wide a run went: not part of a cell's identity (older records carry them in config.json).


class DamagedRunFile(ValueError):
    """A run folder's metrics.json or config.json cannot be used; the message says which and what to do."""


# What to do about a damaged model.pt: Snakemake retrains a cell whose metrics.json is missing (the
# finetuning stage and the evaluations say the same, rnnrepro.train.checkpoint.load_weights).
REBUILD_WEIGHTS = "delete it and its metrics.json, then rerun, and Snakemake rebuilds that cell first"


# Files ``records render`` restored into a results tree are listed there (rnnrepro.records.MANIFEST).
RESTORED_MANIFEST = ".records.json"


def restored_from(path: Path) -> Path | None:
    """The record a results file was restored from by ``records render`` (listed in its results tree's
    manifest), or None for a run of this machine: a damaged restored file is fixed in its record."""
    path = Path(path).absolute()
    for root in path.parents:
        manifest = root / RESTORED_MANIFEST
        if manifest.is_file():
            try:
                listed = json.loads(manifest.read_text())
            except (OSError, ValueError):
                return None
            relative = str(path.relative_to(root))
            if not isinstance(listed, dict) or relative not in listed:
                return None
            from ..layout import DEFAULT_BUDGET, RESULTS  # the budget whose tree this is

            budget = DEFAULT_BUDGET if root.name == RESULTS else root.name
            return Path("records") / budget / relative
    return None


def _rebuild(path: Path, damaged: Path | None = None) -> str:
    record = restored_from(damaged or path)
    if record is not None:
        return (f"It was restored from the record {record}, which is damaged the same way: restore the record "
                f"from git (`git checkout -- {record}`), then render again (`python -m rnnrepro.records "
                f"render --budget {record.parts[1]}`); nothing needs retraining")
    return (f"Retrain that cell: rerun your snakemake command (same --profile/--config) with the target "
            f"{path} and --force, or restore the file")


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise DamagedRunFile(f"run folder {path.parent}: {path.name} is not valid JSON ({e}). "
                             f"{_rebuild(path.parent / 'metrics.json', path)}") from None
    except UnicodeDecodeError as e:
        raise DamagedRunFile(f"run folder {path.parent}: {path.name} is not text ({e.reason}). "
                             f"{_rebuild(path.parent / 'metrics.json', path)}") from None


def read_metrics(path: Path | str) -> dict:
    """A cell's metrics.json, checked against the metrics schema; FileNotFoundError if it is missing."""
    path = Path(path)
    metrics = _read_json(path)
    problems = schema_problems(metrics, "metrics") + finite_problems(metrics)
    if problems:
        raise DamagedRunFile(f"run folder {path.parent}: {path.name} is damaged: {'; '.join(problems[:5])}. "
                             f"{_rebuild(path)}")
    return metrics


def read_run_config(run_dir: Path | str) -> dict:
    """A cell's saved config.json (the resolved config it was trained with)."""
    path = Path(run_dir) / "config.json"
    config = _read_json(path)
    missing = [key for key in ("architecture", "recipe_name") if not isinstance(config, dict) or key not in config]
    if missing:
        raise DamagedRunFile(f"run folder {path.parent}: {path.name} is damaged: no {', '.join(missing)}. "
                             f"{_rebuild(path.parent / 'metrics.json', path)}")
    return config


def finite_problems(value, where: str = "") -> list[str]:
    """Every NaN or infinite number in a JSON value (nested keys joined by dots): JSON has none, but
    Python's json module writes and reads them."""
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in finite_problems(item, f"{where}.{key}" if where else key)]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in finite_problems(item, f"{where}[{i}]")]
    if isinstance(value, float) and not math.isfinite(value):
        return [f"{where or '(the file)'} is {value}"]
    return []


# An evaluation output's keys (rnnrepro.evaluation writes them): those of every method, and each
# method's own numbers, which the notebooks read.
EVALUATION_KEYS = {"study": str, "dataset": str, "corpus": str, "model": str, "seed": int, "budget": str,
                   "method": str}
EVALUATION_NUMBERS = {
    "dynamic": ("static_test_ppl", "dynamic_test_ppl", "lr", "decay", "epsilon", "segment_length"),
    "entropy": ("streams", "steps", "contexts", "mean_entropy", "mean_entropy_first_stream"),
    "saliency": ("length",),
}


def _rerun_evaluation(path: Path) -> str:
    if restored_from(path) is not None:
        return _rebuild(path)
    return f"Delete it and rerun your snakemake command (same --profile/--config): that evaluation runs again ({path})"


def _json_object(path: Path, rerun: str) -> dict:
    """The JSON object in ``path``; a file that is not one is named as damaged, with ``rerun``'s advice.
    FileNotFoundError if it is missing."""
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DamagedRunFile(f"{path} is damaged: not valid JSON ({e}). {rerun}") from None
    if not isinstance(data, dict):
        raise DamagedRunFile(f"{path} is damaged: not a JSON object. {rerun}")
    return data


def read_evaluation_file(path: Path | str) -> dict:
    """An evaluation's output (``<run dir>/<name>.json``), checked: a JSON object with the keys every
    evaluation writes, its method's numbers, and no NaN or infinite number anywhere (``entropies``
    and the like included). A damaged one names its file; FileNotFoundError if it is missing."""
    path = Path(path)
    data = _json_object(path, _rerun_evaluation(path))
    problems = [f"no {key}" if key not in data else f"{key} is not a {kind.__name__} ({data[key]!r})"
                for key, kind in EVALUATION_KEYS.items()
                if key not in data or not isinstance(data[key], kind) or isinstance(data[key], bool)]
    for key in EVALUATION_NUMBERS.get(data.get("method"), ()):
        value = data.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            problems.append(f"{key} is not a number ({value!r})" if key in data else f"no {key}")
    problems += finite_problems(data)
    if problems:
        raise DamagedRunFile(f"{path} is damaged: {'; '.join(problems[:5])}. {_rerun_evaluation(path)}")
    return data


# A speed benchmark's output (<results>/speed/<study>.json, rnnrepro.analysis.lrn speed): its shapes and
# one row per model, with the times the notebook divides.
SPEED_KEYS = ("batch_size", "bptt", "vocab_size", "device_name", "rows")
SPEED_ROW_NUMBERS = ("lm_seconds_per_batch", "layer_seconds")


def read_speed_file(path: Path | str) -> dict:
    """A study's speed benchmark, checked like an evaluation output (:func:`read_evaluation_file`)."""
    path = Path(path)
    rerun = "Delete it and rerun your snakemake command (same --profile/--config): the benchmark runs again"
    data = _json_object(path, rerun)
    problems = [f"no {key}" for key in SPEED_KEYS if key not in data]
    rows = data.get("rows")
    if "rows" in data and (not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows)):
        problems.append("rows is not a list of one object per model")
    else:
        for row in rows or []:
            problems += [f"rows: {row.get('model', '?')}: {key} is not a positive number ({row.get(key)!r})"
                         for key in SPEED_ROW_NUMBERS
                         if not isinstance(row.get(key), (int, float)) or isinstance(row.get(key), bool)
                         or not row.get(key) > 0]
    problems += finite_problems(data)
    if problems:
        raise DamagedRunFile(f"{path} is damaged: {'; '.join(problems[:5])}. {rerun}")
    return data


# history.csv: one row per validation check; every column is a number but `averaging` (True/False).
HISTORY_COLUMNS = ("epoch", "val_loss")
HISTORY_FLAGS = ("averaging",)


_HISTORIES: dict = {}  # (path, mtime, size, inode) -> the checked table: a render reads each one several times


def read_history(run_dir: Path | str):
    """A cell's history.csv as a pandas DataFrame, checked: its epoch and val_loss columns, at least one
    row, numbers in every column (empty only where no number was measured, e.g. the training loss of a
    check before the first step) and a finite validation loss in every row. A file read before and not
    changed since (same modification time, size and inode) is not parsed again: a copy of its table is
    returned."""
    path = Path(run_dir) / "history.csv"
    status = path.stat()  # FileNotFoundError where there is none
    key = (str(path.resolve()), status.st_mtime_ns, status.st_size, status.st_ino)
    if key not in _HISTORIES:
        if len(_HISTORIES) >= 4096:
            _HISTORIES.clear()
        _HISTORIES[key] = _checked_history(path)
    return _HISTORIES[key].copy()


def _checked_history(path: Path):
    import pandas as pd

    try:
        history = pd.read_csv(path)
    except FileNotFoundError:
        raise
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise DamagedRunFile(f"run folder {path.parent}: {path.name} is damaged (not a CSV table: "
                             f"{str(e).strip().splitlines()[0]}). {_rebuild(path.parent / 'metrics.json', path)}") from None
    problems = [f"no column {column}" for column in HISTORY_COLUMNS if column not in history.columns]
    if history.empty:
        problems.append("no rows")
    for column in history.columns:
        if column in HISTORY_FLAGS:
            continue
        numbers = pd.to_numeric(history[column], errors="coerce")
        text = history[column][numbers.isna() & history[column].notna()]
        if not text.empty:
            problems.append(f"column {column} holds {text.iloc[0]!r} (row {text.index[0] + 1}), not a number")
        elif column == "val_loss" and not numbers.map(math.isfinite).all():
            bad = numbers[~numbers.map(math.isfinite)]
            problems.append(f"val_loss is {bad.iloc[0]} in row {bad.index[0] + 1}")
    if problems:
        raise DamagedRunFile(f"run folder {path.parent}: {path.name} is damaged: {'; '.join(problems[:5])}. "
                             f"{_rebuild(path.parent / 'metrics.json', path)}")
    return history


def check_weights(path: Path | str) -> None:
    """Raise DamagedRunFile if a cell's model.pt is there but is not a whole archive of ``torch.save``.

    Only the zip archive's directory at the end of the file is read (a truncated file has none); a
    missing model.pt is not an error here (cells rendered from records/ have no weights).
    """
    path = Path(path)
    if not path.exists():
        return
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except zipfile.BadZipFile as e:
        raise DamagedRunFile(f"run folder {path.parent}: {path.name} is damaged (not a complete zip archive: "
                             f"{e}); {REBUILD_WEIGHTS}") from None
    if not any(name == "data.pkl" or name.endswith("/data.pkl") for name in names):
        raise DamagedRunFile(f"run folder {path.parent}: {path.name} is damaged (a zip archive, but not one "
                             f"torch.save wrote: no data.pkl); {REBUILD_WEIGHTS}")


def check_metrics_files(paths: list[str]) -> list[str]:
    """One message per damaged or missing file among ``paths`` (empty when all can be read)."""
    problems = []
    for path in map(Path, paths):
        try:
            read_metrics(path)
        except DamagedRunFile as e:
            problems.append(str(e))
        except FileNotFoundError:
            problems.append(f"run folder {path.parent}: no {path.name}; train that cell first (target {path})")
    return problems


def stale_problem(metrics_file: Path | str, study: dict) -> str | None:
    """Why a finished cell no longer is what its study file makes of it, or None when it is: its config.json
    differs from what the study resolves now for the cell of that run folder (a recipe, a width or a cell
    option changed since it was trained). Snakemake retrains such a cell itself when it trained it (its
    params changed), but not one copied in from records/ (`records render`): the notebooks must not read
    it either way. The budget and precision are the cell's own (its config.json)."""
    from .. import grid
    from ..configuration import ConfigError
    from ..tuning import TuningPending

    run_dir = Path(metrics_file).parent
    try:
        recorded = read_run_config(run_dir)
    except DamagedRunFile as e:
        return str(e)
    study_name, corpus, model, fraction, seed = run_dir.parts[-5:]
    try:
        cell = grid.Cell(study_name, corpus, model, int(fraction.removeprefix("frac")), int(seed.removeprefix("seed")),
                         recorded.get("budget", ""), recorded.get("precision", "fp32"))
        expected = grid.resolve_cell(study, {"budget": cell.budget, "precision": cell.precision, "device": "auto"},
                                     cell)
    except TuningPending as e:
        return f"{run_dir}: {e}, so this run's learning rate cannot be checked against it"
    except (ConfigError, KeyError, ValueError) as e:
        return f"{run_dir}: its cell is not one the study file makes now ({e})"
    try:
        metrics = json.loads(Path(metrics_file).read_text())
        sha, epochs = str(metrics.get("git_sha", "")), metrics.get("epochs")
    except (OSError, ValueError, AttributeError):
        sha, epochs = "", None
    why = stale_reason(recorded, expected, sha, since=" since it was trained", epochs=epochs, folder=run_dir)
    return f"{run_dir}: stale ({why})" if why else None
