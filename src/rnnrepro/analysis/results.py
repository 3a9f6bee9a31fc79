"""Joining training cells' outputs into tables, with the paper's values as reference columns.

Every reproduced number comes from a run's ``metrics.json`` (and the architecture from the
``config.json`` beside it); ``paper_*`` columns come from the study file's ``paper:`` section.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .run_files import read_metrics, read_run_config


class MissingResult(FileNotFoundError):
    pass


def stopped_by_epoch_cap(metrics: dict, config: dict) -> bool:
    """Whether a run's epoch cap stopped it rather than its own rule: its recipe stops by itself (early
    stopping, or the non-monotone test of AWD finetuning) yet it trained every epoch the cap allows, so
    its numbers are those of a run that had not finished. A fixed schedule (no rule of its own) is
    never stopped by its cap."""
    recipe = config.get("recipe") or {}
    stops_itself = bool(recipe.get("early_stopping")) or bool(recipe.get("stop_on_nonmono"))
    cap, epochs = recipe.get("epochs"), metrics.get("epochs")
    return stops_itself and cap is not None and epochs is not None and epochs >= cap


def read_cells(metrics_files: list[str]) -> pd.DataFrame:
    """One row per training cell: its metrics plus the architecture and recipe it was trained with, and
    whether its epoch cap stopped it (``capped``, :func:`stopped_by_epoch_cap`)."""
    rows = []
    for path in map(Path, metrics_files):
        if not path.exists():
            raise MissingResult(f"{path} is missing: train that cell first (snakemake {path})")
        metrics = read_metrics(path)
        config = read_run_config(path.parent)
        arch = config["architecture"]
        rows.append({
            **metrics,
            "recipe": config["recipe_name"],
            "capped": stopped_by_epoch_cap(metrics, config),
            "cell": arch["cell"],
            "embedding_size": arch["embedding_size"],
            "hidden_size": arch["hidden_size"],
            "layers": arch["layers"],
            **{f"opt_{k}": v for k, v in arch["cell_options"].items()},
        })
    return pd.DataFrame(rows)


def in_order(table: pd.DataFrame, orders: dict[str, list], then: list[str] = ()) -> pd.DataFrame:
    """``table``'s rows sorted by each column of ``orders`` in the order its list gives (a value not
    listed, such as a cell of your own, after the listed ones), then by the ``then`` columns' values."""
    positions = {column: {value: i for i, value in enumerate(values)} for column, values in orders.items()}
    return (table.sort_values([*orders, *then], key=lambda s: s.map(positions[s.name]) if s.name in positions else s)
            .reset_index(drop=True))


def paper_values(study: dict, artifact: str) -> pd.DataFrame:
    rows = [
        {"dataset": dataset, "model": model, **{f"paper_{k}": v for k, v in values.items()}}
        for dataset, models in study["paper"].get(artifact, {}).items()
        for model, values in models.items()
    ]
    return pd.DataFrame(rows)


def samples_text(values) -> str:
    """The per-seed values behind a summary, in seed order, as one cell of a CSV (``v1;v2;v3``)."""
    return ";".join("nan" if v is None or pd.isna(v) else repr(float(v)) for v in values)


def summarise_seeds(cells: pd.DataFrame, keys: list[str], values: list[str]) -> pd.DataFrame:
    """Mean over seeds of each value, its standard deviation (NaN for one seed), the values of every
    seed (``<value>_samples``: what the scorecard's verdict rule compares) and the seed count."""
    grouped = cells.sort_values("seed").groupby(keys, sort=False, dropna=False)  # LSTM rows have no g/K
    out = grouped[values].mean()
    for value in values:
        out[f"{value}_std"] = grouped[value].std()
        out[f"{value}_samples"] = grouped[value].agg(samples_text)
    out["seeds"] = grouped["seed"].nunique()
    return out.reset_index()


def pru_table1(cells: pd.DataFrame, study: dict) -> pd.DataFrame:
    """Table 1 of the PRU paper: one row per (dataset, model)."""
    cells = cells.assign(params_m=cells["params"] / 1e6,
                         g=cells.get("opt_groups"), K=cells.get("opt_levels"), M=cells["hidden_size"])
    keys = ["dataset", "corpus", "model", "recipe", "cell", "g", "K", "M", "params_m", "budget"]
    table = summarise_seeds(cells.astype({"g": "Int64", "K": "Int64"}), keys, ["val_ppl", "test_ppl"])
    table = table.merge(paper_values(study, "table1"), on=["dataset", "model"], how="left")
    order = {m: i for i, m in enumerate(study["artifacts"]["table1"]["models"])}
    dataset_order = {d: i for i, d in enumerate(study["artifacts"]["table1"]["datasets"])}
    return (table.sort_values(by=["dataset", "model"],
                              key=lambda s: s.map(dataset_order if s.name == "dataset" else order))
            .reset_index(drop=True))


def pru_dropout_table(cells: pd.DataFrame, study: dict) -> pd.DataFrame:
    """The standard-dropout cells at 0.4 (the authors' code default: Table 1's own cells) and 0.5 (the
    paper's text: the ``*_do05`` variants): one row per (dataset, model), each beside the paper's Table 1
    number of its Table 1 model (``paper_model``)."""
    dropout = {name: recipe["dropout_output"] for name, recipe in study["recipes"].items()}
    cells = cells.assign(dropout=cells["recipe"].map(dropout), paper_model=cells["model"].str.removesuffix("_do05"))
    keys = ["dataset", "corpus", "model", "paper_model", "recipe", "dropout", "cell", "budget"]
    table = summarise_seeds(cells, keys, ["val_ppl", "test_ppl"])
    paper = paper_values(study, "table1")[["dataset", "model", "paper_val_ppl", "paper_test_ppl"]]
    table = table.merge(paper.rename(columns={"model": "paper_model"}), on=["dataset", "paper_model"], how="left")
    order = {m: i for i, m in enumerate(study["artifacts"]["dropout"]["models"])}
    dataset_order = {d: i for i, d in enumerate(study["artifacts"]["dropout"]["datasets"])}
    return (table.sort_values(by=["dataset", "model"],
                              key=lambda s: s.map(dataset_order if s.name == "dataset" else order))
            .reset_index(drop=True))
