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
# # PRU, Table 2: gradient saliency and top-5 next words
#
# Mehta et al., EMNLP 2018, Table 2: for a few PTB test sequences, how strongly each input word
# drives the prediction of the next word — the squared norm of the loss gradient at the word's
# embedding, s_t = ||∂L/∂e_t||² with L = −log p(next word) — for the standard-dropout LSTM (M=1000)
# beside the PRU (g=4, K=2, M=1400), and each model's five most probable next words.
# `rnnrepro.evaluation.saliency` picks the sequences by a fixed rule (the first test sentences long
# enough; the study file sets how many and how long), reads each from a zero state with dropout off
# and the best-validation weights. The figure shows each word's share of its sequence's total
# saliency (so the two models are on one scale); the table keeps the raw values. The paper's
# sentences are not given as data, so there are no `paper_*` columns; compare the pattern. Under the
# smoke budget the models are tiny and the corpus synthetic.

# %% tags=["parameters"]
study = "pru"
artifact = "saliency"
metrics_files = []
tables = ["results/tables/pru_saliency.csv"]
figures = ["results/figures/pru_saliency.png"]

# %%
import matplotlib.pyplot as plt

from rnnrepro.analysis.notebook import save, save_figure
from rnnrepro.grid import load_study
from rnnrepro.evaluation.results import read_evaluations, saliency_table

study_config = load_study(study)
(evaluation,) = study_config["artifacts"][artifact]["evaluations"]
table = saliency_table(read_evaluations(metrics_files, evaluation), study_config, artifact)
save(table, tables[0], complete=["saliency"])
table.groupby(["sequence", "model"], sort=False)[["target", "target_probability", "top5"]].first()

# %%
from rnnrepro.analysis.plotting import model_names

models = list(dict.fromkeys(table["model"]))
names = model_names(study_config, models)
sequences = sorted(table["sequence"].unique())
fig, axes = plt.subplots(len(sequences), 1, figsize=(10, 1.6 * len(models) * len(sequences) + 0.6), squeeze=False)
for ax, number in zip(axes[:, 0], sequences):
    rows = table[table["sequence"] == number]
    grid = rows.pivot(index="model", columns="position", values="saliency_share").loc[models]
    ax.imshow(grid.values, cmap="Reds", aspect="auto", vmin=0, vmax=1)
    words = rows[rows["model"] == models[0]].sort_values("position")["word"]
    ax.set_xticks(range(len(words)), words, rotation=30, ha="right", fontsize=8)
    tops = rows.groupby("model", sort=False)["top5"].first()
    ax.set_yticks(range(len(models)), [f"{names[m]}\ntop-5: {tops[m]}" for m in models], fontsize=7)
    ax.set_title(f"sequence {number}: the next word is '{rows['target'].iloc[0]}'", fontsize=9)
    for (i, j), share in zip([(i, j) for i in range(grid.shape[0]) for j in range(grid.shape[1])], grid.values.ravel()):
        ax.text(j, i, f"{share:.2f}", ha="center", va="center", fontsize=7, color="white" if share > 0.5 else "black")
fig.suptitle(f"PRU Table 2: saliency share of each input word ({table['budget'].iloc[0]} budget, "
             f"{table['corpus'].iloc[0]})", y=1.0)
fig.tight_layout()
save_figure(fig, figures[0])
