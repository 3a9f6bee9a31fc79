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
# # Learning-rate tuning: each compared model at its own rate
#
# Every model a budget compares is trained once per factor of the study file's learning-rate grid (the
# recipe's rate times each factor), on a tuning seed that no verdict reads, on the same data and under the
# same recipe and stop rule as its compared cells (within the tuning's epoch cap, where the budget tunes on
# shorter runs). The rate of the lowest validation loss is the one every compared cell of that model
# trains at (`chosen`); a rate at the edge of the grid (`at_edge_of_grid`) may not be the best there is.
# A run that diverged ended there and is scored on its best weights before it (`diverged`).

# %% tags=["parameters"]
study = "pru"
artifact = "tuning"
metrics_files = []
tables = ["results/tables/pru_tuning.csv"]
figures = ["results/figures/pru_tuning.png"]

# %%
from rnnrepro.analysis.notebook import save, save_figure, setup
from rnnrepro.analysis.plotting import model_names
from rnnrepro.analysis.tuning_curves import read_tuning_cells, tuning_figure, tuning_table

study_config, _ = setup(study, [])

table = tuning_table(read_tuning_cells(metrics_files))
save(table, tables[0], complete=["val_loss"])
table

# %%
fig = tuning_figure(table, model_names(study_config, table["model"]))
save_figure(fig, figures[0])
