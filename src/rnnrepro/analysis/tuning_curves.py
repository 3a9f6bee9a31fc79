"""The tuning artifact (rnnrepro.tuning): one row per tuning cell, the learning rate each model trains at.

Every compared model of a budget is trained once per learning-rate factor on the tuning seed; the factor
of the lowest validation loss is its rate. The table gives the whole curve, the rate chosen and whether
it lies at the edge of the grid (then the best rate may be beyond it), and the figure draws each model's
validation loss against its learning rate.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .. import tuning
from .results import read_cells
from .run_files import read_run_config

COLUMNS = ["dataset", "corpus", "model", "budget", "fraction", "seed", "lr_factor", "lr", "val_loss", "epochs",
           "best_epoch", "diverged", "chosen", "at_edge_of_grid"]


def read_tuning_cells(metrics_files: list[str]) -> pd.DataFrame:
    """The tuning cells (rnnrepro.analysis.results.read_cells) with the learning rate each trained at."""
    cells = read_cells(metrics_files)
    cells["lr"] = [read_run_config(Path(path).parent)["recipe"]["lr"] for path in metrics_files]
    return cells


def tuning_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per tuning cell (:func:`read_tuning_cells`), with the factor each tuned model is trained at
    marked ``chosen``."""
    rows = []
    for cell in cells.itertuples():
        model, factor = tuning.parse_variant(cell.model)
        loss = tuning.validation_loss(cell._asdict())
        rows.append({"dataset": cell.dataset, "corpus": cell.corpus, "model": model, "budget": cell.budget,
                     "fraction": cell.fraction, "seed": cell.seed, "lr_factor": factor,
                     "lr": cell.lr, "val_loss": loss, "epochs": cell.epochs, "best_epoch": cell.best_epoch,
                     "diverged": bool(isinstance(getattr(cell, "diverged", None), str))})
    table = pd.DataFrame(rows, columns=COLUMNS[:-2])
    chosen, edge = [], []
    for _, group in table.groupby(["dataset", "model", "fraction"], sort=False):
        factor = tuning.chosen_factor(group.rename(columns={"lr_factor": "factor"}).to_dict("records"))
        chosen += list(group.index[group["lr_factor"] == factor])
        if factor in (group["lr_factor"].min(), group["lr_factor"].max()):
            edge += list(group.index)
    table["chosen"] = table.index.isin(chosen)
    table["at_edge_of_grid"] = table.index.isin(edge)
    return table.sort_values(["dataset", "model", "lr_factor"], kind="stable").reset_index(drop=True)


def tuning_figure(table: pd.DataFrame, names: dict[str, str] | None = None):
    """Validation loss (nats) against the learning rate, one line per tuned model, the chosen rate ringed,
    diverged runs crossed; one panel per dataset."""
    import matplotlib.pyplot as plt

    names = names or {}
    datasets = list(dict.fromkeys(table["dataset"]))
    fig, axes = plt.subplots(1, len(datasets), figsize=(6.5 * len(datasets), 4.6), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        part = table[table["dataset"] == dataset]
        for model, rows in part.groupby("model", sort=False):
            rows = rows.sort_values("lr")
            line, = ax.plot(rows["lr"], rows["val_loss"], "o-", label=names.get(model, model))
            best = rows[rows["chosen"]]
            ax.plot(best["lr"], best["val_loss"], "o", markersize=13, markerfacecolor="none",
                    markeredgecolor=line.get_color(), markeredgewidth=2)
            failed = rows[rows["diverged"]]
            ax.plot(failed["lr"], failed["val_loss"], "x", color="black", markersize=9)
        ax.set_xscale("log")
        budget = ", ".join(sorted(set(part["budget"])))
        ax.set(xlabel="learning rate (log scale)", ylabel="validation loss at the best epoch (nats)",
               title=f"{dataset}, {budget} budget: one tuning run per rate\n(ringed: the rate chosen; "
                     f"x: the run diverged and ended there)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
