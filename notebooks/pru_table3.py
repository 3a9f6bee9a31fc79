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
from rnnrepro.analysis import pru
from rnnrepro.analysis.notebook import save, save_figure, setup

study_config, cells = setup(study, metrics_files)
table = pru.table3(cells, study_config)
save(table, tables[0], complete=["val_ppl"])
table[["dataset", "row", "context", "input", "residual", "pyramid_groups", "params_m", "paper_params_m",
       "ru_params_m", "paper_ru_params_m", "paper_params_fit", "val_ppl", "paper_val_ppl"]]

# %% [markdown]
# Per dataset, left: our validation perplexity of each row, every seed (a point; open: a run its epoch
# cap stopped), mean (bar) and ± 1 standard deviation. Middle: each row against R4 (LT/PT) in percent,
# ours beside the paper's: what the claims (GLT/GLT worst, LT/PT best, a grouped context costs
# perplexity) compare, on one scale. Right (first row): recurrent-unit parameters of the trained models
# beside the paper's printed counts (hatched: the paper's count does not fit that cell).

# %%
import matplotlib.pyplot as plt

from rnnrepro.analysis.plotting import compare_legend, compare_with_paper, data_label, scale_note

table["label"] = (table["row"] + " " + table["context"].str.upper() + "/" + table["input"].str.upper()
                  + table["pyramid_groups"].map(lambda groups: "" if groups == 1 else ", grouped pyramid"))
labels = dict(zip(table["model"], table["label"]))
order = list(dict.fromkeys(table.sort_values(["row", "pyramid_groups"])["label"]))
datasets = list(dict.fromkeys(table["dataset"]))
fig, axes = plt.subplots(len(datasets), 3, figsize=(18, 4.6 * len(datasets)), squeeze=False)
for row_axes, dataset in zip(axes, datasets):
    rows = table[table["dataset"] == dataset]
    seeds = cells[cells["dataset"] == dataset].assign(row=lambda c: c["model"].map(labels), value=lambda c: c["val_ppl"])
    r4 = rows.loc[rows["row"] == "R4", "label"]
    compare_with_paper(row_axes[:2], seeds, rows.set_index("label")["paper_val_ppl"], order, "validation perplexity",
                       baseline=r4.iloc[0] if len(r4) else None, title=data_label(dataset, rows["corpus"].iloc[0]))
    compare_legend(row_axes[1], capped=bool(seeds["capped"].any()))
    row_axes[2].set_axis_off()
params = table.drop_duplicates("label").set_index("label").loc[order]
ax = axes[0][2]
ax.set_axis_on()
x = range(len(params))
ax.bar([i - 0.2 for i in x], params["ru_params_m"], width=0.4, label="ours (trained model)")
bars = ax.bar([i + 0.2 for i in x], params["paper_ru_params_m"], width=0.4, color="0.75", edgecolor="black",
              label="paper (printed)")
for bar, fits in zip(bars, params["paper_params_fit"]):
    bar.set_hatch("" if fits else "//")
ax.set_xticks(list(x), order, rotation=30, ha="right")
ax.set_yscale("log")  # a small budget's models beside the paper's millions: both visible
ax.set(ylabel="recurrent-unit parameters (M, log scale)", title="RU parameters (hatched: the paper's count does not fit)")
ax.legend(fontsize=8)
fig.suptitle(f"PRU Table 3: transformations of context and input, K = g = 4 ({scale_note(cells)})")
fig.tight_layout(w_pad=2.5)
save_figure(fig, figures[0])
