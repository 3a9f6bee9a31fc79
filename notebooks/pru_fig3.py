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
# # PRU, Figure 3: next-token entropies on the PTB validation set
#
# Mehta et al., EMNLP 2018: histogram of the entropy (nats) of the next-token distribution of the
# standard-dropout PRU (g=4, K=2, M=1400) and LSTM (M=1000), bins of 0.23; the paper's means are
# 3.80 (PRU) and 3.93 (LSTM) over "3,687 contexts". **How the contexts are chosen** (the paper does
# not say): the validation split is read as 20 parallel streams with the state carried, dropout off,
# the best-validation weights; every position is a context, so PTB gives 3,687 steps × 20 streams =
# 73,740 entropies. The paper's 3,687 is one step count of that batchification, so the table also
# gives the mean over the first stream alone (`mean_entropy_first_stream`, 3,687 contexts). The
# histogram shows every context. Under the smoke budget the models and the corpus are tiny and
# synthetic: only the figure's shape is comparable.

# %% tags=["parameters"]
study = "pru"
artifact = "fig3"
metrics_files = []
tables = ["results/tables/pru_fig3.csv"]
figures = ["results/figures/pru_fig3.png"]

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from rnnrepro.analysis.notebook import save, save_figure
from rnnrepro.grid import load_study
from rnnrepro.evaluation.results import entropy_table, read_evaluations

BIN_WIDTH = 0.23  # the paper's bins
study_config = load_study(study)
(evaluation,) = study_config["artifacts"][artifact]["evaluations"]
evals = read_evaluations(metrics_files, evaluation)
table = entropy_table(evals, study_config, artifact)
save(table, tables[0], complete=["mean_entropy"])
table

# %% [markdown]
# Left: the histogram of every context's entropy, all seeds together, one outline per model; dashed:
# our mean, dotted: the paper's. Right: each seed's mean entropy against the LSTM's (mean over its
# seeds), in percent, beside the paper's: the claim's comparison on one scale (a smaller budget's
# models are far less sure of the next word than the paper's). Models are named by the paper's sizes.

# %%
import seaborn as sns

from rnnrepro.analysis.plotting import compare_legend, data_label, model_names, paper_rows, relative_change, seed_rows, tidy_rows_axis

names = model_names(study_config, table["model"])
models = list(dict.fromkeys(table["model"]))
colours = dict(zip(models, sns.color_palette(n_colors=len(models))))
values = {model: np.concatenate([np.ravel(e) for e in group["entropies"]]) for model, group in evals.groupby("model", sort=False)}
top = max(v.max() for v in values.values())
bins = np.arange(0, top + BIN_WIDTH, BIN_WIDTH)
fig, (ax, change_ax) = plt.subplots(1, 2, figsize=(13, 4.3), gridspec_kw={"width_ratios": [1.8, 1]})
for model in models:
    v, colour, row = values[model], colours[model], table[table["model"] == model].iloc[0]
    ax.hist(v, bins=bins, histtype="step", linewidth=1.6, color=colour, label=f"{names[model]}: mean {v.mean():.2f}")
    ax.axvline(v.mean(), color=colour, linestyle="--")
    if not np.isnan(row.get("paper_mean_entropy", np.nan)):
        ax.axvline(row["paper_mean_entropy"], color=colour, linestyle=":",
                   label=f"{names[model]}: paper mean {row['paper_mean_entropy']:.2f}")
ax.set_xlabel("entropy of the next-token distribution (nats)")
ax.set_ylabel(f"contexts ({evals['seed'].nunique()} seeds together)")
ax.set_title(f"{data_label(table['dataset'].iloc[0], table['corpus'].iloc[0])} {table['split'].iloc[0]}, "
             f"{table['budget'].iloc[0]} budget")
ax.legend(fontsize=8, loc="upper left")
seeds = evals.assign(row=evals["model"].map(names), value=evals["mean_entropy"])
paper = table.set_index(table["model"].map(names)).get("paper_mean_entropy", pd.Series(dtype=float))
baseline = names["lstm_m1000"] if "lstm_m1000" in names else names[models[-1]]
ours_rel, paper_rel = relative_change(seeds, paper, baseline)
order = [names[m] for m in models]
seed_rows(change_ax, ours_rel, order)
paper_rows(change_ax, paper_rel, order, offset=0.22)
change_ax.axhline(0, color="0.6", linewidth=0.8, zorder=1)
change_ax.set(ylabel=f"mean entropy against {baseline} (%)", title=f"each against {baseline}")
tidy_rows_axis(change_ax)
compare_legend(change_ax, paper=paper_rel.notna().any())
fig.suptitle("PRU Figure 3: next-token entropies")
fig.tight_layout()
save_figure(fig, figures[0])
