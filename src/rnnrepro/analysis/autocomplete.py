"""The nlstm study's tables and figure data: parameter counts of the published models, test results
per model and seed beside the published values, validation curves, and example predictions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .. import grid
from ..data.autocomplete import AUTOCOMPLETE_DATASETS, INPUT_SYMBOLS, load_classes, load_split
from ..train.autocomplete import batch_tensors, build_model
from ..train.checkpoint import load_weights
from .results import paper_values, samples_text, summarise_seeds
from .run_files import read_history, read_metrics

COUNTED = ("embedding", "recurrent", "dense", "total")


def models_table(study: dict, run_config: dict, artifact: str) -> pd.DataFrame:
    """Parameter counts of the artifact's models built at the paper budget, beside the published ones.

    The models are instantiated (not trained) with the published vocabulary sizes: the 28 input
    symbols and the classes the dataset's construction rule gives (2^14 words + <pad> + <unk>).
    """
    spec = study["artifacts"][artifact]
    paper_config = {**run_config, "budget": "paper"}
    rows = []
    for dataset in spec["datasets"]:
        classes = AUTOCOMPLETE_DATASETS[dataset].classes
        for model_id in spec["models"]:
            cfg = grid.resolve_cell(study, paper_config, grid.Cell(study["study"], dataset, model_id, 100, 0, "paper"))
            counts = build_model(cfg, classes).parameter_counts()
            a = cfg["architecture"]
            rows.append({
                "dataset": dataset, "model": model_id, "cell": a["cell"], "units": a["hidden_size"],
                "layers": a["layers"], "depth": a["cell_options"].get("depth", 1),
                "input_symbols": len(INPUT_SYMBOLS), "classes": classes,
                **{f"params_{part}": n for part, n in counts.items()},
                "params_total": sum(counts.values()),
            })
    table = pd.DataFrame(rows).merge(paper_values(study, artifact), on=["dataset", "model"], how="left")
    table["paper_params_total"] = table[[f"paper_params_{part}" for part in COUNTED[:-1]]].sum(axis=1)
    ours = table[[f"params_{part}" for part in COUNTED]].to_numpy()
    published = table[[f"paper_params_{part}" for part in COUNTED]].to_numpy()
    table["equal_to_paper"] = (ours == published).all(axis=1)
    return table


def test_table(cells: pd.DataFrame, study: dict, artifact: str) -> pd.DataFrame:
    """One row per model and seed: test cross entropy and accuracy, the model's mean and standard
    deviation over seeds (NaN for one seed), and the published values."""
    cells = cells.assign(test_accuracy_pct=100 * cells["test_accuracy"])
    keys = ["dataset", "corpus", "model"]
    values = ["test_cross_entropy", "test_accuracy_pct"]
    summary = summarise_seeds(cells, keys, values).rename(
        columns={**{v: f"{v}_mean" for v in values}, **{f"{v}_samples": f"{v}_mean_samples" for v in values}})
    per_seed = cells[[*keys, "seed", "cell", "budget", "params", "iterations", "train_sequences",
                      "seconds_per_1000_sequences", *values]]
    table = (per_seed.merge(summary, on=keys)
             .merge(paper_values(study, artifact), on=["dataset", "model"], how="left"))
    order = {model: i for i, model in enumerate(study["artifacts"][artifact]["models"])}
    return table.sort_values(["model", "seed"], key=lambda s: s.map(order) if s.name == "model" else s,
                             ignore_index=True)


def validation_curves(metrics_files: list[str]) -> pd.DataFrame:
    """Every cell's history.csv (one row per validation check), labelled with model and seed."""
    frames = []
    for path in map(Path, metrics_files):
        cell = read_metrics(path)
        history = read_history(path.parent)
        frames.append(history.assign(model=cell["model"], seed=cell["seed"], corpus=cell["corpus"]))
    return pd.concat(frames, ignore_index=True)


