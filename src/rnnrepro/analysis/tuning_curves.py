"""The tuning artifact (rnnrepro.tuning): one row per tuning cell, the learning rate each model trains at.

Every compared model of a budget is trained once per learning-rate factor on the tuning seed; the factor
of the lowest validation loss is its rate. The table gives the whole curve, the rate chosen and whether
it lies at the edge of the grid (then the best rate may be beyond it), whether a run was stopped by its
epoch cap while its own rule had not stopped it (``capped``: its loss is what it reached by then, an upper
bound on what that rate would reach, so a slow low rate can lose the choice by its cap), and the figure
draws each model's validation loss against its learning rate.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .. import tuning
from .results import read_cells
from .run_files import read_run_config

COLUMNS = ["dataset", "corpus", "model", "budget", "fraction", "seed", "lr_factor", "lr", "val_loss", "epochs",
           "best_epoch", "capped", "diverged", "chosen", "at_edge_of_grid"]


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
                     "capped": bool(getattr(cell, "capped", False)),
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
    diverged runs crossed, runs stopped by their epoch cap marked with a triangle, a model chosen at the
    edge of its grid said so in the legend; one panel per dataset, its ticks at the rates tried."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    from .plotting import counted, data_label

    names = names or {}
    datasets = list(dict.fromkeys(table["dataset"]))
    fig, axes = plt.subplots(1, len(datasets), figsize=(6.8 * len(datasets), 4.8), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        part = table[table["dataset"] == dataset]
        for model, rows in part.groupby("model", sort=False):
            rows = rows.sort_values("lr")
            best = rows[rows["chosen"]]
            edge = " (at the edge of its grid)" if bool(rows["at_edge_of_grid"].any()) else ""
            chosen = f": lr {best['lr'].iloc[0]:g} chosen{edge}" if len(best) else ""
            line, = ax.plot(rows["lr"], rows["val_loss"], "o-", label=f"{names.get(model, model)}{chosen}")
            ax.plot(best["lr"], best["val_loss"], "o", markersize=13, markerfacecolor="none",
                    markeredgecolor=line.get_color(), markeredgewidth=2)
            failed = rows[rows["diverged"]]
            ax.plot(failed["lr"], failed["val_loss"], "x", color="black", markersize=9)
            capped = rows[rows["capped"]]
            ax.plot(capped["lr"], capped["val_loss"], "^", color="black", markersize=7, markerfacecolor="none")
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator(sorted(set(part["lr"]))))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        budget = ", ".join(sorted(set(part["budget"])))
        seeds = counted(part["seed"].nunique(), "tuning seed")
        ax.set(xlabel="learning rate (log scale; the rates tried)",
               ylabel="validation loss at the best epoch (nats)",
               title=f"{data_label(dataset, part['corpus'].iloc[0])}, {budget} budget: one run per rate, {seeds}\n"
                     f"(ringed: the rate chosen; x: the run diverged and ended there"
                     + ("; triangle: stopped by its epoch cap" if part["capped"].any() else "") + ")")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
