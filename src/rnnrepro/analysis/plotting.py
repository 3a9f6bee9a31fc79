"""What the artifact figures share: models named in words, every seed drawn, runs their epoch cap
stopped marked as unfinished, and the paper's numbers where ours can be read against them.

- :func:`model_names`: "LSTM M=1000", "PRU g=4 M=1400", "AWD-PRU g=4 M=1400 finetuned" from the study
  file's model definitions (the paper's sizes; a budget scales them, :func:`scale_note` says to what).
- :func:`seed_curves`: one line per run (never one line through several seeds), a marker where the run
  ended: a square where it stopped by its own rule, an open triangle where its epoch cap stopped it.
- :func:`seed_rows`: per-seed points of a value per row, their mean and standard deviation; runs the
  cap stopped are open markers.
- :func:`relative_change`: each row against a baseline row, in percent, ours per seed and the paper's:
  what a claim "A below B" compares, on one scale whatever the models' sizes (our small models sit at
  four times the paper's perplexity; their differences do not).
- :func:`ratio_axis`, :func:`plain_log_axis`: log axes whose ticks read as numbers.

A run is *capped* (``results.read_cells``' column) when its recipe stops by itself (early stopping or
the non-monotone test) yet it trained every epoch its cap allows: its numbers are those of a run that
had not finished. Figures draw such runs with open markers and say so in their legends.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator

# cell id -> the name papers use
CELL_WORDS = {"lstm": "LSTM", "lstm_single_bias": "LSTM", "gru": "GRU", "gru_single_bias": "GRU", "pru": "PRU",
              "nested_lstm": "Nested LSTM", "lrn": "LRN", "atr": "ATR", "sru": "SRU", "grid_lstm": "Grid LSTM",
              "rhn": "RHN", "ps_lru": "PS-LRU", "rg_lru": "RG-LRU", "lru": "LRU"}
SUBSAMPLE_WORDS = {"skip": "skip", "max": "max pool", "avg": "avg pool", "conv": "convolution"}
OURS, PAPER = "tab:blue", "black"
CAPPED_LABEL = "open: stopped by its epoch cap, not by its own rule"


# ---------------------------------------------------------------- names

#: dataset ids in words, for titles and panels
DATASET_WORDS = {"ptb": "PTB", "wt2": "WikiText-2", "ptb_char": "PTB characters", "warpeace": "War and Peace",
                 "enwik8": "enwik8", "text8": "text8", "text8_autocomplete": "text8 autocomplete",
                 "all": "all datasets pooled"}


def dataset_words(dataset: str) -> str:
    """"warpeace" -> "War and Peace"; an id this list lacks (a stand-in corpus) as it is."""
    return DATASET_WORDS.get(dataset, dataset)


def _cell_word(definition: dict) -> str:
    cell, options = definition["cell"], definition.get("cell_options") or {}
    # the PRU with one group, one level and no residual is an LSTM computed step by step (cells/pru.py)
    if cell == "pru" and options.get("groups") == 1 and options.get("levels") == 1 and options.get("residual") is False:
        return "LSTM (step loop)"
    return CELL_WORDS.get(cell, "")


def _shape_traits(definition: dict) -> dict[str, str]:
    """The architecture's distinguishing values, in the order a name gives them."""
    options = definition.get("cell_options") or {}
    traits = {}
    if "groups" in options:
        traits["g"] = f"g={options['groups']}"
    if "levels" in options:
        traits["K"] = f"K={options['levels']}"
    if isinstance(definition.get("hidden_size"), int):
        traits["M"] = f"M={definition['hidden_size']}"
    if definition.get("param_budget"):
        traits["params"] = f"{definition['param_budget'] / 1e6:g} M parameters"
    if "context_transform" in options or "input_transform" in options:
        traits["transforms"] = f"{options.get('context_transform', 'glt')}/{options.get('input_transform', 'pt')}".upper()
    if options.get("residual") is False:
        traits["residual"] = "no residual"
    if options.get("pyramid_groups", 1) > 1:
        traits["pyramid"] = "grouped pyramid"
    if "subsample" in options:
        traits["subsample"] = SUBSAMPLE_WORDS.get(options["subsample"], options["subsample"])
    if "depth" in options:
        traits["depth"] = f"depth {options['depth']}"
    if "activation" in options:
        traits["activation"] = f"g={options['activation']}"
    return traits


