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

from rnnrepro.analysis.notebook import save, save_figure
from rnnrepro.configuration import load_study
from rnnrepro.evaluation.results import entropy_table, read_evaluations

BIN_WIDTH = 0.23  # the paper's bins
study_config = load_study(study)
(evaluation,) = study_config["artifacts"][artifact]["evaluations"]
evals = read_evaluations(metrics_files, evaluation)
table = entropy_table(evals, study_config, artifact)
save(table, tables[0], complete=["mean_entropy"])
table

# %%
values = {model: np.concatenate([np.ravel(e) for e in group["entropies"]]) for model, group in evals.groupby("model", sort=False)}
top = max(v.max() for v in values.values())
bins = np.arange(0, top + BIN_WIDTH, BIN_WIDTH)
fig, ax = plt.subplots(figsize=(7, 4))
for (model, v), colour in zip(values.items(), ["tab:blue", "tab:orange", "tab:green", "tab:red"]):
    row = table[table["model"] == model].iloc[0]
    ax.hist(v, bins=bins, alpha=0.5, color=colour, label=f"{model}: mean {v.mean():.2f}")
    ax.axvline(v.mean(), color=colour, linestyle="--")
    if "paper_mean_entropy" in table and not np.isnan(row.get("paper_mean_entropy", np.nan)):
        ax.axvline(row["paper_mean_entropy"], color=colour, linestyle=":",
                   label=f"{model}: paper mean {row['paper_mean_entropy']:.2f}")
ax.set_xlabel("entropy of the next-token distribution (nats)")
ax.set_ylabel("contexts")
ax.set_title(f"PRU Figure 3: next-token entropies, {table['corpus'].iloc[0]} {table['split'].iloc[0]} "
             f"({table['budget'].iloc[0]} budget)")
ax.legend(fontsize=8)
save_figure(fig, figures[0])
