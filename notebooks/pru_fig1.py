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
# # PRU, Figure 1: training and validation perplexity as the hidden size grows
#
# Mehta et al., EMNLP 2018, Figure 1: training (solid) and validation (dashed) perplexity per epoch on
# PTB with standard dropout, LSTM M = 1000/1200/1400 against PRU g = 1/2/4 (K = 2) at the same widths.
# Drawn from the Table 1 cells' `history.csv` (no training of its own). Training perplexity is
# exp(mean training cross entropy over the epoch's batches, dropout on), as the authors' log; after
# the NT-ASGD switch validation uses the averaged weights. The table holds each run's best validation
# perplexity, the training perplexity of that epoch and the gap. The paper gives no numbers for this
# figure. Under the smoke budget the models are tiny and trained on synthetic stand-ins.

# %% tags=["parameters"]
study = "pru"
artifact = "fig1"
metrics_files = []
tables = ["results/tables/pru_fig1.csv"]
figures = ["results/figures/pru_fig1.png"]

# %%
import matplotlib.pyplot as plt

from rnnrepro.analysis import pru
from rnnrepro.analysis.notebook import save, save_figure

histories = pru.read_histories(metrics_files)
summary = pru.fig1_summary(histories)
save(summary, tables[0], complete=["best_val_ppl"])
summary

# %%
cells = ["lstm", "pru"]
fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
for ax, cell in zip(axes, cells):
    runs = histories[histories["cell"] == cell]
    for (model, width), run in runs.groupby(["model", "M"]):
        line, = ax.plot(run["epoch"], run["train_ppl"], "-", label=f"{model} train")
        ax.plot(run["epoch"], run["val_ppl"], "--", color=line.get_color(), label=f"{model} val")
    ax.set(xlabel="epoch", ylabel="perplexity", yscale="log", title=f"{cell.upper()} ({', '.join(runs['corpus'].unique())})")
    ax.legend(fontsize=8)
fig.suptitle("PRU Figure 1: training (solid) and validation (dashed) perplexity", y=1.02)
save_figure(fig, figures[0])
