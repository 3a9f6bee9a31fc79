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
# # PRU, Table 4: how a pyramid level sub-samples the previous one
#
# Mehta et al., EMNLP 2018, §5. One-layer language models, embedding = hidden = 600 (tied), g = 1,
# K = 4, standard dropout; validation perplexity on PTB and WikiText-2. Skip takes every other
# element; max and avg pool use the authors' code's kernels (7, 5, 3 for K = 4; the paper's text says 3
# at every level, cell option `pooling_kernels: paper`);
# the convolution is a learned stride-2 kernel of 3 with tanh, one per level (the paper leaves
# sharing open). The avg-pool row is the same cell as Figure 5's g = 1, K = 4 point. Under the smoke
# budget the models are tiny and trained on synthetic stand-ins (column `corpus`).

# %% tags=["parameters"]
study = "pru"
artifact = "table4"
metrics_files = []
tables = ["results/tables/pru_table4.csv"]
figures = ["results/figures/pru_table4.png"]

# %%
import pandas as pd
import seaborn as sns

from rnnrepro.analysis import pru
from rnnrepro.analysis.notebook import save, save_figure, setup

study_config, cells = setup(study, metrics_files)
table = pru.table4(cells, study_config)
save(table, tables[0], complete=["val_ppl"])
table[["dataset", "method", "params", "val_ppl", "paper_val_ppl"]]

# %%
long = pd.concat([
    table.assign(source=lambda t: "ours (" + t["budget"] + " budget)", ppl=table["val_ppl"]),
    table.assign(source="paper", ppl=table["paper_val_ppl"]),
], ignore_index=True)
grid = sns.catplot(data=long, kind="point", x="method", y="ppl", hue="source", col="dataset",
                   linestyle="none", sharey=False, height=4, aspect=1.2,
                   order=[m for m in pru.SUBSAMPLE_LABELS.values() if m in set(table["method"])])
grid.set_axis_labels("sub-sampling", "validation perplexity")
grid.figure.suptitle("PRU Table 4: sub-sampling in the pyramidal transformation (g = 1, K = 4)", y=1.03)
save_figure(grid.figure, figures[0])
