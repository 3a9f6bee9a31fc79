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
from pathlib import Path

import matplotlib.pyplot as plt
import seaborn as sns

from rnnrepro import grid
from rnnrepro.analysis.autocomplete import (EARLY_SHARE, early_marks, early_validation_loss, example_predictions,
                                            test_table, validation_curves)
from rnnrepro.analysis.notebook import save, save_figure, setup
from rnnrepro.analysis.plotting import counted, mean_curve, model_names, seed_curves, text_figure

study_config, cells = setup(study, metrics_files)
curves = validation_curves(metrics_files)
# early_val_area: the mean validation loss over the first quarter of the shortest run's training, the same
# batches for every model (the scorecard's "at first")
table = test_table(cells, study_config, artifact).merge(early_validation_loss(curves), on=["model", "seed"])
save(table, tables[0], complete=["test_cross_entropy", "test_accuracy_pct"])
table

# %% [markdown]
# Validation loss (the same fixed validation observations at every check) against training
# iterations. The published observation: the Nested LSTM converges fastest at first and ends worst.
# Thin lines: each seed; thick: the mean over seeds. The dotted line ends the first quarter of the
# shortest run's training (runs that patience stopped differ in length; the same batches for every model),
# over which the scorecard reads "at first": each model's short dashed level, ending in a diamond, is its
# mean validation loss over that quarter (`early_val_area_mean`, the value the claim compares). Right: the
# second half of training, closer, where the models end (the final ranking itself is read from the test
# cross entropy in the table). Dash-dotted: the loss of predicting the training split's word
# frequencies while ignoring the input, the plateau every run reaches in its first steps; a run that
# ends near it never learned (the scorecard flags it `stalled`).

# %%
budget, corpus = cells["budget"].iloc[0], cells["corpus"].iloc[0]
data = "text8 autocomplete" if corpus == "text8_autocomplete" else f"stand-in corpus {corpus}"
label = f"{budget} budget, {data}, {counted(cells['seed'].nunique(), 'seed')}"
names = model_names(study_config, curves["model"])
models = [m for m in study_config["artifacts"][artifact]["models"] if m in set(curves["model"])]
colours = dict(zip(models, sns.color_palette(n_colors=len(models))))
marks = early_marks(table, curves, study_config).set_index("model")
# the loss of predicting the training split's word frequencies, ignoring the input: a run that ends near
# it never learned (the scorecard's `stalled`); runs recorded before it was written lack it
known = cells["val_unigram_loss"].dropna() if "val_unigram_loss" in cells else []
unigram = float(known.mean()) if len(known) else None
fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
for ax in axes:
    for model in models:
        runs = curves[curves["model"] == model]
        seed_curves(ax, runs, "iteration", "val_loss", colours[model], linewidth=0.7, alpha=0.45, end_markers=False)
        mean = mean_curve(runs, "iteration", "val_loss")
        ax.plot(mean["iteration"], mean["val_loss"], color=colours[model], linewidth=2.2, label=names[model])
        mark = marks.loc[model]
        ax.plot([mark["start"], mark["end"]], [mark["value"]] * 2, "--", color=colours[model], linewidth=1.6, zorder=5)
        ax.plot(mark["end"], mark["value"], "D", color=colours[model], markeredgecolor="black", markersize=7,
                zorder=6)
    ax.axvline(marks["end"].mean(), color="0.4", linestyle=":", linewidth=1)
    if unigram is not None:
        ax.axhline(unigram, color="0.55", linestyle="-.", linewidth=1)
    ax.set(xlabel="training iterations (batches of 64)", ylabel="validation cross entropy (nats)")
    ax.grid(color="0.93")
half = curves["iteration"].max() / 2
shown = curves[curves["iteration"] >= half]
axes[1].set_xlim(half, curves["iteration"].max() * 1.01)
spread = shown["val_loss"].max() - shown["val_loss"].min()
axes[1].set_ylim(shown["val_loss"].min() - 0.1 * spread, shown["val_loss"].max() + 0.1 * spread)
axes[0].set_title(f"the whole run; dotted: the first {EARLY_SHARE:.0%} of the shortest run, where the claim reads \"at first\"",
                  fontsize=10)
