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
import matplotlib.pyplot as plt
import seaborn as sns

from rnnrepro.analysis import lru
from rnnrepro.analysis.notebook import save, save_figure
from rnnrepro.configuration import load_study

study_config = load_study(study)
runs = lru.convergence_runs(lru.read_histories(metrics_files))
table = lru.convergence_table(runs, study_config)
assert (table["runs"] >= 1).all()
save(table, tables[0])
table[["dataset", "unit", "runs", "median_epochs", "q1_epochs", "q3_epochs", "min_epochs", "max_epochs",
       "paper_median_epochs", "paper_q1_epochs", "paper_q3_epochs"]]

# %% [markdown]
# Box plot over runs (datasets x seeds) per unit; points are single runs coloured by dataset, black
# diamonds the paper's medians.

# %%
# the paper's units, then any cell of your own (docs/custom_cells.md)
units = [u for u in lru.UNIT_LABELS if u in set(runs["cell"])] + lru.added_units(runs)
names, colours = lru.unit_labels(runs), lru.unit_colours(runs)
labels = [names[u] for u in units]
shown = runs.assign(unit=runs["cell"].map(names))
fig, ax = plt.subplots(figsize=(8, 4.5))
sns.boxplot(data=shown, x="unit", y="epochs_to_best", order=labels, hue="unit", hue_order=labels,
            palette=[colours[u] for u in units], boxprops={"alpha": 0.45}, showfliers=False, ax=ax)
sns.stripplot(data=shown, x="unit", y="epochs_to_best", order=labels, hue="dataset", dodge=False,
              size=4, jitter=0.2, ax=ax)
paper = table[table["dataset"] == lru.ALL_DATASETS].set_index("unit")["paper_median_epochs"]
ax.scatter(labels, [paper.get(label) for label in labels], marker="D", color="black", zorder=5,
           label="paper median")
ax.set_xlabel("")
ax.set_ylabel("epochs to the best validation loss")
ax.set_title(f"Convergence rate ({runs['seed'].nunique()} seeds x {runs['dataset'].nunique()} datasets per unit)")
ax.legend(fontsize=8, loc="upper right")
save_figure(fig, figures[0])
