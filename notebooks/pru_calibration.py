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
# # Calibration: Zaremba et al. (2014)'s LSTMs on PTB, trained by this project's trainer
#
# Zaremba, Sutskever & Vinyals (2014), "Recurrent Neural Network Regularization", Table 1: the
# non-regularized small LSTM (2 layers of 200 units, 200-d embedding, untied softmax, every parameter
# U(-0.1, 0.1), unrolled 20 steps, batch 20, plain SGD with the rate halved every epoch from the 6th,
# 13 epochs, no dropout) reaches 120.7 validation and 114.5 test perplexity on PTB; the regularized
# medium LSTM (2 layers of 650, U(-0.05, 0.05), 50 % dropout on the non-recurrent connections,
# unrolled 35 steps, the rate divided by 1.2 every epoch after the 6th, 39 epochs) 86.2 and 82.7.
# Models `zaremba_small` and `zaremba_medium`, recipes `zaremba` and `zaremba_medium` in
# `config/studies/pru.yaml` (which says how each value was read from the paper and the authors' code).
# A budget on real data trains them at these sizes and recipes (the small one at `cpu`, the medium one
# on a GPU at `reduced`); under the smoke budget they are tiny and trained on a synthetic stand-in
# (column `corpus`), so only the table's shape is comparable there. `val_ppl` and `test_ppl` read each
# split as one stream (the test batch size 1, as the authors' run_test) with the weights the recipe
# scores (`scored_epoch`: the best validation epoch for the small recipe, the final epoch for the
# medium one, as the authors' code); `last_epoch_val_ppl` is the last epoch's validation, read as 20
# parallel streams (as their run_valid, which printed the paper's validation number).

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
from rnnrepro.analysis.plotting import counted, dataset_words

study_config, cells = setup(study, metrics_files)
histories = pru.read_histories(metrics_files)
table = pru.calibration_table(cells, histories, study_config)
save(table, tables[0], complete=["val_ppl", "test_ppl"])
table

# %% [markdown]
# The validation perplexity of every epoch (one line per seed), one panel per model, against the
# paper's final validation and test numbers; the square is our test perplexity at the scored epoch.

# %%
fig, axes = plt.subplots(1, len(table), figsize=(6.5 * len(table), 4.5), squeeze=False)
for ax, row in zip(axes[0], table.itertuples()):
    runs = histories[(histories["model"] == row.model) & (histories["dataset"] == row.dataset)]
    for seed, run in runs.groupby("seed"):
        ax.plot(run["epoch"], run["val_ppl"], "o-", markersize=3, label=f"ours, seed {seed}: validation")
    ax.axhline(row.paper_val_ppl, color="tab:gray", linestyle="--", label=f"paper: validation {row.paper_val_ppl:g}")
    ax.axhline(row.paper_test_ppl, color="black", linestyle=":", label=f"paper: test {row.paper_test_ppl:g}")
    ax.plot(row.scored_epoch, row.test_ppl, "s", color="tab:red",
            label=f"ours: test {row.test_ppl:.1f} (epoch {row.scored_epoch:g})")
    ax.set(xlabel="epoch", ylabel="perplexity",
           title=f"{pru.CALIBRATION_NAMES.get(row.model, row.model)}\n{dataset_words(row.corpus)}, {row.budget} budget, "
                 f"{counted(len(runs['seed'].unique()), 'seed')}")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=8)
fig.suptitle("Zaremba et al. (2014): our trainer against their Table 1")
fig.tight_layout()
save_figure(fig, figures[0])
