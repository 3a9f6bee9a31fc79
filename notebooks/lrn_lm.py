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
# head; `config/studies/lrn.yaml`). One row per dataset, model and stage (mean and standard deviation
# over seeds, each seed's value in `<value>_samples`): `base` (the checkpoint the
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
figures = ["results/figures/lrn_lm.png", "results/figures/lrn_lm_curves.png"]

# %%
from rnnrepro.analysis.lrn import capped_stages, lm_summary, lm_table
from rnnrepro.analysis.notebook import save, save_figure
from rnnrepro.grid import load_study
from rnnrepro.evaluation.results import read_evaluations

study_config = load_study(study)
evaluations = study_config["artifacts"][artifact].get("evaluations", [])
dynamic = read_evaluations(metrics_files, "dynamic_eval") if "dynamic_eval" in evaluations else None
table = lm_table(metrics_files, dynamic, study_config, artifact)  # one row per seed: the figure's points
# (a budget may score dynamic evaluation on the test split only; every other stage has validation)
assert table.loc[table["stage"] != "dynamic", "val_ppl"].notna().all(), "a cell has no validation perplexity"
summary = lm_summary(table)
save(summary, tables[0], complete=["test_ppl"])
summary[["dataset", "model", "stage", "head", "weight_drop", "params", "val_ppl", "test_ppl", "test_ppl_std", "seeds",
         "paper_test_ppl"]]

# %% [markdown]
# Test perplexity of each model after each stage (base, finetuned, dynamic evaluation). Left: ours,
# every seed (a point; open: a run its epoch cap stopped), mean (bar) and ± 1 standard deviation.
# Right: the paper's, on its own scale (our small models sit far above its perplexities; the claims
# compare rows within each panel). Models are named by the paper's; the title gives the budget.

# %%
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from rnnrepro.analysis.plotting import CAPPED_LABEL, data_label, model_names, paper_rows, seed_rows

names = model_names(study_config, table["model"])
capped = capped_stages(metrics_files)
stage_names = {"base": "base", "finetune": "+ finetune", "dynamic": "+ dynamic eval"}
datasets = list(dict.fromkeys(table["dataset"]))
models = list(dict.fromkeys(table["model"]))
colours = dict(zip(models, sns.color_palette(n_colors=len(models))))
fig, axes = plt.subplots(len(datasets), 2, figsize=(13, 4.6 * len(datasets)), squeeze=False)
for (ours_ax, paper_ax), dataset in zip(axes, datasets):
    part = table[table["dataset"] == dataset]
    # one position per (model, stage), the stages of a model side by side
    order = list(dict.fromkeys(zip(part["model"], part["stage"])))
    labels = [stage_names.get(stage, stage) for _, stage in order]
    for model in dict.fromkeys(part["model"]):
        mine = part[part["model"] == model]
        keys = list(zip(mine["model"], mine["stage"]))
        seeds = mine.assign(row=keys, value=mine["test_ppl"])
        seeds["capped"] = [capped.get((dataset, model, stage, seed), False)
                           for stage, seed in zip(mine["stage"], mine["seed"])]
        seed_rows(ours_ax, seeds, order, colour=colours[model], label=names[model])
        paper = mine.drop_duplicates("stage")
        paper_rows(paper_ax, pd.Series(paper["paper_test_ppl"].to_numpy(), index=list(zip(paper["model"], paper["stage"]))),
                   order, label=None)
    for ax in (ours_ax, paper_ax):
        ax.set_xticks(range(len(order)), labels, fontsize=8, rotation=30, ha="right")
        ax.set_xlim(-0.6, len(order) - 0.4)
        ax.grid(axis="y", color="0.92")
        ax.set_axisbelow(True)
        for model in dict.fromkeys(m for m, _ in order):  # the model's name over its stages
            positions = [i for i, (m, _) in enumerate(order) if m == model]
            ax.text(sum(positions) / len(positions), 1.01, names[model], transform=ax.get_xaxis_transform(),
                    ha="center", va="bottom", fontsize=9, color=colours[model], fontweight="bold")
    ours_ax.set_ylabel("test perplexity")
    ours_ax.set_title(f"ours: {data_label(dataset, part['corpus'].iloc[0])}, {part['budget'].iloc[0]} budget", pad=18)
    paper_ax.set_title("the paper (Table 6)", pad=18)
    handles = [plt.Line2D([], [], marker="o", color="0.3", linestyle="none", label="ours: a seed"),
               plt.Line2D([], [], color="0.3", linewidth=2, label="ours: mean, line: ± 1 sd")]
    if any(capped.get((dataset, m, stage, seed)) for m, stage, seed in zip(part["model"], part["stage"], part["seed"])):
        handles.append(plt.Line2D([], [], marker="o", color="0.3", markerfacecolor="white", linestyle="none",
                                  label=CAPPED_LABEL))
    ours_ax.legend(handles=handles, fontsize=8)
    paper_ax.legend(handles=[plt.Line2D([], [], marker="D", color="black", markerfacecolor="none",
                                        linestyle="none", label="the paper")], fontsize=8)
fig.suptitle("LRN Table 6: test perplexity after each stage", y=1.0)
fig.tight_layout()
save_figure(fig, figures[0])

# %% [markdown]
# Learning curves: validation perplexity after every epoch, one colour per model (a cell of your own
# among them, named by its id), the mean over seeds bold (the epochs every seed reached) and each seed
# faint. Each model is finetuned from its base: its curve is the base's epochs, then, dashed,
# the finetuning's, numbered on. A square ends a run its stop rule ended, an open triangle one its
# epoch cap ended.

# %%
from rnnrepro.analysis.curves import curves_figure, read_curves

curves = read_curves(metrics_files)
fig = curves_figure(curves, model_names(study_config, curves["model"]),
                    "LRN Table 6: validation perplexity after each epoch, base then finetuning")
save_figure(fig, figures[1])