def _recipe_traits(definition: dict, study: dict) -> dict[str, str]:
    recipe = study.get("recipes", {}).get(definition.get("recipe"), {})
    return {"regime": "AWD-" if recipe.get("dropout_kind") == "locked" else "",
            "dropout": f"dropout {recipe['dropout_output']:g}" if "dropout_output" in recipe else "",
            "weight_drop": f"weight drop {recipe['weight_drop']:g}" if recipe.get("weight_drop") else "",
            "finetuned": "finetuned" if definition.get("init_from") else ""}


def model_names(study: dict, models) -> dict[str, str]:
    """Each model id -> its name in words: the cell's name, then what tells it apart.

    Architecture values (g, K, M, ...) are named where they differ between the study's models of the
    same cell and depth; recipe values (AWD dropouts, the dropout rate, weight drop, finetuning) where
    they differ between the models named together. A model the study file does not define (or a cell
    of your own) keeps its id."""
    models = list(dict.fromkeys(models))
    definitions = study["models"]
    known = [m for m in models if m in definitions and _cell_word(definitions[m])]

    def kin(model):  # the study's models of the same cell and depth
        word, layers = _cell_word(definitions[model]), definitions[model].get("layers")
        return [m for m, d in definitions.items() if _cell_word(d) == word and d.get("layers") == layers]

    names = {m: m for m in models}
    for model in known:
        shape = _shape_traits(definitions[model])
        others = [_shape_traits(definitions[m]) for m in kin(model)]
        shown = [text for key, text in shape.items() if len({o.get(key) for o in others}) > 1]
        word = _cell_word(definitions[model])
        named_kin = [m for m in known if _cell_word(definitions[m]) == word]
        recipes = {m: _recipe_traits(definitions[m], study) for m in named_kin}
        varies = {key for key in recipes[model] if len({r[key] for r in recipes.values()}) > 1}
        if "regime" in varies:  # AWD- names the whole regime: its dropout and weight drop are part of it
            varies -= {"dropout", "weight_drop"}
        mine = recipes[model]
        prefix = mine["regime"] if "regime" in varies else ""
        extra = [mine[key] for key in ("dropout", "weight_drop", "finetuned") if key in varies and mine[key]]
        names[model] = " ".join([prefix + word, *shown, *extra])
    return names


def counted(number: int, word: str) -> str:
    """"1 seed", "3 seeds"."""
    return f"{number} {word}{'' if number == 1 else 's'}"


def data_label(dataset: str, corpus: str) -> str:
    """A dataset as a title names it: in words, and the stand-in corpus a budget trained on instead."""
    return dataset_words(dataset) if corpus == dataset else f"{dataset_words(dataset)} (stand-in corpus {corpus})"


def scale_note(cells: pd.DataFrame) -> str:
    """The budget, its widths and seeds, for a figure's title: "cpu budget, M = 96-144, 3 seeds"."""
    parts = [f"{cells['budget'].iloc[0]} budget"]
    if "hidden_size" in cells and cells["hidden_size"].notna().any():
        low, high = int(cells["hidden_size"].min()), int(cells["hidden_size"].max())
        parts.append(f"M = {low}" + (f"-{high}" if high != low else ""))
    seeds = cells.groupby([c for c in ("dataset", "model") if c in cells])["seed"].nunique()
    parts.append(counted(seeds.min(), "seed") if seeds.min() == seeds.max() else f"{seeds.min()}-{seeds.max()} seeds")
    return ", ".join(parts)


# ---------------------------------------------------------------- runs over time

