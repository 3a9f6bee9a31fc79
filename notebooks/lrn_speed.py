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
from rnnrepro.configuration import load_study

study_config = load_study(study)
# the speed rule writes <results>/speed/<study>.json beside <results>/tables/ (per budget: grid.results_dir)
speed = read_speed_file(Path(tables[0]).parents[1] / "speed" / f"{study}.json")
table = speed_table(speed, study_config, artifact)
table["budget_shapes"] = f"batch {speed['batch_size']}, bptt {speed['bptt']}, vocab {speed['vocab_size']}"
save(table, tables[0])
table

# %%
ratio_columns = ["lm_ratio", "layer_ratio"] + [c for c in table if c.startswith("paper_") and c.endswith("_ratio")]
plot = table.set_index("model")[ratio_columns]
ax = plot.plot.bar(figsize=(9, 4), width=0.85)
ax.axhline(1.0, color="black", linewidth=0.8)
ax.set_ylabel("time / LSTM time")
ax.set_title(f"Training time relative to the LSTM (ours: {speed['device_name']}; paper: TF models, its GPU)")
ax.set_yscale("log")  # ratios: 2x slower and 2x faster are the same distance from 1
ax.legend(fontsize=8, ncol=2)
save_figure(ax.figure, figures[0])
