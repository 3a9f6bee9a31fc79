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
from pathlib import Path

from rnnrepro.analysis import lru
from rnnrepro.analysis.notebook import save, save_figure, setup
from rnnrepro.analysis.plotting import counted

study_config, cells = setup(study, metrics_files)
table = lru.stat_efficiency_table(cells, study_config)
save(table, tables[0], complete=["test_loss"])
table[["dataset", "unit", "fraction", "train_tokens", "seeds", "test_loss", "test_bpc", "paper_test_loss"]]

# %% [markdown]
# Test loss against the share of the training split. Ours: every seed (a point; open: a run its epoch
# cap stopped) and the mean over seeds (solid line); the paper's, read off its figures (dashed, open
# diamonds), at the shares it trained. A budget may train other shares than the paper's, and smaller
# models: the claims compare units at one share, so compare the order of the lines, not their heights.

# %%
import matplotlib.pyplot as plt

from rnnrepro.analysis.plotting import dataset_words, text_figure

datasets = [d for d in study_config["artifacts"][artifact]["datasets"] if d in set(table["dataset"])]
names, colours = lru.unit_labels(table), lru.unit_colours(table)  # with any cell of your own
budget = table["budget"].iloc[0]
seeds = cells.groupby(["dataset", "model", "fraction"])["seed"].nunique()
count = counted(seeds.min(), "seed") if seeds.min() == seeds.max() else f"{seeds.min()}-{seeds.max()} seeds"


def plot_efficiency(units: list[str], path: str, title: str) -> None:
    fig, axes = plt.subplots(1, len(datasets), figsize=(5.6 * len(datasets) + 2.4, 4.2), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        part = table[table["dataset"] == dataset]
        for unit in units:
            rows = part[part["cell"] == unit].sort_values("fraction")
            if rows.empty:
                continue
            colour = colours[unit]
            runs = cells[(cells["dataset"] == dataset) & (cells["cell"] == unit)]
            ax.scatter(runs.loc[~runs["capped"], "fraction"], runs.loc[~runs["capped"], "test_loss"], s=14,
                       color=colour, zorder=3)
            ax.scatter(runs.loc[runs["capped"], "fraction"], runs.loc[runs["capped"], "test_loss"], s=18,
                       facecolor="white", edgecolor=colour, zorder=3)
            ax.plot(rows["fraction"], rows["test_loss"], "-", color=colour, label=names[unit])
            paper = rows.dropna(subset=["paper_test_loss"])
            ax.plot(paper["fraction"], paper["paper_test_loss"], "--", marker="D", markerfacecolor="none",
                    markersize=5, color=colour, alpha=0.7)
        corpus = part["corpus"].iloc[0]
        ax.set_title(dataset_words(dataset) if corpus == dataset else
                     f"{dataset_words(dataset)} (stand-in corpus {corpus})")
        ax.set_xlabel("% of the training split")
        ax.set_ylabel("test loss (nats/char)")
        ax.set_xticks(sorted(set(part["fraction"]) | set(part.dropna(subset=["paper_test_loss"])["fraction"])))
        ax.grid(color="0.93")
    one_seed = seeds.max() == 1
    handles = axes[0][0].get_legend_handles_labels()[0] + [
        plt.Line2D([], [], color="0.3", linestyle="-", marker="o", markersize=4,
                   label="ours: the one seed" if one_seed else "ours: each seed (dots), their mean (line)")]
    if table["paper_test_loss"].notna().any():
        handles.append(plt.Line2D([], [], color="0.3", linestyle="--", marker="D", markerfacecolor="none",
                                  markersize=4, label="the paper"))
    else:
        handles.append(plt.Line2D([], [], linestyle="none", label="(the paper: none at these shares)"))
    if cells["capped"].any():
        handles.append(plt.Line2D([], [], marker="o", color="0.3", markerfacecolor="white", linestyle="none",
                                  label="open: stopped by its epoch cap"))
    axes[0][-1].legend(handles=handles, fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.suptitle(f"Statistical efficiency: {title}\n({budget} budget, {count} per point)")
    fig.tight_layout()
    save_figure(fig, path)


# a cell of your own (docs/custom_cells.md) joins the model comparison; a comparison whose trained units
# the first figure already draws says so instead of drawing it again
plans = lru.comparison_figures(table, {figures[0]: lru.MODEL_COMPARISON + lru.added_units(table),
                                       figures[1]: lru.VARIANT_COMPARISON}, budget)
for plan in plans:
    if plan["same_as"]:
        save_figure(text_figure(
            f"Statistical efficiency of the LRU variants against GRU: at the {budget} budget only "
            f"{' and '.join(plan['trained'])} are trained, which the model comparison figure above "
            f"({Path(plan['same_as']).name.split('.')[0]}) draws"
            + (f"; {', '.join(plan['absent'])} are not trained at this budget." if plan["absent"] else ".")),
            plan["figure"])
    else:
        plot_efficiency(plan["units"], plan["figure"], plan["title"])
