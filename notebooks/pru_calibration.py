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
# # Calibration: Zaremba et al. (2014)'s small LSTM on PTB, trained by this project's trainer
#
# Zaremba, Sutskever & Vinyals (2014), "Recurrent Neural Network Regularization", Table 1: the
# non-regularized LSTM (2 layers of 200 units, 200-d embedding, untied softmax, every parameter
# U(-0.1, 0.1), unrolled 20 steps, batch 20, plain SGD with the rate halved every epoch from the 6th,
# 13 epochs, no dropout) reaches 120.7 validation and 114.5 test perplexity on PTB. Model
# `zaremba_small`, recipe `zaremba` in `config/studies/pru.yaml` (which says how each value was read
# from the authors' code). A budget on real data trains it at this size and recipe; under the smoke
# budget it is tiny and trained on a synthetic stand-in (column `corpus`), so only the table's shape
# is comparable there. `val_ppl` and `test_ppl` read each split as one stream (the test batch size 1,
# as the authors' run_test); `last_epoch_val_ppl` is the last epoch's validation, read as 20 parallel
# streams (as their run_valid, which printed the paper's validation number).

# %% tags=["parameters"]
study = "pru"
artifact = "calibration"
metrics_files = []
tables = ["results/tables/pru_calibration.csv"]
figures = ["results/figures/pru_calibration.png"]

# %%
import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

from rnnrepro.analysis import pru
from rnnrepro.analysis.notebook import save, save_figure, setup

study_config, cells = setup(study, metrics_files)
histories = pru.read_histories(metrics_files)
table = pru.calibration_table(cells, histories, study_config)
save(table, tables[0], complete=["val_ppl", "test_ppl"])
table

# %% [markdown]
# The validation perplexity of every epoch (one line per seed) against the paper's final validation
# and test numbers.

# %%
fig, ax = plt.subplots(figsize=(7, 4.5))
for (corpus, model, seed), run in histories.groupby(["corpus", "model", "seed"]):
    ax.plot(run["epoch"], run["val_ppl"], "o-", label=f"{model} on {corpus}, seed {seed}: validation")
for row in table.itertuples():
    ax.axhline(row.paper_val_ppl, color="tab:gray", linestyle="--", label=f"paper: validation {row.paper_val_ppl:g}")
    ax.axhline(row.paper_test_ppl, color="black", linestyle=":", label=f"paper: test {row.paper_test_ppl:g}")
    ax.plot(histories["epoch"].max(), row.test_ppl, "s", color="tab:red",
            label=f"ours: test {row.test_ppl:.1f} ({row.budget} budget)")
ax.set(xlabel="epoch", ylabel="perplexity", title="Zaremba et al. (2014) small LSTM on PTB: our trainer against Table 1")
ax.xaxis.set_major_locator(MaxNLocator(integer=True))
ax.legend(fontsize=8)
save_figure(fig, figures[0])
