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
# # LRU: statistical efficiency
#
# Ahuja & Morency (AAAI 2018). Each unit, at 10 M parameters, trained independently on the first
# 20, 40, 60, 80 and 100 % of the training split (nested prefixes, `data/processed/*/train.fraction*`)
# and evaluated on the full test split, on PTB and text8 as in the paper. Solid lines are ours (mean
# over seeds), dashed lines the paper's (read off the authors' figures). The model comparison and the
# LRU-variant comparison are separate figures, as in the paper.
#
# The dashed lines are not like for like: the authors' tooling cut the first p % of the whole file and
# split that prefix 90/5/5, so each of their fractions was most likely tested on its own prefix's last
# 5 % (see `paper: stat_efficiency` in config/studies/lru.yaml). Compare the ranking of the units.

# %% tags=["parameters"]
study = "lru"
artifact = "stat_efficiency"
metrics_files = []
tables = ["results/tables/lru_stat_efficiency.csv"]
figures = ["results/figures/lru_stat_efficiency.png", "results/figures/lru_variant_stat_efficiency.png"]

# %%
import matplotlib.pyplot as plt

from rnnrepro.analysis import lru
from rnnrepro.analysis.notebook import save, save_figure, setup

study_config, cells = setup(study, metrics_files)
table = lru.stat_efficiency_table(cells, study_config)
save(table, tables[0], complete=["test_loss"])
table[["dataset", "unit", "fraction", "train_tokens", "seeds", "test_loss", "test_bpc", "paper_test_loss"]]

# %%
datasets = [d for d in study_config["artifacts"][artifact]["datasets"] if d in set(table["dataset"])]
names, colours = lru.unit_labels(table), lru.unit_colours(table)  # with any cell of your own


def plot_efficiency(units: list[str], path: str, title: str) -> None:
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.8 * len(datasets), 3.6), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        for unit in units:
            rows = table[(table["dataset"] == dataset) & (table["cell"] == unit)]
            if rows.empty:
                continue
            colour = colours[unit]
            ax.plot(rows["fraction"], rows["test_loss"], "o-", color=colour, label=names[unit])
            ax.plot(rows["fraction"], rows["paper_test_loss"], "--", color=colour, alpha=0.6)
        ax.set_title(f"{dataset} (corpus {table.loc[table['dataset'] == dataset, 'corpus'].iloc[0]})")
        ax.set_xlabel("% of the training split")
        ax.set_ylabel("test loss (nats/char)")
        ax.set_xticks([20, 40, 60, 80, 100])
    axes[0][0].legend(fontsize=8, title="ours — / paper - -", title_fontsize=8)
    fig.suptitle(title, y=1.02)
    save_figure(fig, path)


# a cell of your own (docs/custom_cells.md) joins the model comparison
plot_efficiency(lru.MODEL_COMPARISON + lru.added_units(table), figures[0],
                "Statistical efficiency: LRU against LSTM, GRU, Grid LSTM, RHN")
plot_efficiency(lru.VARIANT_COMPARISON, figures[1], "Statistical efficiency: GRU, PS-LRU, RG-LRU, LRU")
