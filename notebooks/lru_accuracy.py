# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # LRU: accuracy, and the loss after every epoch
#
# Ahuja & Morency (AAAI 2018). Character-level language models with 24 M parameters on PTB, War and
# Peace, enwik8 and text8: the test categorical cross entropy (nats per character, and bits per
# character) of the best-validation epoch, mean over seeds, beside the paper's values (read off the
# authors' figures, see `config/studies/lru.yaml`). The curves are the validation and the test loss
# after every epoch, beside each unit's test loss against GRU's (ours and the paper's); the model
# comparison and the LRU-variant comparison are separate figures, as in the paper.
# Under the smoke budget the models are tiny and every dataset is the same synthetic stand-in
# (column `corpus`): only the shape of the table and figures is comparable, not the numbers.

# %% tags=["parameters"]
study = "lru"
artifact = "accuracy"
metrics_files = []
tables = ["results/tables/lru_accuracy.csv"]
figures = ["results/figures/lru_curves.png", "results/figures/lru_variant_curves.png"]

# %%
from rnnrepro.analysis import lru
from rnnrepro.analysis.notebook import save, save_figure, setup

study_config, cells = setup(study, metrics_files)
table = lru.accuracy_table(cells, study_config)
save(table, tables[0], complete=["test_loss"])
table[["dataset", "unit", "hidden_size", "params", "seeds", "test_loss", "test_loss_std", "test_bpc",
       "paper_test_loss", "paper_test_bpc"]]

# %% [markdown]
# One row per dataset. Left and middle: validation loss (what early stopping and the best epoch go by)
# and test loss after every epoch (the paper's curves plot the test loss after every epoch, as the
# authors' char.py records it): the mean over seeds (line) and their range (band) while every seed
# runs (a bar where it ends because a seed stopped), then each longer run alone; a square ends a run that
# stopped by itself, an open triangle one its epoch cap stopped. The first epochs run off the top, so that the ends can be told apart. Right: each
# unit's test loss (at its best validation epoch) against GRU's, in percent, ours per seed beside the
# paper's (read off its figures; only beside runs on the real dataset): the comparisons the claims make,
# on one scale whatever the models' sizes.

# %%
import matplotlib.pyplot as plt

from matplotlib.ticker import MaxNLocator

from rnnrepro.analysis.plotting import (compare_handles, counted, data_label, end_marker_legend, mean_and_band, paper_rows,
                                        relative_change, seed_rows, tidy_rows_axis)

histories = lru.read_histories(metrics_files)
datasets = [d for d in study_config["artifacts"][artifact]["datasets"] if d in set(histories["dataset"])]
splits = {"val_loss": "validation loss", "test_loss": "test loss"}
labels, colours = lru.unit_labels(table), lru.unit_colours(table)  # with any cell of your own


def plot_curves(units: list[str], path: str, title: str) -> None:
    units = [u for u in units if u in set(histories["cell"])]
    fig, axes = plt.subplots(len(datasets), 3, figsize=(15, 4.2 * len(datasets)), squeeze=False)
    for row_axes, dataset in zip(axes, datasets):
        runs = histories[(histories["dataset"] == dataset) & histories["cell"].isin(units)]
        corpus = table.loc[table["dataset"] == dataset, "corpus"].iloc[0]
        for ax, (column, split) in zip(row_axes, splits.items()):
            if column not in runs:
                ax.set_axis_off()
                continue
            for unit in units:
                mean_and_band(ax, runs[runs["cell"] == unit], "epoch", column, colours[unit], labels[unit])
            # the top: the highest loss any unit has a fifth of the way into its run, so the ends are apart
            fifth = runs.groupby(["cell", "seed"])["epoch"].transform(lambda e: e.max() // 5 + 1)
            top = runs.loc[runs["epoch"] == fifth, column].max()
            bottom = runs[column].min()
            ax.set_ylim(bottom - 0.05 * (top - bottom), top)
            ax.set(xlabel="epoch", ylabel=f"{split} (nats/char)", title=f"{data_label(dataset, corpus)}:\n{split}")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(color="0.93")
        rows = table[(table["dataset"] == dataset) & table["cell"].isin(units)]
        order = [labels[u] for u in units if u in set(rows["cell"])]
        seeds = cells[(cells["dataset"] == dataset) & cells["cell"].isin(units)].assign(
            row=lambda c: c["cell"].map(labels), value=lambda c: c["test_loss"])
        # the paper's value only beside runs on the real dataset (not a smoke stand-in)
        paper = rows.set_index(rows["cell"].map(labels))["paper_test_loss"].where(rows["corpus"].to_numpy() == dataset)
        baseline = "gru" if "gru" in units else units[0]
        ours_rel, paper_rel = relative_change(seeds, paper, labels[baseline])
        for unit in units:
            seed_rows(row_axes[2], ours_rel[ours_rel["row"] == labels[unit]], order, colour=colours[unit])
        paper_rows(row_axes[2], paper_rel, order, offset=0.22)
        row_axes[2].axhline(0, color="0.6", linewidth=0.8, zorder=1)
        row_axes[2].set(ylabel=f"test loss against {labels[baseline]} (%)",
                        title=f"each unit against {labels[baseline]}:\nours and the paper's" if paper.notna().any()
                        else f"each unit against {labels[baseline]}:\nours (no paper value for this data)")
        tidy_rows_axis(row_axes[2])
    shown_paper = table["paper_test_loss"].notna() & (table["corpus"] == table["dataset"])
    handles = axes[0][0].get_legend_handles_labels()[0] + end_marker_legend(mean_ends=bool(
        histories.groupby(["dataset", "cell", "seed"])["epoch"].max().groupby(["dataset", "cell"]).nunique().gt(1).any())) + compare_handles(
        capped=bool(cells["capped"].any()), paper=bool(shown_paper.any()), colour="0.3")
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=9,
               bbox_to_anchor=(0.5, -0.01))
    fig.suptitle(f"{title} ({table['budget'].iloc[0]} budget, {counted(cells['seed'].nunique(), 'seed')})")
    fig.tight_layout(rect=(0, 0.09 / len(datasets), 1, 1))
    save_figure(fig, path)


# a cell of your own (docs/custom_cells.md) joins the model comparison
plot_curves(lru.MODEL_COMPARISON + lru.added_units(table), figures[0],
            "LRU against LSTM, GRU, Grid LSTM and RHN (equal parameters)")
plot_curves(lru.VARIANT_COMPARISON, figures[1], "LRU variants: GRU, PS-LRU, RG-LRU, LRU (equal parameters)")
