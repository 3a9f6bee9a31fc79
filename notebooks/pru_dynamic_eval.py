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
# # PRU: dynamic evaluation on the PTB test set
#
# Mehta et al., EMNLP 2018, §4.2: the standard-dropout PRU (g=4, K=2, M=1400) and LSTM (M=1000) of
# Table 1, scored statically and with dynamic evaluation (Krause et al. 2018; paper: 62.42 -> 55.23 and
# 66.29 -> 58.79). Our implementation is `rnnrepro.evaluation.dynamic` (its docstring gives the update
# and the departures from Krause's script); the paper gives no hyperparameters, so η and λ are tuned
# on validation over the grid the study file declares (`evaluations: dynamic_eval`), and the best pair
# scores the whole test split from the trained weights. *Static* is the trained
# model on the same stream (batch 1, state carried). `paper_*` columns come from
# `config/studies/pru.yaml`. Under the smoke budget the models are tiny and the corpus synthetic
# (column `corpus`): only the table's shape is comparable.

# %% tags=["parameters"]
study = "pru"
artifact = "dynamic_eval"
metrics_files = []
tables = ["results/tables/pru_dynamic_eval.csv"]
figures = ["results/figures/pru_dynamic_eval.png"]

# %%
import pandas as pd
import seaborn as sns

from rnnrepro.analysis.notebook import save, save_figure
from rnnrepro.grid import load_study
from rnnrepro.evaluation.results import dynamic_eval_table, read_evaluations

study_config = load_study(study)
(evaluation,) = study_config["artifacts"][artifact]["evaluations"]
evals = read_evaluations(metrics_files, evaluation)
table = dynamic_eval_table(evals, study_config, artifact)
save(table, tables[0], complete=["test_ppl"])
table

# %% [markdown]
# The validation grid of each cell (perplexity on the tuning tokens per η, λ; a single given pair is
# not tuned and has none).

# %%
grid = pd.concat([pd.DataFrame(row["grid"]).assign(model=row["model"], seed=row["seed"])
                  for _, row in evals.iterrows()], ignore_index=True)
grid.pivot_table(index=["model", "seed", "decay"], columns="lr", values="tune_ppl") if "tune_ppl" in grid else grid

# %% [markdown]
# Per dataset, left: our test perplexity, static and with dynamic evaluation, every seed (a point; a
# grey line joins a seed's two), mean (bar) and ± 1 standard deviation. Right: the change dynamic
# evaluation makes, in percent of the static perplexity, ours per seed beside the paper's (one scale
# for both: the claim "about 11 % lower" reads it). Models are named by the paper's sizes.

# %%
import matplotlib.pyplot as plt
import seaborn as sns

from rnnrepro.analysis.plotting import (compare_legend, data_label, model_names, paper_rows, seed_rows,
                                        tidy_rows_axis)

names = model_names(study_config, table["model"])
colours = dict(zip(["static", "dynamic"], sns.color_palette(n_colors=2)))
offsets = {"static": -0.15, "dynamic": 0.15}
datasets = list(dict.fromkeys(table["dataset"]))
fig, axes = plt.subplots(len(datasets), 2, figsize=(11, 4.4 * len(datasets)), squeeze=False)
for (ours_ax, change_ax), dataset in zip(axes, datasets):
    runs = evals[evals["dataset"] == dataset].assign(row=lambda e: e["model"].map(names))
    order = [names[m] for m in dict.fromkeys(table.loc[table["dataset"] == dataset, "model"])]
    for kind in ("static", "dynamic"):
        seed_rows(ours_ax, runs.assign(value=runs[f"{kind}_test_ppl"]), order, colour=colours[kind],
                  offset=offsets[kind], label=kind, jitter=0, width=0.1)
    for run in runs.itertuples():
        x = order.index(run.row)
        ours_ax.plot([x + offsets["static"], x + offsets["dynamic"]], [run.static_test_ppl, run.dynamic_test_ppl],
                     color="0.75", linewidth=0.8, zorder=2)
    ours_ax.set(ylabel="test perplexity", title=f"ours: {data_label(dataset, runs['corpus'].iloc[0])}, "
                f"{runs['budget'].iloc[0]} budget")
    ours_ax.legend(fontsize=8)
    change = runs.assign(value=100 * (runs["dynamic_test_ppl"] / runs["static_test_ppl"] - 1))
    seed_rows(change_ax, change, order)
    dynamic_rows = table[(table["dataset"] == dataset) & (table["evaluation"] == "dynamic")]
    if "paper_test_change_pct" in dynamic_rows:
        paper_rows(change_ax, dynamic_rows.set_index(dynamic_rows["model"].map(names))["paper_test_change_pct"],
                   order, offset=0.22)
    change_ax.axhline(0, color="0.6", linewidth=0.8, zorder=1)
    change_ax.set(ylabel="dynamic against static (%)", title="the change dynamic evaluation makes")
    compare_legend(change_ax, paper="paper_test_change_pct" in dynamic_rows)
    for ax in (ours_ax, change_ax):
        tidy_rows_axis(ax)
fig.suptitle("PRU paper §4.2: static against dynamic evaluation, test perplexity")
fig.tight_layout(w_pad=2.5)
save_figure(fig, figures[0])
