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
# # Nested LSTM on text8 autocomplete: test results, convergence, example predictions
#
# GRU (2 x 600), LSTM (2 x 600) and Nested LSTM (1 x 600, depth 2) trained for one pass over the
# autocomplete training split (batch 64, Adam). Test cross entropy is the mean over test observations
# of each one's mean over its known-word characters; accuracy is over every character (unknown-word
# targets included), as the published numbers were measured. `paper_*` columns are the published values
# from `config/studies/nlstm.yaml`. Under the smoke budget the models are tiny and trained on a synthetic
# stand-in (column `corpus`), so only the shape of the results is comparable, not the numbers.

# %% tags=["parameters"]
study = "nlstm"
artifact = "test"
metrics_files = []
tables = ["results/tables/nlstm_test.csv"]
figures = ["results/figures/nlstm_convergence.png", "results/figures/nlstm_examples.png"]

# %%
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import seaborn as sns

from rnnrepro import grid
from rnnrepro.analysis.autocomplete import early_validation_loss, example_predictions, test_table, validation_curves
from rnnrepro.analysis.notebook import save, save_figure, setup

study_config, cells = setup(study, metrics_files)
curves = validation_curves(metrics_files)
# early_val_loss: the validation loss an eighth of the way into training (the scorecard's "at first")
table = test_table(cells, study_config, artifact).merge(early_validation_loss(curves), on=["model", "seed"])
save(table, tables[0], complete=["test_cross_entropy", "test_accuracy_pct"])
table

# %% [markdown]
# Validation loss (the same fixed validation observations at every check) against training
# iterations. The published observation: the Nested LSTM converges fastest at first and ends worst.

# %%
label = f"budget {cells['budget'].iloc[0]}, corpus {cells['corpus'].iloc[0]}"
fig, ax = plt.subplots(figsize=(7, 4))
sns.lineplot(data=curves, x="iteration", y="val_loss", hue="model", units="seed", estimator=None, ax=ax)
ax.set(xlabel="training iterations (batches of 64)", ylabel="validation cross entropy",
       title=f"Autocomplete convergence ({label})")
save_figure(fig, figures[0])

# %% [markdown]
# The first test observations with each model's top prediction under every character (first seed;
# green: the target word, red: another word). Drawing them needs each model's trained weights
# (`model.pt`) and the prepared test split; a render from `records/`, which keep neither, writes a
# figure that says so instead, and the table and convergence figure above stand on their own.

# %%
EXAMPLES, CHARS = 3, 48
models = study_config["artifacts"][artifact]["models"]
first_seed = cells.sort_values("seed").drop_duplicates("model").set_index("model")
run_dirs = {model: Path(grid.Cell(study, cell.corpus, model, cell.fraction, cell.seed, cell.budget).run_dir)
            for model, cell in first_seed.iterrows()}
absent = [str(run_dirs[model] / "model.pt") for model in models if not (run_dirs[model] / "model.pt").exists()]
if absent:
    reason = (f"Example predictions not drawn: {len(absent)} of the {len(models)} models' weights are absent "
              f"(e.g. {absent[0]}); records keep metrics, not weights. Train the cells to draw this figure.")
    print(reason)
    fig, ax = plt.subplots(figsize=(9, 1.6))
    ax.text(0.5, 0.5, "\n".join(textwrap.wrap(reason, 90)), ha="center", va="center", fontsize=9)
    ax.set_axis_off()
else:
    predictions = {model: example_predictions(run_dirs[model] / "model.pt", EXAMPLES, CHARS) for model in models}
    fig, axes = plt.subplots(EXAMPLES, 1, figsize=(CHARS * 0.3, EXAMPLES * (1 + len(models)) * 0.9))
    for example, ax in enumerate(axes):
        reference = predictions[models[0]][example]
        rows = [("target", reference["target"])] + [(m, predictions[m][example]["predicted"]) for m in models]
        for column, char in enumerate(reference["text"]):
            ax.text(column, len(rows), "␣" if char == " " else char, ha="center", va="bottom", fontsize=11,
                    family="monospace")
            for row, (name, words) in enumerate(rows):
                right = words[column] == reference["target"][column]
                ax.text(column, len(rows) - 1 - row, words[column], rotation=90, ha="center", va="bottom",
                        fontsize=6, color="0.3" if name == "target" else ("green" if right else "red"))
        ax.set_yticks([len(rows) - 1 - row + 0.35 for row in range(len(rows))], [name for name, _ in rows])
        ax.set_xlim(-1, CHARS)
        ax.set_ylim(-0.1, len(rows) + 0.6)
        ax.set_xticks([])
        for side in ("top", "right", "bottom"):
            ax.spines[side].set_visible(False)
    fig.suptitle(f"Top prediction under each character ({label})")
save_figure(fig, figures[1])