def seed_curves(ax, runs: pd.DataFrame, x: str, y: str, colour, linestyle: str = "-", label: str | None = None,
                linewidth: float = 1.0, alpha: float = 0.8, end_markers: bool = True) -> list:
    """One line per run (a run: one ``seed`` of the rows given), in ``x`` order, and a marker at its
    last point: a square where the run stopped by itself, an open triangle where ``capped`` (a column,
    optional) says its epoch cap stopped it. The first line carries ``label``. Returns the lines."""
    lines = []
    for number, (_, run) in enumerate(runs.groupby("seed", sort=True)):
        run = run.sort_values(x)
        line, = ax.plot(run[x], run[y], linestyle=linestyle, color=colour, linewidth=linewidth, alpha=alpha,
                        label=label if number == 0 else None)
        lines.append(line)
        if end_markers and len(run):
            capped = bool(run["capped"].iloc[-1]) if "capped" in run else False
            ax.plot(run[x].iloc[-1], run[y].iloc[-1], ">" if capped else STOPPED_MARKER, color=colour, markersize=5,
                    markerfacecolor="white" if capped else colour, alpha=alpha, linestyle="none")
    return lines


#: the end of a run that stopped by its own rule (a seed's value elsewhere is a dot: not to be confused)
STOPPED_MARKER = "s"
#: where a mean over seeds ends because a seed stopped (past it, each longer run alone)
MEAN_END_MARKER = "|"


def end_marker_legend(mean_ends: bool = False) -> list:
    """Legend entries for :func:`seed_curves`' end markers."""
    return [Line2D([], [], marker=STOPPED_MARKER, color="0.3", linestyle="none", markersize=5,
                   label="run stopped by itself"),
            Line2D([], [], marker=">", color="0.3", markerfacecolor="white", linestyle="none", markersize=5,
                   label="run stopped by its epoch cap")] + (
        [Line2D([], [], marker=MEAN_END_MARKER, color="0.3", linestyle="none", markersize=10, markeredgewidth=2,
                label="mean ends: a seed stopped there")] if mean_ends else [])


