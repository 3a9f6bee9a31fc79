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
# after every epoch; the model comparison and the LRU-variant comparison are separate figures, as in the paper.
# Under the smoke budget the models are tiny and every dataset is the same synthetic stand-in
# (column `corpus`): only the shape of the table and figures is comparable, not the numbers.

# %% tags=["parameters"]
study = "lru"
artifact = "accuracy"
metrics_files = []
tables = ["results/tables/lru_accuracy.csv"]
figures = ["results/figures/lru_curves.png", "results/figures/lru_variant_curves.png"]

# %%
import seaborn as sns
from matplotlib.ticker import MaxNLocator

from rnnrepro.analysis import lru
from rnnrepro.analysis.notebook import save, save_figure, setup

study_config, cells = setup(study, metrics_files)
table = lru.accuracy_table(cells, study_config)
save(table, tables[0], complete=["test_loss"])
table[["dataset", "unit", "hidden_size", "params", "seeds", "test_loss", "test_loss_std", "test_bpc",
       "paper_test_loss", "paper_test_bpc"]]

# %% [markdown]
# Loss after every epoch (mean over seeds, band: their range), one column per dataset: the validation
# loss (what early stopping and the best epoch go by) and the test loss (the paper's curves plot the
# test loss after every epoch, as the authors' char.py records it). Dashed: the paper's test loss at
# the best epoch, read off its figures (only beside runs on the real dataset).

# %%
histories = lru.read_histories(metrics_files)
datasets = [d for d in study_config["artifacts"][artifact]["datasets"] if d in set(histories["dataset"])]
splits = {"val_loss": "validation", "test_loss": "test"}
long = (histories.melt(id_vars=["dataset", "cell", "seed", "epoch"],
                       value_vars=[c for c in splits if c in histories], var_name="split", value_name="loss")
        .dropna(subset=["loss"]).assign(split=lambda h: h["split"].map(splits)))


labels, colours = lru.unit_labels(table), lru.unit_colours(table)  # with any cell of your own


def plot_curves(units: list[str], path: str, title: str) -> None:
    shown = long[long["cell"].isin(units)].assign(unit=lambda h: h["cell"].map(labels))
    rows = [s for s in splits.values() if s in set(shown["split"])]
    grid = sns.relplot(data=shown, kind="line", x="epoch", y="loss", hue="unit", col="dataset", row="split",
                       col_order=datasets, row_order=rows, hue_order=[labels[u] for u in units],
                       palette=[colours[u] for u in units], errorbar=("pi", 100),
                       facet_kws={"sharey": False, "sharex": False}, height=3.2, aspect=1.2)
    grid.set_axis_labels("epoch", "loss (nats/char)")
    for (row, dataset), ax in grid.axes_dict.items():
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if row != "test":
            continue
        # the paper's value only beside runs on the real dataset (not a smoke stand-in)
        real = table[(table["dataset"] == dataset) & (table["corpus"] == dataset) & table["cell"].isin(units)]
        for paper in real.itertuples():
            if paper.paper_test_loss == paper.paper_test_loss:  # not NaN
                ax.axhline(paper.paper_test_loss, color=colours[paper.cell], linestyle="--", linewidth=0.8)
    grid.figure.suptitle(title + " -- dashed: the paper's test loss (real data only)", y=1.02)
    save_figure(grid.figure, path)


# a cell of your own (docs/custom_cells.md) joins the model comparison
plot_curves(lru.MODEL_COMPARISON + lru.added_units(table), figures[0],
            "LRU against LSTM, GRU, Grid LSTM and RHN (equal parameters)")
plot_curves(lru.VARIANT_COMPARISON, figures[1], "LRU variants: GRU, PS-LRU, RG-LRU, LRU (equal parameters)")
