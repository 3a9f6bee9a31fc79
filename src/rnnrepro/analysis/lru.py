"""The LRU study's measures and tables: accuracy, convergence rate and statistical efficiency.

Losses are categorical cross entropy in nats per character, the paper's unit; bits per character are
the same loss divided by ln 2. Convergence rate is the number of epochs a run trained until its lowest
validation loss, read from the run's ``history.csv``. Every table carries the paper's values (from
``paper:`` in config/studies/lru.yaml) as ``paper_*`` columns.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from .results import in_order, paper_values, read_cells, samples_text, summarise_seeds
from .run_files import read_history

# cell id -> the paper's name, in the order of its convergence box plot
UNIT_LABELS = {"lstm": "LSTM", "gru": "GRU", "grid_lstm": "Grid LSTM", "rhn": "RHN",
               "ps_lru": "PS-LRU", "rg_lru": "RG-LRU", "lru": "LRU"}
# the paper's colours, so its figures and ours read alike
UNIT_COLOURS = {"lstm": "b", "gru": "g", "grid_lstm": "r", "rhn": "c", "ps_lru": "y", "rg_lru": "k", "lru": "m"}
MODEL_COMPARISON = ["lstm", "gru", "grid_lstm", "rhn", "lru"]
# colours of cells of your own added to the study (docs/custom_cells.md), in the order they appear
ADDED_COLOURS = ["tab:orange", "tab:brown", "tab:pink", "tab:olive", "tab:purple"]
VARIANT_COMPARISON = ["gru", "ps_lru", "rg_lru", "lru"]
ALL_DATASETS = "all"  # the convergence table's pooled rows (the paper pools its box plot)


def bits_per_char(loss_nats):
    return loss_nats / math.log(2)


def epochs_to_best(history: pd.DataFrame) -> int:
    """Epochs trained until the lowest validation loss (epochs count from 1; the first on a tie)."""
    if history.empty:
        raise ValueError("the history has no epochs: the run did not finish one")
    return int(history.loc[history["val_loss"].idxmin(), "epoch"])


def read_histories(metrics_files: list[str]) -> pd.DataFrame:
    """Every epoch of every run, with the run's dataset, model, unit, fraction and seed."""
    cells = read_cells(metrics_files)
    frames = []
    for path, cell in zip(metrics_files, cells.itertuples()):
        history = read_history(Path(path).parent)
        frames.append(history.assign(dataset=cell.dataset, model=cell.model, cell=cell.cell,
                                     fraction=cell.fraction, seed=cell.seed, capped=cell.capped))
    return pd.concat(frames, ignore_index=True)


def _ordered(table: pd.DataFrame, spec: dict, then: list[str] = ()) -> pd.DataFrame:
    """Rows in the artifact's dataset order (the pooled row first), then the paper's unit order."""
    return in_order(table, {"dataset": [ALL_DATASETS, *spec["datasets"]], "cell": list(UNIT_LABELS)}, then)


def added_units(frame: pd.DataFrame) -> list[str]:
    """Cells in a table or history that are none of the paper's units (cells of your own), in order."""
    return list(dict.fromkeys(cell for cell in frame["cell"] if cell not in UNIT_LABELS))


def unit_labels(frame: pd.DataFrame) -> dict[str, str]:
    """cell -> the name shown: the paper's name, or the model id of a cell of your own."""
    added = frame[~frame["cell"].isin(list(UNIT_LABELS))]
    return {**UNIT_LABELS, **dict(zip(added["cell"], added["model"]))}


def unit_colours(frame: pd.DataFrame) -> dict[str, str]:
    """cell -> its colour: the paper's, then ADDED_COLOURS for cells of your own."""
    added = added_units(frame)
    return {**UNIT_COLOURS, **{cell: ADDED_COLOURS[i % len(ADDED_COLOURS)] for i, cell in enumerate(added)}}


def _labelled(table: pd.DataFrame) -> pd.DataFrame:
    """The paper's name of each row's unit (a cell of your own: its model id), beside the model id."""
    table = table.copy()
    table.insert(table.columns.get_loc("model") + 1, "unit", table["cell"].map(UNIT_LABELS).fillna(table["model"]))
    return table


