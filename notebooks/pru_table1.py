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
# # PRU, Table 1: perplexity of LSTM and PRU language models on PTB and WikiText-2
#
# Mehta et al., EMNLP 2018. Standard dropout (LSTM M=1000/1200/1400 vs PRU g=1/2/4, K=2) and the
# AWD-LSTM dropouts (AWD-PRU g=1/2/4, and g=4 finetuned). Reproduced columns come from the training
# cells' `metrics.json` (best-validation checkpoint, evaluated on the validation and test streams
# with the test batch size); `paper_*` columns are the paper's reported values from
# `config/studies/pru.yaml`. Under the smoke budget the models are tiny and trained on synthetic
# stand-in corpora (column `corpus`), so only the table's shape is comparable, not its numbers.

# %% tags=["parameters"]
study = "pru"
artifact = "table1"
metrics_files = []
tables = ["results/tables/pru_table1.csv"]
figures = ["results/figures/pru_table1.png"]

# %%
import pandas as pd
import seaborn as sns

from rnnrepro.analysis.notebook import save, save_figure, setup
from rnnrepro.analysis.results import pru_table1

study_config, cells = setup(study, metrics_files)
table = pru_table1(cells, study_config)
save(table, tables[0], complete=["val_ppl", "test_ppl"])
table

# %% [markdown]
# Reproduced (ours) against the paper's test perplexity, per dataset.

# %%
long = pd.concat([
    table.assign(source=lambda t: "ours (" + t["budget"] + " budget)", ppl=table["test_ppl"]),
    table.assign(source="paper", ppl=table["paper_test_ppl"]),
], ignore_index=True)
grid = sns.catplot(data=long, kind="point", x="model", y="ppl", hue="source", col="dataset",
                   linestyle="none", sharey=False, height=4, aspect=1.6)
grid.set_axis_labels("", "test perplexity")
grid.set_xticklabels(rotation=45, ha="right")
grid.figure.suptitle("PRU Table 1: reproduced vs paper", y=1.02)
save_figure(grid.figure, figures[0])
