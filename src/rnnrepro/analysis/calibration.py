"""The trainer against published models: the `calibration` artifacts of the pru and lrn studies.

Each row is one published model trained by this project's trainer in its authors' recipe: Zaremba et
al. (2014)'s LSTMs (pru), the AWD-LSTM as its first release's README command trains it (pru), the
mixture of softmaxes as the command of zihangdai/mos issue 12 trains it (lrn). Two kinds of published
number sit beside ours:

- the final validation and test perplexity (``paper_val_ppl``, ``paper_test_ppl``), for runs of all the
  recipe's epochs (Zaremba's at the cpu and reduced budgets, every model at the paper budget);
- the validation perplexity the authors' training log printed after epochs 1 and 2
  (``paper_val_ppl_epoch1``, ``paper_val_ppl_epoch2``), beside ours after the same epochs of every seed
  (``val_ppl_epoch1``, ``val_ppl_epoch2`` and their ``_std`` and ``_samples``). Those need only the first
  epochs, which the paper_start budget trains at the published size on a CPU.

A paper number the source does not give is NaN (the AWD-LSTM's README gives no second epoch; the
issue's log no final test number for its command).
"""

from __future__ import annotations

import math

import pandas as pd

from .results import in_order, paper_values, summarise_seeds

NAMES = {"zaremba_small": "Zaremba et al.'s small LSTM (2 x 200)",
         "zaremba_medium": "Zaremba et al.'s medium LSTM (2 x 650, dropout 0.5)",
         "awd_lstm": "AWD-LSTM (3 x 1150, its first release's PTB command)",
         "mos": "Mixture of softmaxes (3 LSTM layers, 16 experts; mos issue 12's command)"}
#: the epochs whose validation perplexity the authors' logs printed
FIRST_EPOCHS = (1, 2)
PAPER_COLUMNS = ["paper_params", "paper_val_ppl", "paper_test_ppl",
                 *(f"paper_val_ppl_epoch{epoch}" for epoch in FIRST_EPOCHS)]


def epoch_values(histories: pd.DataFrame, epochs=FIRST_EPOCHS) -> pd.DataFrame:
    """Each run's validation perplexity after each of ``epochs`` (``val_ppl_epoch<k>``; NaN for a run
    that did not reach it), one row per (dataset, model, seed)."""
    keys = ["dataset", "model", "seed"]
    runs = histories[keys].drop_duplicates()
    for epoch in epochs:
        at = histories.loc[histories["epoch"] == epoch, [*keys, "val_ppl"]]
        runs = runs.merge(at.rename(columns={"val_ppl": f"val_ppl_epoch{epoch}"}), on=keys, how="left")
    return runs


def calibration_table(cells: pd.DataFrame, histories: pd.DataFrame, study: dict) -> pd.DataFrame:
    """The calibration artifact's table, one row per (dataset, model): the final validation and test
    perplexity (the weights the recipe scores, ``scored_epoch``: the best validation epoch's, or the
    last epoch's under `score: final`; read with the test batch size: the test split as one stream, as
    the authors' run_test), the last epoch's validation perplexity (read as the recipe's validation
    streams, as their run_valid), the validation after epochs 1 and 2 of every seed, the parameters,
    epochs and training minutes, beside the published numbers (NaN where the source gives none)."""
    last = (histories.sort_values("epoch").groupby(["dataset", "model", "seed"]).tail(1)
            [["dataset", "model", "seed", "val_ppl"]].rename(columns={"val_ppl": "last_epoch_val_ppl"}))
    # runs from before `score` existed scored their best epoch
    scored = cells["scored_epoch"] if "scored_epoch" in cells else cells["best_epoch"]
    cells = (cells.merge(last, on=["dataset", "model", "seed"], how="left")
             .merge(epoch_values(histories), on=["dataset", "model", "seed"], how="left")
             .assign(train_minutes=cells["train_seconds"] / 60, scored_epoch=scored.fillna(cells["best_epoch"]).to_numpy()))
    keys = ["dataset", "corpus", "model", "budget", "params"]
    table = summarise_seeds(cells, keys, ["val_ppl", "test_ppl",
                                          *(f"val_ppl_epoch{epoch}" for epoch in FIRST_EPOCHS)])
    means = (cells.groupby(keys, sort=False)[["epochs", "scored_epoch", "train_minutes", "last_epoch_val_ppl"]]
             .mean().reset_index())
    paper = paper_values(study, "calibration")
    paper = (paper if len(paper) else pd.DataFrame(columns=["dataset", "model"])).reindex(
        columns=["dataset", "model", *PAPER_COLUMNS])
    table = table.merge(means, on=keys, how="left").merge(paper, on=["dataset", "model"], how="left")
    spec = study["artifacts"]["calibration"]
    return in_order(table, {"dataset": spec["datasets"], "model": spec["models"]})


