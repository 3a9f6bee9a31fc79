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
# # LRN, Table 6: the five cells' language models by size
#
# Zhang & Sennrich, ACL 2019. Exact parameter counts of the LSTM, GRU, ATR, SRU and LRN language models
# (mixture-of-softmaxes head, tied embedding) at the paper's sizes, built without weights and without
# training, whatever the budget, beside the paper's rounded #Params (Table 6, PTB). The paper's size
# ordering is checked on these counts at every budget.

# %% tags=["parameters"]
study = "lrn"
artifact = "params"
metrics_files = []
tables = ["results/tables/lrn_params.csv"]
figures = []

# %%
from rnnrepro.analysis.lrn import params_table
from rnnrepro.analysis.notebook import save
from rnnrepro.configuration import load_run_config, load_yaml, project_root
from rnnrepro.grid import load_study

study_config = load_study(study)
run_config = load_run_config(load_yaml(project_root() / "config" / "config.yaml"))
table = params_table(study_config, run_config, artifact)
save(table, tables[0])
table
