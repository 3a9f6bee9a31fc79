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
# # LRU: convergence rate
#
# Ahuja & Morency (AAAI 2018). The number of epochs each run trained until its lowest validation
# loss (read from its `history.csv`; epochs count from 1), for every unit at 24 M parameters over the
# datasets and seeds of the accuracy runs. The paper shows one box per unit, pooled over all its
# runs; the table gives the pooled rows (`dataset` = `all`, with the paper's median and quartiles
# read off its box plot) and one row per dataset. Early stopping (3 epochs without improvement) ends
# the runs, so a run's epoch count is at least its epochs-to-best plus 3 unless it hit the cap.

# %% tags=["parameters"]
study = "lru"
artifact = "convergence"
metrics_files = []
tables = ["results/tables/lru_convergence.csv"]
figures = ["results/figures/lru_convergence.png"]

# %%
from rnnrepro.analysis import lru
from rnnrepro.analysis.notebook import save, save_figure
from rnnrepro.grid import load_study

study_config = load_study(study)
runs = lru.convergence_runs(lru.read_histories(metrics_files))
table = lru.convergence_table(runs, study_config)
assert (table["runs"] >= 1).all()
save(table, tables[0])
table[["dataset", "unit", "runs", "median_epochs", "q1_epochs", "q3_epochs", "min_epochs", "max_epochs",
       "paper_median_epochs", "paper_q1_epochs", "paper_q3_epochs"]]

# %% [markdown]
# Every run (a point, coloured by dataset) and each unit's median over them (a bar); an open triangle
# is a run its epoch cap stopped, whose epochs to the best are only a lower bound (it had not
# converged). Black: the paper's median (diamond) and quartiles (line), read off its box plot.

# %%
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from rnnrepro.analysis.plotting import counted

# the paper's units, then any cell of your own (docs/custom_cells.md)
units = [u for u in lru.UNIT_LABELS if u in set(runs["cell"])] + lru.added_units(runs)
names = lru.unit_labels(runs)
datasets = list(dict.fromkeys(runs["dataset"]))
colours = dict(zip(datasets, sns.color_palette("deep", n_colors=len(datasets))))
paper = table[table["dataset"] == lru.ALL_DATASETS].set_index("cell")
rng = np.random.default_rng(0)
fig, ax = plt.subplots(figsize=(0.95 * len(units) + 3.5, 4.2))
for x, unit in enumerate(units):
    mine = runs[runs["cell"] == unit]
    for run in mine.itertuples():
        spot = x - 0.15 + rng.uniform(-0.07, 0.07)
        if run.capped:
            ax.scatter(spot, run.epochs_to_best, marker="^", s=40, facecolor="white", edgecolor=colours[run.dataset], zorder=3)
        else:
            ax.scatter(spot, run.epochs_to_best, s=20, color=colours[run.dataset], zorder=3)
    median = mine["epochs_to_best"].median()
    ax.plot([x - 0.3, x], [median, median], color="0.2", linewidth=2, zorder=4)
    if unit in paper.index and paper.loc[unit, "paper_median_epochs"] == paper.loc[unit, "paper_median_epochs"]:
        ax.plot([x + 0.2, x + 0.2], [paper.loc[unit, "paper_q1_epochs"], paper.loc[unit, "paper_q3_epochs"]],
                color="black", linewidth=1.2)
        ax.scatter(x + 0.2, paper.loc[unit, "paper_median_epochs"], marker="D", s=30, facecolor="none",
                   edgecolor="black", zorder=5)
ax.set_xticks(range(len(units)), [names[u] for u in units])
ax.set_ylim(0, None)
ax.set_ylabel("epochs to the best validation loss")
ax.grid(axis="y", color="0.92")
ax.set_axisbelow(True)
handles = [plt.Line2D([], [], marker="o", color=colours[d], linestyle="none", label=f"ours: a run on {d}")
           for d in datasets]
handles += [plt.Line2D([], [], color="0.2", linewidth=2, label="ours: median"),
            plt.Line2D([], [], marker="D", color="black", markerfacecolor="none", linestyle="-",
                       label="paper: median, quartiles")]
if runs["capped"].any():
    handles.append(plt.Line2D([], [], marker="^", color="0.3", markerfacecolor="white", linestyle="none",
                              label="stopped by its epoch cap: at least this"))
ax.legend(handles=handles, fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
ax.set_title(f"Convergence rate: {counted(runs['seed'].nunique(), 'seed')} x {counted(len(datasets), 'dataset')} "
             "per unit")
save_figure(fig, figures[0])
