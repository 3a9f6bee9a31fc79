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
# # Nested LSTM on text8 autocomplete: parameter counts
#
# The GRU (2 x 600), LSTM (2 x 600) and Nested LSTM (1 x 600, depth 2) of the published comparison,
# instantiated at the paper's sizes from `config/studies/nlstm.yaml` (whatever the run's budget) with
# 28 input symbols and the 16,386 word classes of the dataset's construction rule, and their embedding,
# recurrent and dense parameters counted from the modules. `paper_*` columns are the published counts;
# `equal_to_paper` must be true for every row. No training is involved.

# %% tags=["parameters"]
study = "nlstm"
artifact = "models"
metrics_files = []
tables = ["results/tables/nlstm_models.csv"]
figures = []

# %%
from rnnrepro.analysis.autocomplete import models_table
from rnnrepro.analysis.notebook import save
from rnnrepro.configuration import load_run_config, load_yaml, project_root
from rnnrepro.grid import load_study

study_config = load_study(study)
run_config = load_run_config(load_yaml(project_root() / "config" / "config.yaml"))
table = models_table(study_config, run_config, artifact)
save(table, tables[0])
assert table["equal_to_paper"].all(), "a parameter count differs from the published one"
table
