"""The ``footing`` column of an artifact's tables where it has cells of your own (rnnrepro.custom_cells):
how each stands beside the model it is ``like`` at the budget of these runs, in words with their
numbers (parameters, the recipe values that differ), read from the runs' metrics.json and config.json.
"""

from __future__ import annotations

from pathlib import Path

from ..custom_cells import FOOTING, _number, standing
from ..train.files import write_text_atomic
from .run_files import read_metrics, read_run_config


def footing(study: dict, artifact: str, metrics_files: list[str]) -> dict[tuple[str, str], str]:
    """(model, dataset) -> the ``footing`` of each cell of your own in an artifact's tables: how it stands
    beside the model it is ``like`` at the budget of these runs, in words with their numbers (parameters,
    the recipe values that differ). Read from the runs' metrics.json and config.json."""
    added = {name: spec for name, spec in study.get("custom_cells", {}).items() if artifact in spec["artifacts"]}
    if not added:
        return {}
    runs: dict[tuple[str, str], tuple[dict, dict]] = {}
    for path in map(Path, metrics_files):
        metrics = read_metrics(path)
        runs.setdefault((metrics["model"], metrics["dataset"]), (metrics, read_run_config(path.parent)))
    words = {}
    for name, spec in added.items():
        like = spec["like"]
        for (model, dataset), (metrics, config) in runs.items():
            if model != name:
                continue
            text = standing(study, name)
            if (like, dataset) in runs:
                theirs, their_config = runs[(like, dataset)]
                ratio = metrics["params"] / theirs["params"]
                differ = [f"{key} {_number(value)} ({like}: {_number(their_config['recipe'].get(key))})"
                          for key, value in config["recipe"].items() if their_config["recipe"].get(key) != value]
                text += (f"; here {metrics['params']:,} parameters against {like}'s {theirs['params']:,} "
                         f"({ratio:.2f}x), " + (f"recipe as {like}'s but {', '.join(differ)}" if differ else
                                                f"the same recipe as {like}"))
            words[(name, dataset)] = text
    return words


def add_footing(study: dict, artifact: str, metrics_files: list[str], table_files: list[str]) -> None:
    """Write the ``footing`` column (:func:`footing`) into each table of the artifact that has a ``model``
    column, where the artifact has cells of your own: their words, empty in the baselines' rows."""
    import pandas as pd

    words = footing(study, artifact, metrics_files)
    if not any(name in study["artifacts"][artifact]["models"] for name in study.get("custom_cells", {})):
        return
    for path in table_files:
        table = pd.read_csv(path)
        if "model" not in table.columns:
            continue
        datasets = table["dataset"] if "dataset" in table.columns else pd.Series("", index=table.index)
        added = study.get("custom_cells", {})
        table[FOOTING] = [words.get((str(model), str(dataset)), standing(study, str(model)) if model in added else "")
                          for model, dataset in zip(table["model"], datasets)]
        write_text_atomic(Path(path), table.to_csv(index=False))
