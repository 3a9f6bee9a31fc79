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
# # LRN, Table 6: language-model perplexity of LSTM, GRU, ATR, SRU and LRN on PTB and WikiText-2
#
# Zhang & Sennrich, ACL 2019, in the authors' recipe (AWD-LSTM with a 15-expert mixture-of-softmaxes
# head; `config/studies/lrn.yaml`). One row per dataset, model and stage: `base` (the checkpoint the
# finetuned cell started from), `finetune`, `dynamic` (dynamic evaluation of the finetuned weights, as
# in the paper). Perplexities are the best-validation checkpoint on the validation and test streams
# (`eval_batch_size` in each run's metrics); `paper_test_ppl` is the paper's Table 6 (it gives no
# validation perplexity). Column `weight_drop` says which weight drop a row was trained with: the
# paper's rows are "as released" (none; the released code's weight drop does nothing); column `head`
# names the output layer (the paper's mixture of 15 softmaxes, or a plain softmax where a budget
# replaces it: `cpu`). Under the smoke budget the models are tiny and trained on a synthetic stand-in
# (column `corpus`): only the table's shape is comparable.

# %% tags=["parameters"]
study = "lrn"
artifact = "lm"
metrics_files = []
tables = ["results/tables/lrn_lm.csv"]
figures = ["results/figures/lrn_lm.png"]

# %%
import matplotlib.pyplot as plt
import seaborn as sns

from rnnrepro.analysis.lrn import lm_table
from rnnrepro.analysis.notebook import save, save_figure
from rnnrepro.configuration import load_study
from rnnrepro.evaluation.results import read_evaluations

study_config = load_study(study)
evaluations = study_config["artifacts"][artifact].get("evaluations", [])
dynamic = read_evaluations(metrics_files, "dynamic_eval") if "dynamic_eval" in evaluations else None
table = lm_table(metrics_files, dynamic, study_config, artifact)
# (a budget may score dynamic evaluation on the test split only; every other stage has validation)
assert table.loc[table["stage"] != "dynamic", "val_ppl"].notna().all(), "a cell has no validation perplexity"
save(table, tables[0], complete=["test_ppl"])
table[["dataset", "model", "stage", "head", "weight_drop", "params", "val_ppl", "test_ppl", "paper_test_ppl"]]

# %% [markdown]
# Test perplexity per stage, ours beside the paper's.

# %%
datasets = list(dict.fromkeys(table["dataset"]))
fig, axes = plt.subplots(1, len(datasets), figsize=(6.5 * len(datasets), 4), squeeze=False)
colours = dict(zip(["base", "finetune", "dynamic"], sns.color_palette(n_colors=3)))
for ax, dataset in zip(axes[0], datasets):
    part = table[table["dataset"] == dataset]
    models = list(dict.fromkeys(part["model"]))
    for offset, (stage, rows) in zip([-0.2, 0.0, 0.2], part.groupby("stage", sort=False)):
        x = [models.index(m) + offset for m in rows["model"]]
        ax.scatter(x, rows["test_ppl"], marker="o", color=colours[stage], label=f"{stage}, ours")
        ax.scatter(x, rows["paper_test_ppl"], marker="x", color=colours[stage], label=f"{stage}, paper")
    ax.set_xticks(range(len(models)), models, rotation=45, ha="right")
    ax.set_title(f"{dataset} (ours: {part['corpus'].iloc[0]}, {part['budget'].iloc[0]} budget)")
    ax.set_ylabel("test perplexity")
axes[0][-1].legend(fontsize=8, bbox_to_anchor=(1.02, 1), loc="upper left")
fig.suptitle("LRN Table 6: reproduced (o) vs paper (x)")
save_figure(fig, figures[0])
