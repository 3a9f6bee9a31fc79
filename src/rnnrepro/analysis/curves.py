"""Learning curves of every model of an artifact on one figure: validation perplexity after each epoch, one
colour per model (a cell of your own among them), its mean over seeds bold and each seed faint.

A finetuned model's curve goes on from its base's (the cell named by ``init_from`` in its config.json):
the base's epochs, then the finetuning's, numbered on, the finetuning's part dashed. The mean runs over
the epochs every seed reached; past that, the seeds that went on are drawn alone. Each run's end is
marked as elsewhere (rnnrepro.analysis.plotting): a square where it stopped by itself, an open triangle
where its epoch cap stopped it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from .plotting import counted, data_label, end_marker_legend, mean_curve, plain_log_axis
from .results import read_cells
from .run_files import read_history


def _perplexity(history: pd.DataFrame) -> pd.Series:
    if "val_ppl" in history:
        return pd.to_numeric(history["val_ppl"])
    return history["val_loss"].map(math.exp)


def read_curves(metrics_files: list[str]) -> pd.DataFrame:
    """Every epoch of every run: dataset, corpus, model, fraction, seed, ``capped`` (its epoch cap stopped
    the run), ``stage`` (``train``; ``base`` and ``finetune`` for a finetuned model), ``epoch`` (numbered on
    through a base and its finetuning) and ``val_ppl``."""
    cells = read_cells(metrics_files)
    frames = []
    for path, cell in zip(metrics_files, cells.itertuples()):
        run_dir = Path(path).parent
        init_from = json.loads((run_dir / "config.json").read_text()).get("init_from")
        parts = [("train", run_dir)] if not init_from else [("base", Path(init_from).parent), ("finetune", run_dir)]
        offset = 0
        for stage, folder in parts:
            history = read_history(folder)
            frames.append(pd.DataFrame({
                "dataset": cell.dataset, "corpus": cell.corpus, "model": cell.model, "fraction": cell.fraction,
                "seed": cell.seed, "budget": cell.budget, "capped": bool(cell.capped) and stage != "base",
                "stage": stage, "epoch": history["epoch"].to_numpy() + offset, "val_ppl": _perplexity(history)}))
            offset += int(history["epoch"].max())
    return pd.concat(frames, ignore_index=True)


def curves_figure(curves: pd.DataFrame, names: dict[str, str], title: str) -> plt.Figure:
    """One panel per dataset (and fraction, where an artifact has several): every model's curves."""
    panels = list(dict.fromkeys(zip(curves["dataset"], curves["fraction"])))
    several_fractions = curves["fraction"].nunique() > 1
    models = list(dict.fromkeys(curves["model"]))
    colours = dict(zip(models, sns.color_palette("tab10" if len(models) <= 10 else "husl", n_colors=len(models))))
    fig, axes = plt.subplots(1, len(panels), figsize=(7.5 * len(panels), 5.2), squeeze=False)
    for ax, (dataset, fraction) in zip(axes[0], panels):
        panel = curves[(curves["dataset"] == dataset) & (curves["fraction"] == fraction)]
        for model in models:
            runs = panel[panel["model"] == model]
            if runs.empty:
                continue
            colour = colours[model]
            for _, run in runs.groupby("seed", sort=True):  # each seed faint, its finetuning dashed
                run = run.sort_values("epoch")
                for stage, part in run.groupby("stage", sort=False):
                    joined = pd.concat([run[(run["stage"] == "base")].tail(1), part]) if stage == "finetune" else part
                    ax.plot(joined["epoch"], joined["val_ppl"], color=colour, linewidth=0.8, alpha=0.3,
                            linestyle="--" if stage == "finetune" else "-")
                capped = bool(run["capped"].iloc[-1])
                ax.plot(run["epoch"].iloc[-1], run["val_ppl"].iloc[-1], ">" if capped else "s", color=colour,
                        markersize=4, markerfacecolor="white" if capped else colour, alpha=0.6, linestyle="none")
            mean = mean_curve(runs, "epoch", "val_ppl")
            ax.plot(mean["epoch"], mean["val_ppl"], color=colour, linewidth=2,
                    label=f"{names.get(model, model)} ({counted(runs['seed'].nunique(), 'seed')})")
        # the top: the highest perplexity any run has a tenth of the way in, so the ends stay apart
        tenth = panel.groupby(["model", "seed"])["epoch"].transform(lambda e: e.max() // 10 + 1)
        top, bottom = panel.loc[panel["epoch"] == tenth, "val_ppl"].max(), panel["val_ppl"].min()
        if not (math.isfinite(top) and top > bottom):
            top = panel["val_ppl"].max()
        plain_log_axis(ax, "y", [bottom, top])
        # a margin below the lowest point of a twentieth of the range shown (on the log axis), so that a
        # short run's few points (77.6 to 77.4) fill the panel instead of its top few per cent
        margin = max((top / bottom) ** 0.05, 1.001)
        ax.set_ylim(bottom / margin, top * (margin if top == panel["val_ppl"].max() else 1))
        where = data_label(dataset, panel["corpus"].iloc[0]) + (f", {fraction} % of its training split"
                                                                if several_fractions else "")
        ax.set(xlabel="epoch", ylabel="validation perplexity", title=where)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(color="0.93")
    handles = axes[0][0].get_legend_handles_labels()[0] + [
        Line2D([], [], color="0.3", linewidth=2, label="mean over seeds (epochs every seed reached)"),
        Line2D([], [], color="0.3", linewidth=0.8, alpha=0.4, label="a seed")]
    if (curves["stage"] == "finetune").any():
        handles.append(Line2D([], [], color="0.3", linewidth=0.8, linestyle="--", alpha=0.6,
                              label="a seed's finetuning, after its base"))
    handles += end_marker_legend()
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 4), fontsize=8.5,
               bbox_to_anchor=(0.5, -0.01))
    fig.suptitle(f"{title} ({curves['budget'].iloc[0]} budget)")
    rows = math.ceil(len(handles) / min(len(handles), 4))
    fig.tight_layout(rect=(0, 0.045 * rows + 0.02, 1, 1))
    return fig