def mean_curve(runs: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """The mean over seeds at each ``x`` every seed reached (runs of unequal length: the common part)."""
    seeds = runs["seed"].nunique()
    counts = runs.groupby(x)[y].count()
    common = counts[counts == seeds].index
    return runs[runs[x].isin(common)].groupby(x, as_index=False)[y].mean()


def mean_and_band(ax, runs: pd.DataFrame, x: str, y: str, colour, label: str | None = None) -> None:
    """The mean over seeds (a line) and their range (a band) where every seed has a point; past that, each
    longer run's own line (thin); every run's end marked as :func:`seed_curves` marks it."""
    mean = mean_curve(runs, x, y)
    common = runs[runs[x].isin(mean[x])]
    band = common.groupby(x)[y].agg(["min", "max"]).reset_index()
    ax.fill_between(band[x], band["min"], band["max"], color=colour, alpha=0.2, linewidth=0)
    ax.plot(mean[x], mean[y], color=colour, linewidth=1.6, label=label)
    last_common = mean[x].max() if len(mean) else -np.inf
    if len(mean) and runs.groupby("seed")[x].max().max() > last_common:  # a seed stopped before the others
        ax.plot(mean[x].iloc[-1], mean[y].iloc[-1], MEAN_END_MARKER, color=colour, markersize=12, markeredgewidth=2)
    for _, run in runs.groupby("seed", sort=True):
        run = run.sort_values(x)
        tail = run[run[x] >= last_common]
        if len(tail) > 1:
            ax.plot(tail[x], tail[y], color=colour, linewidth=0.8, alpha=0.7)
    for _, run in runs.groupby("seed", sort=True):
        run = run.sort_values(x)
        capped = bool(run["capped"].iloc[-1]) if "capped" in run else False
        ax.plot(run[x].iloc[-1], run[y].iloc[-1], ">" if capped else STOPPED_MARKER, color=colour, markersize=5,
                markerfacecolor="white" if capped else colour, linestyle="none")


# ---------------------------------------------------------------- rows of a table

def samples(text) -> list[float]:
    """The per-seed values of a ``<value>_samples`` cell (``v1;v2;v3``, seed order)."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return []
    return [float(v) for v in str(text).split(";")]


def seed_rows(ax, seeds: pd.DataFrame, order: list, value: str = "value", colour=OURS, label: str | None = None,
              offset: float = 0.0, marker: str = "o", jitter: float = 0.06, width: float = 0.16) -> None:
    """Per-seed points of ``value`` for each row (column ``row``, placed at the position of its label in
    ``order``, shifted by ``offset``, spread by up to ``jitter``), open where ``capped``; their mean (a
    bar ``width`` each side) and standard deviation (a vertical line) where a row has two seeds or more."""
    position = {row: i for i, row in enumerate(order)}
    rng = np.random.default_rng(0)  # the same jitter every render
    first = True
    for row, group in seeds.groupby("row", sort=False):
        if row not in position:
            continue
        centre = position[row] + offset
        values = group[value].to_numpy(dtype=float)
        capped = group["capped"].to_numpy(dtype=bool) if "capped" in group else np.zeros(len(group), bool)
        spread = rng.uniform(-jitter, jitter, len(values)) if len(values) > 1 else np.zeros(1)
        ax.scatter(centre + spread[~capped], values[~capped], s=18, color=colour, marker=marker, zorder=3,
                   label=label if first else None)
        ax.scatter(centre + spread[capped], values[capped], s=22, facecolor="white", edgecolor=colour,
                   marker=marker, zorder=3, label=None)
        if len(values) > 1:
            mean, std = values.mean(), values.std(ddof=1)
            ax.plot([centre - width, centre + width], [mean, mean], color=colour, linewidth=2, zorder=4)
            ax.plot([centre, centre], [mean - std, mean + std], color=colour, linewidth=1.2, zorder=4)
        first = False
    ax.set_xticks(range(len(order)), order)
    ax.set_xlim(-0.6, len(order) - 0.4)
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)  # 78.43, not 0.0004 + 7.843e1


def paper_rows(ax, paper: pd.Series, order: list, offset: float = 0.0, label: str = "paper") -> None:
    """The paper's value of each row (``paper``: row -> value, NaN where it gives none) as a diamond."""
    shown = [(i + offset, paper.get(row)) for i, row in enumerate(order) if pd.notna(paper.get(row))]
    if shown:
        ax.scatter(*zip(*shown), marker="D", s=30, facecolor="none", edgecolor=PAPER, linewidth=1.2, zorder=5,
                   label=label)


def relative_change(seeds: pd.DataFrame, paper: pd.Series, baseline) -> tuple[pd.DataFrame, pd.Series]:
    """Each row against the baseline row in percent: ours per seed against the baseline's mean over
    seeds, the paper's against its own baseline number. ``seeds``: columns ``row``, ``value`` (and
    ``capped``); ``paper``: row -> value."""
    base = seeds.loc[seeds["row"] == baseline, "value"].mean()
    ours = seeds.assign(value=100 * (seeds["value"] / base - 1))
    reference = paper.get(baseline)
    theirs = (100 * (paper / reference - 1)) if pd.notna(reference) else paper * np.nan
    return ours, theirs


def compare_with_paper(axes, seeds: pd.DataFrame, paper: pd.Series, order: list, ylabel: str,
                       baseline=None, baseline_name: str | None = None, title: str = "") -> None:
    """Two panels for rows the claims compare. Left: ours, every seed, on our own scale. Right: with a
    ``baseline`` row, each row's change against it in percent, ours (per seed) beside the paper's (one
    scale for both: what the claims read); without one, the paper's own numbers on their own scale."""
    ours_ax, other_ax = axes
    seed_rows(ours_ax, seeds, order, label="ours (a seed)")
    ours_ax.set(ylabel=ylabel, title=f"ours{': ' + title if title else ''}")
    if baseline is not None:
        ours_rel, paper_rel = relative_change(seeds, paper, baseline)
        seed_rows(other_ax, ours_rel, order, label="ours (a seed)")
        paper_rows(other_ax, paper_rel, order, offset=0.22)
        other_ax.axhline(0, color="0.6", linewidth=0.8, zorder=1)
        other_ax.set(ylabel=f"change against {baseline_name or baseline} (%)",
                     title=f"each row against {baseline_name or baseline}: ours and the paper's")
    else:
        paper_rows(other_ax, paper, order)
        other_ax.set_xticks(range(len(order)), order)
        other_ax.set_xlim(-0.6, len(order) - 0.4)
        other_ax.set(ylabel=ylabel, title="the paper's numbers")
    for ax in axes:
        tidy_rows_axis(ax)


def tidy_rows_axis(ax) -> None:
    """Slanted row names and a light horizontal grid behind the points."""
    ax.tick_params(axis="x", labelrotation=30)
    for tick in ax.get_xticklabels():
        tick.set_horizontalalignment("right")
    ax.grid(axis="y", color="0.92")
    ax.set_axisbelow(True)


def compare_handles(capped: bool = False, paper: bool = True, colour=OURS) -> list:
    """Legend entries for :func:`seed_rows` and :func:`paper_rows` marks (``colour``: ours, or a neutral
    grey where each row has a colour of its own)."""
    handles = [Line2D([], [], marker="o", color=colour, linestyle="none", markersize=5, label="ours: a seed"),
               Line2D([], [], color=colour, linewidth=2, label="ours: mean, line: ± 1 sd over seeds")]
    if capped:
        handles.append(Line2D([], [], marker="o", color=colour, markerfacecolor="white", linestyle="none",
                              markersize=5, label=CAPPED_LABEL))
    if paper:
        handles.append(Line2D([], [], marker="D", color=PAPER, markerfacecolor="none", linestyle="none",
                              markersize=5, label="the paper"))
    return handles


def compare_legend(ax, capped: bool = False, paper: bool = True) -> None:
    """The legend of :func:`compare_with_paper`'s marks, outside the axes (it never covers a mark)."""
    ax.legend(handles=compare_handles(capped, paper), fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1),
              borderaxespad=0)