def draw_model(ax, row, runs: pd.DataFrame) -> None:
    """One panel: every seed's validation perplexity per epoch; the published final validation and
    test perplexity as lines and the log's first epochs as points with the claim's band (where the
    source gives them); our test perplexity at the scored epoch."""
    from matplotlib.ticker import MaxNLocator

    from .plotting import counted

    # runs of the first epochs only (the paper_start budget): the published final numbers, a fifth of
    # these, are named in the legend but not drawn, so the first epochs keep the height of the panel
    first_epochs_only = bool(len(runs)) and runs["epoch"].max() <= max(FIRST_EPOCHS)
    for seed, run in runs.groupby("seed"):
        ax.plot(run["epoch"], run["val_ppl"], "o-", markersize=6 if first_epochs_only else 3,
                label=f"ours, seed {seed}: validation")
    for value, style, colour, what in ((row.paper_val_ppl, "--", "tab:gray", "validation"),
                                       (row.paper_test_ppl, ":", "black", "test")):
        if math.isnan(value):
            continue
        if first_epochs_only:
            ax.plot([], [], linestyle=style, color=colour, label=f"published: final {what} {value:g} (below this panel)")
        else:
            ax.axhline(value, color=colour, linestyle=style, label=f"published: {what} {value:g}")
    points = [(epoch, getattr(row, f"paper_val_ppl_epoch{epoch}")) for epoch in FIRST_EPOCHS]
    points = [(epoch, value) for epoch, value in points if not math.isnan(value)]
    if points:
        epochs, values = zip(*points)
        band = [0.1 * v for v in values]  # the claims' tolerance (config/studies: *_first_epoch_calibration)
        # a little to the left of the epoch, so that ours at the same epoch stays in sight
        ax.errorbar([e - 0.06 for e in epochs], values, yerr=band, fmt="D", color="black", capsize=4, markersize=5,
                    label="authors' log after epoch " + ", ".join(f"{e}: {v:g}" for e, v in points) + " (band ±10 %)")
    if not math.isnan(row.test_ppl):
        # beside the epoch's validation points where the run has only its first epochs
        ax.plot(row.scored_epoch + (0.06 if first_epochs_only else 0), row.test_ppl, "s", color="tab:red",
                label=f"ours: test {row.test_ppl:.1f} (epoch {row.scored_epoch:g})")
    ax.set(xlabel="epoch", ylabel="validation perplexity",
           title=f"{NAMES.get(row.model, row.model)}\n{row.corpus}, {row.budget} budget, "
                 f"{counted(len(runs['seed'].unique()), 'seed')}, {row.params / 1e6:.2f} M parameters")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if first_epochs_only:
        last = int(max([runs["epoch"].max(), *(epoch for epoch, _ in points)]))
        ax.set_xlim(0.5, last + 0.5)
        ax.set_xticks(range(1, last + 1))
    if first_epochs_only:  # beside the panel: the points and the band fill its height
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    else:
        ax.legend(fontsize=8)


def calibration_figure(table: pd.DataFrame, histories: pd.DataFrame, title: str):
    """One panel per row of the calibration table (:func:`draw_model`)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(table), figsize=(6.5 * len(table), 4.5), squeeze=False)
    for ax, row in zip(axes[0], table.itertuples()):
        draw_model(ax, row, histories[(histories["model"] == row.model) & (histories["dataset"] == row.dataset)])
    fig.suptitle(title)
    fig.tight_layout()
    return fig
