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
# # PRU, Table 3: which transformation for the context and for the input
#
# Mehta et al., EMNLP 2018, §5. One-layer language models, embedding = hidden = 600 (tied), K = g = 4,
# standard dropout; validation perplexity on PTB and WikiText-2. Rows are written context/input:
# R1 LT/LT, R2 GLT/GLT, R3 GLT/PT (the PRU), R4 LT/PT, R5 PT/PT, R6 LT/PT without the residual. A
# row's label is read from the cell options the run was trained with.
#
# Parameters (`params`, `params_recurrent`) are those of the trained models (`metrics.json`); the
# paper's printed counts are `paper_params_m` / `paper_ru_params_m`. R3 is trained twice: with the
# authors' released pyramid (`pyramid_groups` 1: 1,410,000 recurrent parameters, PTB total 7.42 M) and
# with every pyramid level also split into g = 4 groups (`pyramid_groups` 4: 626,104, 6.64 M), whose
# counts fit the paper's 0.64 M / 6.6 M (artifact `counts`). `paper_params_fit` says whether the
# paper's printed counts fit the row's cell: R1, R4, R5, R6 with the released pyramid, R3 with the
# grouped one, R2 with neither (724,800 against 0.5 M). Pooling kernels are the code's (7, 5, 3). Under
# the smoke budget the models are tiny and trained on synthetic stand-ins (column `corpus`): only the
# table's shape is comparable.

# %% tags=["parameters"]
study = "pru"
artifact = "table3"
metrics_files = []
tables = ["results/tables/pru_table3.csv"]
figures = ["results/figures/pru_table3.png"]

# %%
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from rnnrepro.analysis import pru
from rnnrepro.analysis.notebook import save, save_figure, setup

study_config, cells = setup(study, metrics_files)
table = pru.table3(cells, study_config)
save(table, tables[0], complete=["val_ppl"])
table[["dataset", "row", "context", "input", "residual", "pyramid_groups", "params_m", "paper_params_m",
       "ru_params_m", "paper_ru_params_m", "paper_params_fit", "val_ppl", "paper_val_ppl"]]

# %% [markdown]
# Validation perplexity per row (ours against the paper's), and recurrent-unit parameters (hatched:
# the paper's printed count does not fit that cell).

# %%
table["label"] = table["row"] + table["pyramid_groups"].map(lambda groups: "" if groups == 1 else " grouped PT")
order = sorted(table["label"].unique())
long = pd.concat([
    table.assign(source=lambda t: "ours (" + t["budget"] + " budget)", ppl=table["val_ppl"]),
    table.assign(source="paper", ppl=table["paper_val_ppl"]),
], ignore_index=True)
datasets = list(table["dataset"].unique())
fig, axes = plt.subplots(1, len(datasets) + 1, figsize=(6 * (len(datasets) + 1), 4))
for ax, dataset in zip(axes, datasets):
    sns.pointplot(data=long[long["dataset"] == dataset], x="label", y="ppl", hue="source", linestyle="none",
                  dodge=0.3, ax=ax, order=order)
    ax.set(ylabel="validation perplexity", xlabel="Table 3 row (context/input)", title=dataset)
    ax.tick_params(axis="x", labelrotation=30)
params = table.drop_duplicates("label").set_index("label").loc[order]
x = range(len(params))
axes[-1].bar([i - 0.2 for i in x], params["ru_params_m"], width=0.4, label="ours (trained model)")
bars = axes[-1].bar([i + 0.2 for i in x], params["paper_ru_params_m"], width=0.4, label="paper")
for bar, fits in zip(bars, params["paper_params_fit"]):
    bar.set_hatch("" if fits else "//")
axes[-1].set_xticks(list(x), params.index + " " + params["context"] + "/" + params["input"], rotation=30,
                    ha="right")
axes[-1].set(ylabel="recurrent-unit parameters (M)", title="RU parameters (hatched: the paper's count does not fit)")
axes[-1].legend()
fig.suptitle("PRU Table 3: transformations of context and input", y=1.02)
save_figure(fig, figures[0])