# ---------------------------------------------------------------- axes

def ratio_axis(ax, axis: str = "y", values=()) -> None:
    """A log2 axis for ratios (2x slower and 2x faster the same distance from 1), ticked at powers of
    two spanning ``values`` and labelled as plain ratios: 0.25x, 0.5x, 1x, 2x."""
    finite = [v for v in values if v and np.isfinite(v) and v > 0] or [1.0]
    low, high = math.floor(math.log2(min(finite + [1.0]))), math.ceil(math.log2(max(finite + [1.0])))
    ticks = [2.0 ** k for k in range(low, high + 1)]
    scale = ax.set_xscale if axis == "x" else ax.set_yscale
    scale("log", base=2)
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(FixedLocator(ticks))
    target.set_minor_locator(NullLocator())
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    limits = (ticks[0] / 1.15, ticks[-1] * 1.15)
    (ax.set_xlim if axis == "x" else ax.set_ylim)(*limits)


def plain_log_axis(ax, axis: str = "y", values=()) -> None:
    """A log axis whose ticks are plain numbers from the 1-2-3-5 series spanning ``values`` (200, 300,
    500, 1000), not powers of ten with a few unlabelled minor ticks."""
    finite = [v for v in values if v and np.isfinite(v) and v > 0]
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    target = ax.yaxis if axis == "y" else ax.xaxis
    if finite:
        low, high = min(finite), max(finite)
        ticks = [m * 10.0 ** k for k in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
                 for m in (1, 1.5, 2, 3, 5, 7)]
        ticks = [t for t in ticks if low / 1.1 <= t <= high * 1.1]
        if len(ticks) < 3:  # a narrow range (78 to 85): evenly spaced round numbers instead
            ticks = [t for t in MaxNLocator(5, steps=[1, 2, 5, 10]).tick_values(low, high) if t > 0]
        target.set_major_locator(FixedLocator(ticks))
    target.set_minor_locator(NullLocator())
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def text_figure(message: str, width: float = 9) -> plt.Figure:
    """A figure holding only a sentence: what a reader sees where a figure cannot be drawn."""
    import textwrap

    fig, ax = plt.subplots(figsize=(width, 1.6))
    ax.text(0.5, 0.5, "\n".join(textwrap.wrap(message, int(width * 10))), ha="center", va="center", fontsize=9)
    ax.set_axis_off()
    return fig