axes[1].set_title("the second half, closer")
axes[0].legend(handles=axes[0].get_legend_handles_labels()[0] + [
    plt.Line2D([], [], color="0.4", linestyle=":", label=f"end of the first {EARLY_SHARE:.0%} of the shortest run"),
    plt.Line2D([], [], marker="D", color="0.5", markeredgecolor="black", linestyle="--",
               label="mean loss over it, seeds' mean (the scorecard's value)")]
    + ([plt.Line2D([], [], color="0.55", linestyle="-.", label="the training split's word frequencies, "
                                                                  "input ignored")] if unigram is not None else []),
    fontsize=8)
fig.suptitle(f"Autocomplete convergence: thin lines each seed, thick the mean ({label})")
fig.tight_layout()
save_figure(fig, figures[0])

# %% [markdown]
# The first test observations with each model's top prediction under every character (first seed;
# green: the target word, red: another word). Drawing them needs each model's trained weights
# (`model.pt`) and the prepared test split; a render from `records/`, which keep neither, writes a
# figure that says so instead, and the table and convergence figure above stand on their own.

# %%
EXAMPLES, CHARS = 3, 48
first_seed = cells.sort_values("seed").drop_duplicates("model").set_index("model")
run_dirs = {model: Path(grid.Cell(study, cell.corpus, model, cell.fraction, cell.seed, cell.budget).run_dir)
            for model, cell in first_seed.iterrows()}
# the models with a cell here (a render from records in part may have some models' seeds only)
models = [model for model in study_config["artifacts"][artifact]["models"] if model in run_dirs]
absent = [str(run_dirs[model] / "model.pt") for model in models if not (run_dirs[model] / "model.pt").exists()]
if absent:
    reason = (f"Example predictions not drawn: {len(absent)} of the {len(models)} models' weights are absent "
              f"(e.g. {absent[0]}); records keep metrics, not weights. Train the cells to draw this figure.")
    print(reason)
    fig = text_figure(reason)
else:
    predictions = {model: example_predictions(run_dirs[model] / "model.pt", EXAMPLES, CHARS) for model in models}
    fig, axes = plt.subplots(EXAMPLES, 1, figsize=(CHARS * 0.36, EXAMPLES * (1 + len(models)) * 1.1))
    for example, ax in enumerate(axes):
        reference = predictions[models[0]][example]
        rows = [("target", reference["target"])] + [(names[m], predictions[m][example]["predicted"]) for m in models]
        for column, char in enumerate(reference["text"]):
            ax.text(column, len(rows), "␣" if char == " " else char, ha="center", va="bottom", fontsize=11,
                    family="monospace")
            for row, (name, words) in enumerate(rows):
                right = words[column] == reference["target"][column]
                ax.text(column, len(rows) - 1 - row, words[column], rotation=90, ha="center", va="bottom",
                        fontsize=8, color="0.3" if name == "target" else ("tab:green" if right else "tab:red"))
        ax.set_yticks([len(rows) - 1 - row + 0.35 for row in range(len(rows))], [name for name, _ in rows])
        ax.set_xlim(-1, CHARS)
        ax.set_ylim(-0.1, len(rows) + 0.6)
        ax.set_xticks([])
        for side in ("top", "right", "bottom"):
            ax.spines[side].set_visible(False)
    fig.legend(handles=[plt.Line2D([], [], color=c, marker="s", linestyle="none", label=w) for c, w in
                        (("0.3", "the word being typed"), ("tab:green", "predicted: the right word"),
                         ("tab:red", "predicted: another word"))], loc="upper right", fontsize=10)
    fig.suptitle(f"Each model's top prediction of the whole word under every character ({label})")
save_figure(fig, figures[1])
