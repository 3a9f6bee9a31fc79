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
figures = ["results/figures/pru_table1.png", "results/figures/pru_table1_curves.png"]

# %%
from rnnrepro.analysis.notebook import save, save_figure, setup
from rnnrepro.analysis.results import pru_table1

study_config, cells = setup(study, metrics_files)
table = pru_table1(cells, study_config)
save(table, tables[0], complete=["val_ppl", "test_ppl"])
table

# %% [markdown]
# Per dataset, left: our test perplexity, every seed (a point; open: a run its epoch cap stopped), the
# mean (bar) and ± 1 standard deviation over seeds, on our own scale. Right: each row's change against
# LSTM M=1000 in percent, ours beside the paper's: the comparisons the scorecard's claims make, on one
# scale whatever the sizes (a smaller budget's models sit far above the paper's perplexities). Models
# are named by the paper's sizes; the title gives the budget's.

# %%
import matplotlib.pyplot as plt

from rnnrepro.analysis.plotting import compare_legend, compare_with_paper, data_label, model_names, scale_note

names = model_names(study_config, table["model"])
baseline = table["model"].iloc[0]  # the artifact's first model: LSTM M=1000, the claims' reference
datasets = list(dict.fromkeys(table["dataset"]))
fig, axes = plt.subplots(len(datasets), 2, figsize=(12, 4.6 * len(datasets)), squeeze=False)
for row_axes, dataset in zip(axes, datasets):
    rows = table[table["dataset"] == dataset]
    seeds = cells[cells["dataset"] == dataset].assign(row=lambda c: c["model"].map(names), value=lambda c: c["test_ppl"])
    order = [names[m] for m in rows["model"]]
    compare_with_paper(row_axes, seeds, rows.set_index(rows["model"].map(names))["paper_test_ppl"], order,
                       "test perplexity", baseline=names[baseline],
                       title=data_label(dataset, rows["corpus"].iloc[0]))
    compare_legend(row_axes[1], capped=bool(seeds["capped"].any()))
fig.suptitle(f"PRU Table 1: test perplexity ({scale_note(cells)})")
fig.tight_layout(w_pad=2.5)
save_figure(fig, figures[0])

# %% [markdown]
# Learning curves: validation perplexity after every epoch, one colour per model (a cell of your own
# among them, named by its id), the mean over seeds bold (the epochs every seed reached) and each seed
# faint; a finetuned model's curve goes on, dashed, from its
# base's. A square ends a run its stop rule ended, an open triangle one its epoch cap ended.

# %%
from rnnrepro.analysis.curves import curves_figure, read_curves

curves = read_curves(metrics_files)
fig = curves_figure(curves, model_names(study_config, curves["model"]), "PRU Table 1: validation perplexity after each epoch")
save_figure(fig, figures[1])
