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
#
# The AWD-LSTM (`awd_lstm`, recipe `awd_lstm`: 3 x 1150 LSTM layers, 400-d tied embedding, every AWD
# regulariser, lr 30, NT-ASGD; 24,221,600 parameters) is trained as its first release's README command
# trains it, whose log printed a validation perplexity of 308.03 after the first epoch. The paper_start
# budget trains its first epoch at that size on a CPU (two seeds; the log printed no second);
# `val_ppl_epoch1` is every run's validation after it (`val_ppl_epoch2` is empty there). Agreement there says the model, its
# regularisers, its schedule and the data pipeline behave like the authors' at their size in the first
# epochs; it says nothing of the final perplexity, which needs all of the epochs (the paper budget).

# %% tags=["parameters"]
study = "pru"
artifact = "calibration"
metrics_files = []
tables = ["results/tables/pru_calibration.csv"]
figures = ["results/figures/pru_calibration.png"]

# %%
from rnnrepro.analysis import calibration, pru
from rnnrepro.analysis.notebook import save, save_figure, setup

study_config, cells = setup(study, metrics_files)
histories = pru.read_histories(metrics_files)
table = calibration.calibration_table(cells, histories, study_config)
save(table, tables[0], complete=["val_ppl", "test_ppl"])
table

# %% [markdown]
# The validation perplexity of every epoch (one line per seed), one panel per model, against the
# published final validation and test numbers; the square is our test perplexity at the scored epoch.
# The AWD-LSTM's panel also shows the validation its authors' log printed after the first epoch, with
# the ±10 % band its claim allows (claim `awd_lstm_first_epoch_calibration`).

# %%
fig = calibration.calibration_figure(table, histories, "Our trainer against published models, each in its "
                                                       "authors' recipe")
save_figure(fig, figures[0])
