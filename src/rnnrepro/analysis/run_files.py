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
import zipfile
from pathlib import Path

from ..configuration import schema_problems


class DamagedRunFile(ValueError):
    """A run folder's metrics.json or config.json cannot be used; the message says which and what to do."""


# What to do about a damaged model.pt: Snakemake retrains a cell whose metrics.json is missing (the
# finetuning stage and the evaluations say the same, rnnrepro.train.checkpoint.load_weights).
REBUILD_WEIGHTS = "delete it and its metrics.json, then rerun, and Snakemake rebuilds that cell first"


def _rebuild(path: Path) -> str:
    return (f"Retrain that cell: rerun your snakemake command (same --profile/--config) with the target "
            f"{path} and --force, or restore the file")


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise DamagedRunFile(f"run folder {path.parent}: {path.name} is not valid JSON ({e}). "
                             f"{_rebuild(path.parent / 'metrics.json')}") from None
    except UnicodeDecodeError as e:
        raise DamagedRunFile(f"run folder {path.parent}: {path.name} is not text ({e.reason}). "
                             f"{_rebuild(path.parent / 'metrics.json')}") from None


def read_metrics(path: Path | str) -> dict:
    """A cell's metrics.json, checked against the metrics schema; FileNotFoundError if it is missing."""
    path = Path(path)
    metrics = _read_json(path)
    problems = schema_problems(metrics, "metrics")
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
                             f"{_rebuild(path.parent / 'metrics.json')}")
    return config


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
