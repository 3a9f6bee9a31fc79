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
from rnnrepro.configuration import load_study
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

# %%
long = pd.concat([
    table.assign(source=lambda t: "ours (" + t["budget"] + " budget)", ppl=table["test_ppl"]),
    table.assign(source="paper", ppl=table.get("paper_test_ppl")),
], ignore_index=True).dropna(subset=["ppl"])
plot = sns.catplot(data=long, kind="bar", x="model", y="ppl", hue="evaluation", col="source",
                   sharey=False, height=3.5, aspect=1.2)
plot.set_axis_labels("", "test perplexity")
plot.figure.suptitle(f"PRU paper §4.2: static vs dynamic evaluation, {table['corpus'].iloc[0]} test", y=1.03)
save_figure(plot.figure, figures[0])
