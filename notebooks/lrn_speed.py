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
# # LRN: training speed of the five cells, as ratios to the LSTM
#
# Measured by the `speed` rule (`python -m rnnrepro.analysis.lrn speed`), not by the training cells:
# the median seconds of one training batch of each model's whole LM (forward, loss, backward, clip,
# SGD step; the authors' PTB shapes, random tokens) and of one middle layer's forward + backward, on
# the device the job ran on (column `device`). The paper's ratios (`paper_<task>_ratio`) come from
# its TensorFlow SNLI (Table 1, Base) and document-classification (Table 2) models on its own GPU: the
# paper times no language model, so the comparison is of orderings, not of numbers. Our cells run
# their own time loop (hand-written backward passes, `rnnrepro.cells.recurrence`) except the LSTM,
# which uses torch's fused kernel; that difference is part of what the ratios measure.

# %% tags=["parameters"]
study = "lrn"
artifact = "speed"
metrics_files = []
tables = ["results/tables/lrn_speed.csv"]
figures = ["results/figures/lrn_speed.png"]

# %%
from pathlib import Path

from rnnrepro.analysis.lrn import speed_table
from rnnrepro.analysis.notebook import save, save_figure
from rnnrepro.analysis.run_files import read_speed_file
from rnnrepro.grid import load_study

study_config = load_study(study)
# the speed rule writes <results>/speed/<study>.json beside <results>/tables/ (per budget: grid.results_dir)
speed = read_speed_file(Path(tables[0]).parents[1] / "speed" / f"{study}.json")
table = speed_table(speed, study_config, artifact)
speed_budget = speed.get("budget") or "this"
table["budget_shapes"] = f"batch {speed['batch_size']}, bptt {speed['bptt']}, vocab {speed['vocab_size']}"
save(table, tables[0])
table

# %% [markdown]
# Each model's time as a multiple of the LSTM's (log scale: twice as slow and twice as fast lie the same
# distance from 1x); 1x is the LSTM as the library computes it, one fused kernel (oneDNN on a CPU, cuDNN on
# a GPU), which a cell written as a loop of operators rarely matches. Filled: ours, the whole LM's training batch and one layer's forward + backward;
# open grey: the paper's, one mark per task. `LSTM (step loop)` is the same LSTM computed step by step
# like the other cells (config/studies/lrn.yaml, model `lstm_loop`): against it the cells are compared
# within one family of implementation, against the LSTM's fused kernel across two.

# %%
import matplotlib.pyplot as plt

from rnnrepro.analysis.plotting import model_names, ratio_axis

TASKS = {"snli": ("SNLI", "o"), "amapolar": ("Amazon polarity", "s"), "yahoo": ("Yahoo", "^"),
         "amafull": ("Amazon full", "v"), "yelppolar": ("Yelp polarity", "D")}
REFERENCE = "lstm"  # every ratio's denominator: the LSTM as the library computes it, one fused kernel
names = model_names(study_config, table["model"])
names[REFERENCE] = "LSTM, fused library kernel"
rows = list(table["model"])
y = {model: len(rows) - 1 - i for i, model in enumerate(rows)}  # the reference (LSTM) on top
fig, ax = plt.subplots(figsize=(9, 0.55 * len(rows) + 1.8))
ax.axvline(1.0, color="0.6", linewidth=0.8)
ax.scatter(table["lm_ratio"], table["model"].map(y) + 0.15, color="tab:blue", s=45, zorder=3,
           label="ours: whole LM, one training batch")
ax.scatter(table["layer_ratio"], table["model"].map(y) + 0.15, color="tab:orange", marker="s", s=40, zorder=3,
           label="ours: one layer, forward + backward")
paper_ratios = []
for task, (word, marker) in TASKS.items():
    column = f"paper_{task}_ratio"
    if column in table:
        others = table[table["model"] != REFERENCE]  # the reference is 1x by definition: one note, not five marks
        ax.scatter(others[column], others["model"].map(y) - 0.15, facecolor="none", edgecolor="0.35", marker=marker,
                   s=30, zorder=3, label=f"paper: {word}")
        paper_ratios += list(others[column])
if REFERENCE in y:
    ax.annotate("the 1x reference (fused library kernel: oneDNN on a CPU, cuDNN on a GPU)",
                (1.0, y[REFERENCE] - 0.2), xytext=(6, 0), textcoords="offset points", fontsize=8, color="0.3",
                va="center")
ax.set_yticks([y[m] for m in rows], [names[m] for m in rows])
ratio_axis(ax, "x", list(table["lm_ratio"]) + list(table["layer_ratio"]) + paper_ratios)
ax.set_xlabel("training time / the fused library LSTM's (log scale; left of 1x: faster)")
ax.grid(axis="x", color="0.92")
ax.set_axisbelow(True)
ax.set_title(f"LRN study, {speed_budget} budget, PTB language model: training time against the fused library LSTM\n(ours: {table['device'].iloc[0]}, "
             f"{table['budget_shapes'].iloc[0]}; paper: its TensorFlow models on its GPU)", fontsize=10)
ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
save_figure(fig, figures[0])
