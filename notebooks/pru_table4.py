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
from rnnrepro.analysis import pru
from rnnrepro.analysis.notebook import save, save_figure, setup

study_config, cells = setup(study, metrics_files)
table = pru.table4(cells, study_config)
save(table, tables[0], complete=["val_ppl"])
table[["dataset", "method", "params", "val_ppl", "paper_val_ppl"]]

# %% [markdown]
# Per dataset, left: our validation perplexity of each sub-sampling method, every seed (a point; open:
# a run its epoch cap stopped), mean (bar) and ± 1 standard deviation. Right: each method against
# average pooling (the PRU's own) in percent, ours beside the paper's: what the claims (avg pool best,
# max pool worst) compare, on one scale.

# %%
import matplotlib.pyplot as plt

from rnnrepro.analysis.plotting import compare_legend, compare_with_paper, data_label, scale_note

order = [m for m in pru.SUBSAMPLE_LABELS.values() if m in set(table["method"])]
methods = dict(zip(table["model"], table["method"]))
datasets = list(dict.fromkeys(table["dataset"]))
fig, axes = plt.subplots(len(datasets), 2, figsize=(11, 4.2 * len(datasets)), squeeze=False)
for row_axes, dataset in zip(axes, datasets):
    rows = table[table["dataset"] == dataset]
    seeds = cells[cells["dataset"] == dataset].assign(row=lambda c: c["model"].map(methods), value=lambda c: c["val_ppl"])
    baseline = pru.SUBSAMPLE_LABELS["avg"] if pru.SUBSAMPLE_LABELS["avg"] in order else order[0]
    compare_with_paper(row_axes, seeds, rows.set_index("method")["paper_val_ppl"], order, "validation perplexity",
                       baseline=baseline, title=data_label(dataset, rows["corpus"].iloc[0]))
    compare_legend(row_axes[1], capped=bool(seeds["capped"].any()))
fig.suptitle(f"PRU Table 4: sub-sampling in the pyramidal transformation, g = 1, K = 4 ({scale_note(cells)})")
fig.tight_layout(w_pad=2.5)
save_figure(fig, figures[0])