def accuracy_table(cells: pd.DataFrame, study: dict) -> pd.DataFrame:
    """One row per dataset and model: test and validation loss (mean over seeds), bits per character."""
    keys = ["dataset", "corpus", "model", "cell", "hidden_size", "params", "param_budget", "budget"]
    table = summarise_seeds(cells, keys, ["test_loss", "val_loss", "best_epoch"])
    table = table.merge(paper_values(study, "accuracy"), on=["dataset", "model"], how="left")
    table["test_bpc"] = bits_per_char(table["test_loss"])
    table["paper_test_bpc"] = bits_per_char(table["paper_test_loss"])
    return _ordered(_labelled(table), study["artifacts"]["accuracy"])


def convergence_runs(histories: pd.DataFrame) -> pd.DataFrame:
    """One row per run: epochs to its best validation loss, epochs trained in all, and whether its epoch
    cap stopped it (``capped``: then its epochs to the best are a lower bound, the run had not
    converged)."""
    keys = ["dataset", "model", "cell", "fraction", "seed"]
    return pd.DataFrame([{**dict(zip(keys, run)), "epochs_to_best": epochs_to_best(history), "epochs": len(history),
                          "capped": bool(history["capped"].iloc[-1]) if "capped" in history else False}
                         for run, history in histories.groupby(keys, sort=False)])


def convergence_table(runs: pd.DataFrame, study: dict) -> pd.DataFrame:
    """Epochs to the best validation loss per model: pooled over datasets and seeds (the paper's box
    plot, with its median and quartiles beside), then per dataset."""
    pooled = runs.assign(dataset=ALL_DATASETS)
    grouped = pd.concat([pooled, runs]).groupby(["dataset", "model", "cell"], sort=False)["epochs_to_best"]
    table = grouped.agg(runs="count", median_epochs="median", q1_epochs=lambda s: s.quantile(0.25),
                        q3_epochs=lambda s: s.quantile(0.75), min_epochs="min", max_epochs="max",
                        mean_epochs="mean", median_epochs_samples=samples_text).reset_index()
    table = table.merge(paper_values(study, "convergence"), on=["dataset", "model"], how="left")
    return _ordered(_labelled(table), study["artifacts"]["convergence"])


def stat_efficiency_table(cells: pd.DataFrame, study: dict) -> pd.DataFrame:
    """Test loss per dataset, model and share of the training split (mean over seeds)."""
    keys = ["dataset", "corpus", "model", "cell", "fraction", "train_tokens", "hidden_size", "params", "budget"]
    table = summarise_seeds(cells, keys, ["test_loss"])
    paper = paper_values(study, "stat_efficiency")
    paper = paper.melt(id_vars=["dataset", "model"], var_name="key", value_name="paper_test_loss")
    paper["fraction"] = paper.pop("key").str.removeprefix("paper_test_loss_").astype(int)
    table = table.merge(paper, on=["dataset", "model", "fraction"], how="left")
    table["test_bpc"] = bits_per_char(table["test_loss"])
    table["paper_test_bpc"] = bits_per_char(table["paper_test_loss"])
    return _ordered(_labelled(table), study["artifacts"]["stat_efficiency"], then=["fraction"])


def comparison_figures(table: pd.DataFrame, comparisons: dict[str, list[str]], budget: str) -> list[dict]:
    """What each comparison's figure draws: the units of ``comparisons`` (figure name -> units) that
    ``table`` has rows of, and a title naming exactly those (and the units left untrained). A figure
    whose units are all drawn by an earlier one draws nothing and says so (``same_as``) rather than
    repeat it."""
    names = unit_labels(table)
    trained = set(table.dropna(subset=["test_loss"])["cell"]) if "test_loss" in table else set(table["cell"])
    plans, drawn_before = [], []
    for figure, units in comparisons.items():
        drawn = [unit for unit in units if unit in trained]
        absent = [names.get(unit, unit) for unit in units if unit not in trained and unit in UNIT_LABELS]
        lead = "lru" if "lru" in drawn else (drawn[0] if drawn else None)
        others = [names.get(unit, unit) for unit in drawn if unit != lead]
        title = (f"{names[lead]} against {', '.join(others)}" if lead and others else
                 names[lead] if lead else "no unit trained")
        if absent:
            title += f" ({', '.join(absent)}: not trained at the {budget} budget)"
        same = next((earlier for earlier, units_before in drawn_before if set(drawn) <= set(units_before)), None)
        plans.append({"figure": figure, "units": [] if same else drawn, "title": title, "same_as": same,
                      "absent": absent, "trained": [names.get(unit, unit) for unit in drawn]})
        drawn_before.append((figure, drawn))
    return plans
