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
# the NT-ASGD switch validation uses the averaged weights. One line per run (seed), in its model's
# colour; a square ends a run that stopped by its own rule, an open triangle one its epoch cap stopped.
# Models are named by the paper's sizes; the title gives the budget's. The table holds each run's best
# validation perplexity, the training perplexity of that epoch and the gap. The paper gives no numbers
# for this figure. Under the smoke budget the models are tiny and trained on synthetic stand-ins.

# %% tags=["parameters"]
study = "pru"
artifact = "fig1"
metrics_files = []
tables = ["results/tables/pru_fig1.csv"]
figures = ["results/figures/pru_fig1.png"]

# %%
from rnnrepro.analysis import pru
from rnnrepro.analysis.notebook import save, save_figure, setup
from rnnrepro.analysis.plotting import model_names, scale_note

study_config, cells = setup(study, metrics_files)
histories = pru.read_histories(metrics_files)
summary = pru.fig1_summary(histories)
save(summary, tables[0], complete=["best_val_ppl"])
summary

# %%
fig = pru.fig1_figure(histories, model_names(study_config, cells["model"]))
fig.suptitle(f"PRU Figure 1: training (solid) and validation (dashed) perplexity, one line per run "
             f"({', '.join(cells['corpus'].unique())}; {scale_note(cells)})")
fig.tight_layout()
save_figure(fig, figures[0])