def early_area(curve: pd.DataFrame, share: float, length: float | None = None) -> float:
    """The mean validation loss over the first ``share`` of ``length`` training iterations (default: the
    curve's own): the area under the curve (trapezoids between checks, the curve cut where ``share``
    falls) divided by its length. Unlike the loss at one check it does not hinge on where the checks fall."""
    checks = curve.dropna(subset=["val_loss"]).sort_values("iteration")
    x, y = checks["iteration"].to_numpy(float), checks["val_loss"].to_numpy(float)
    end = share * (x.max() if length is None else length)
    inside = x < end
    xs, ys = list(x[inside]) + [end], list(y[inside]) + [float(np.interp(end, x, y))]
    if len(xs) < 2 or end <= xs[0]:
        return float(ys[-1])
    area = sum((b - a) * (fa + fb) / 2 for a, b, fa, fb in zip(xs, xs[1:], ys, ys[1:]))
    return area / (xs[-1] - xs[0])


def shortest_run(curves: pd.DataFrame) -> int:
    """The training iterations of the shortest run among ``curves`` (every model and seed): "at first"
    is read over a share of it, the same span of batches for every unit, where runs that patience
    stopped differ in length."""
    return int(curves.groupby(["model", "seed"])["iteration"].max().min())


def early_validation_loss(curves: pd.DataFrame, share: float = 1 / 8, area_share: float = 1 / 4) -> pd.DataFrame:
    """Each cell's validation loss at the first check at or past ``share`` of the shortest run's training
    iterations (:func:`shortest_run`), and its mean validation loss over the first ``area_share`` of
    them (:func:`early_area`, the scorecard's reading of "converges faster at first"), each with the
    mean over seeds per model."""
    rows, length = [], shortest_run(curves)
    for (model, seed), curve in curves.groupby(["model", "seed"], sort=False):
        early = curve[curve["iteration"] >= share * length].iloc[0]
        rows.append({"model": model, "seed": seed, "early_iteration": int(early["iteration"]),
                     "early_val_loss": float(early["val_loss"]),
                     "early_val_area": early_area(curve, area_share, length)})
    table = pd.DataFrame(rows).sort_values(["model", "seed"], kind="stable")
    for value in ("early_val_loss", "early_val_area"):
        by_model = table.groupby("model", sort=False)[value]
        table[f"{value}_mean"] = by_model.transform("mean")
        table[f"{value}_mean_samples"] = by_model.transform(samples_text)
    return table.sort_index()


@torch.no_grad()
def example_predictions(model_file: Path | str, observations: int, max_chars: int) -> list[dict]:
    """The top prediction under each character of the first test observations of a cell's data.

    Returns one dict per observation: ``text`` (its first ``max_chars`` characters), ``target`` and
    ``predicted`` (the word class name at each character).
    """
    saved = load_weights(Path(model_file), "cpu", "a cell whose predictions this analysis shows")
    cfg = saved["config"]
    folder = Path(cfg["data"]["dir"])
    classes = load_classes(folder)
    model = build_model(cfg, len(classes))
    model.load_state_dict(saved["state_dict"])
    model.eval()
    split = load_split(folder / "test.txt", classes)
    rows = np.arange(min(observations, len(split.lengths)))
    inputs, targets = batch_tensors(split, rows, torch.device("cpu"))
    predicted = model(inputs).argmax(-1)
    examples = []
    for column, row in enumerate(rows):
        length = min(int(split.lengths[row]), max_chars)
        examples.append({
            "text": split.lines[row][:length],
            "target": [classes[i] for i in targets[:length, column].tolist()],
            "predicted": [classes[i] for i in predicted[:length, column].tolist()],
        })
    return examples


#: the claim read "at first", and the share of training it averages over (early_validation_loss)
EARLY_CLAIM, EARLY_SHARE = "nlstm_converges_faster_at_first", 1 / 4


def early_marks(table: pd.DataFrame, curves: pd.DataFrame, study: dict) -> pd.DataFrame:
    """What the convergence figure marks per model: the value the scorecard reads "at first" from (the
    column its claim names, a mean over seeds) drawn as a level from the first check to the end of the
    share of the shortest run it averages over (``start``, the seeds' mean, and ``end``, in iterations)."""
    claim = next(c for c in study["claims"] if c["id"] == EARLY_CLAIM)
    rows, end = [], EARLY_SHARE * shortest_run(curves.dropna(subset=["val_loss"]))
    for model, runs in curves.dropna(subset=["val_loss"]).groupby("model", sort=False):
        spans = runs.groupby("seed")["iteration"].agg(["min", "max"])
        rows.append({"model": model, "column": claim["value"], "start": float(spans["min"].mean()),
                     "end": float(end),
                     "value": float(table.loc[table["model"] == model, claim["value"]].iloc[0])})
    return pd.DataFrame(rows)
