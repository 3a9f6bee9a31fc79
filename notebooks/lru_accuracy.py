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
# # LRU: accuracy, and validation loss against epochs
#
# Ahuja & Morency (AAAI 2018). Character-level language models with 24 M parameters on PTB, War and
# Peace, enwik8 and text8: the test categorical cross entropy (nats per character, and bits per
# character) of the best-validation epoch, mean over seeds, beside the paper's values (read off the
# authors' figures, see `config/studies/lru.yaml`). The curves are the validation loss after every
# epoch; the model comparison and the LRU-variant comparison are separate figures, as in the paper.
# Under the smoke budget the models are tiny and every dataset is the same synthetic stand-in
# (column `corpus`): only the shape of the table and figures is comparable, not the numbers.

# %% tags=["parameters"]
study = "lru"
artifact = "accuracy"
metrics_files = []
tables = ["results/tables/lru_accuracy.csv"]
figures = ["results/figures/lru_curves.png", "results/figures/lru_variant_curves.png"]

# %%
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import seaborn as sns
from matplotlib.ticker import MaxNLocator

from rnnrepro.analysis import lru
from rnnrepro.analysis.results import read_cells
from rnnrepro.configuration import load_study

study_config = load_study(study)
table = lru.accuracy_table(read_cells(metrics_files), study_config)
assert table["test_loss"].notna().all(), "a cell has no test loss"
table.to_csv(tables[0], index=False)
table[["dataset", "unit", "hidden_size", "params", "seeds", "test_loss", "test_loss_std", "test_bpc",
       "paper_test_loss", "paper_test_bpc"]]

# %% [markdown]
# Validation loss after every epoch (mean over seeds, band: their range), one panel per dataset.

# %%
histories = lru.read_histories(metrics_files)
datasets = [d for d in study_config["artifacts"][artifact]["datasets"] if d in set(histories["dataset"])]


def plot_curves(units: list[str], path: str, title: str) -> None:
    shown = histories[histories["cell"].isin(units)].assign(unit=lambda h: h["cell"].map(lru.UNIT_LABELS))
    grid = sns.relplot(data=shown, kind="line", x="epoch", y="val_loss", hue="unit", col="dataset",
                       col_order=datasets, hue_order=[lru.UNIT_LABELS[u] for u in units],
                       palette=[lru.UNIT_COLOURS[u] for u in units], errorbar=("pi", 100),
                       facet_kws={"sharey": False, "sharex": False}, height=3.2, aspect=1.2)
    grid.set_axis_labels("epoch", "validation loss (nats/char)")
    for ax in grid.axes.flat:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    grid.figure.suptitle(title, y=1.03)
    grid.figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.show()


plot_curves(lru.MODEL_COMPARISON, figures[0], "LRU against LSTM, GRU, Grid LSTM and RHN (equal parameters)")
plot_curves(lru.VARIANT_COMPARISON, figures[1], "LRU variants: GRU, PS-LRU, RG-LRU, LRU (equal parameters)")
