"""The PRU study's ablation tables and figures beyond Table 1 (Mehta et al., EMNLP 2018, §5).

- Table 3 (``table3``): which transformation the PRU applies to the context h_{t-1} and to the input
  x_t (LT dense, GLT grouped, PT pyramidal), one-layer LMs with K = g = 4. Each row's label R1-R6 is
  read from the cell options a run was trained with, not from its model id; ``pyramid_groups`` says
  whether a row's pyramid is the released one (1) or also split into g groups.
- Parameter counts of both pyramids (``ablation_counts``): every Table 3 row and Figure 5 point built
  at the paper's sizes (no training) with the released pyramid and with a grouped one, beside the
  paper's printed counts, so the scorecard can say which cell the paper counted.
- Table 4 (``table4``): how a pyramid level sub-samples the previous one (g = 1, K = 4).
- Figure 5 (``fig5_table``): validation perplexity against recurrent-unit (RU) parameters as K and g
  vary; the RU saving is relative to a one-layer LSTM of the same sizes, 4M(N + M) + 8M parameters.
- Figure 1 (``fig1_curves`` / ``fig1_summary``): per-epoch train and validation perplexity of the
  Table 1 standard-dropout cells (their ``history.csv``; no training of its own).
- Calibration (``calibration_table``, from :mod:`.calibration`): Zaremba et al. (2014)'s LSTMs and the
  AWD-LSTM on PTB trained by this project's trainer in their recipes, our perplexities beside theirs.
- Figure 4 (``embedding_variance``): variance of the learned word embeddings per part-of-speech
  category. Departure/assumption: the paper does not say how the variance is taken nor how words get
  a category. We take, for every word type, the variance across the dimensions of its vector, and
  average it over the words of a category; a word's category is its most frequent tag in the training
  split, tagged in context by TextBlob's bundled tagger (a Brill-style tagger with the Penn Treebank
  tag set, shipped inside the package; the paper used NLTK's, whose model is a separate download),
  folded into coarse categories (:data:`COARSE_TAGS`). The PRU's "level 1" is its embedding, "level
  2" that embedding sub-sampled exactly as the trained model's first pyramid level does it.

Parameter counts are the runs' own (``metrics.json``: ``params``, ``params_recurrent``); the paper's
printed values sit beside them as ``paper_*`` columns.
"""

from __future__ import annotations

import ast
import functools
from collections import Counter, defaultdict
from pathlib import Path

import pandas as pd

from .. import grid
from ..cells.counting import lstm_params
from .calibration import NAMES as CALIBRATION_NAMES, calibration_table  # noqa: F401 (the notebook's names)
from .results import in_order, paper_values, read_cells, summarise_seeds
from .run_files import read_history, read_metrics

# (context, input, residual) -> the paper's Table 3 row
TABLE3_ROWS = {("lt", "lt", False): "R1", ("glt", "glt", False): "R2", ("glt", "pt", True): "R3",
               ("lt", "pt", True): "R4", ("pt", "pt", True): "R5", ("lt", "pt", False): "R6"}
# The two pyramids the counts compare: the released code's, and one whose levels are split into the
# cell's g groups (cell option pyramid_groups; the PRU cell's docstring gives the counts).
PYRAMIDS = ("released", "grouped")
SUBSAMPLE_LABELS = {"skip": "Skip", "max": "Max pool", "avg": "Avg pool", "conv": "Convolution"}
# Penn Treebank tags -> coarse categories (the universal tag set's names); unlisted tags are OTHER
COARSE_TAGS = {
    **dict.fromkeys(["NN", "NNS", "NNP", "NNPS"], "NOUN"),
    **dict.fromkeys(["VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "MD"], "VERB"),
    **dict.fromkeys(["JJ", "JJR", "JJS"], "ADJ"),
    **dict.fromkeys(["RB", "RBR", "RBS", "WRB"], "ADV"),
    **dict.fromkeys(["PRP", "PRP$", "WP", "WP$"], "PRON"),
    **dict.fromkeys(["DT", "PDT", "WDT"], "DET"),
    **dict.fromkeys(["IN", "TO"], "ADP"),
    "CC": "CONJ", "CD": "NUM", "RP": "PRT",
}
# PTB's preprocessing replaced every number by "N"; <unk> and <eos> have no part of speech
FIXED_CATEGORIES = {"N": "NUM"}
UNTAGGED = {"<unk>", "<eos>"}


def pru_defaults() -> dict:
    """The PRU layer's own defaults for the options a model may leave out (subsample, residual, ...): read
    from the source of ``PRULayer.__init__`` rather than by importing the cell, which would import torch
    (about 1.5 CPU-seconds) into every notebook that fills in a table's options."""
    return dict(_layer_defaults())


@functools.cache
def _layer_defaults() -> dict:
    source = Path(__file__).resolve().parent.parent / "cells" / "pru.py"
    tree = ast.parse(source.read_text(), str(source))
    layer = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "PRULayer")
    init = next(node for node in layer.body if isinstance(node, ast.FunctionDef) and node.name == "__init__")
    arguments = init.args.args[len(init.args.args) - len(init.args.defaults):]
    return {argument.arg: ast.literal_eval(default) for argument, default in zip(arguments, init.args.defaults)}


def with_cell_options(cells: pd.DataFrame) -> pd.DataFrame:
    """Cells with g, K, M and every PRU option filled in (the layer's defaults where not set); LSTM rows NaN."""
    cells = cells.copy()
    is_pru = cells["cell"] == "pru"
    for option, default in pru_defaults().items():
        column = f"opt_{option}"
        values = cells[column] if column in cells else pd.Series(pd.NA, index=cells.index, dtype=object)
        cells[column] = values.astype(object).where(values.notna() | ~is_pru, default).where(is_pru, pd.NA)
    return cells.assign(g=cells["opt_groups"].astype("Int64"), K=cells["opt_levels"].astype("Int64"),
                        M=cells["hidden_size"], params_m=cells["params"] / 1e6,
                        ru_params_m=cells["params_recurrent"] / 1e6)


def _summarised(cells: pd.DataFrame, keys: list[str], study: dict, artifact: str) -> pd.DataFrame:
    table = summarise_seeds(cells, keys, ["val_ppl", "test_ppl"])
    paper = paper_values(study, artifact)
    if not paper.empty:
        table = table.merge(paper, on=["dataset", "model"], how="left")
    spec = study["artifacts"][artifact]
    return in_order(table, {"dataset": spec["datasets"], "model": spec["models"]})


def table3(cells: pd.DataFrame, study: dict) -> pd.DataFrame:
    """Table 3: one row per dataset and transformation pair, our parameters beside the paper's."""
    cells = with_cell_options(cells)
    cells["row"] = [TABLE3_ROWS.get((c.opt_context_transform, c.opt_input_transform, bool(c.opt_residual)))
                    for c in cells.itertuples()]
    if cells["row"].isna().any():
        unknown = cells.loc[cells["row"].isna(), "model"].unique().tolist()
        raise ValueError(f"models {unknown} are not one of Table 3's transformation pairs {TABLE3_ROWS}; "
                         f"list only R1-R6 models in artifacts.table3.models")
    cells = cells.rename(columns={"opt_context_transform": "context", "opt_input_transform": "input",
                                  "opt_residual": "residual"})
    cells = cells.assign(pyramid_groups=cells["opt_pyramid_groups"].astype(int))
    keys = ["dataset", "corpus", "row", "model", "context", "input", "residual", "g", "K", "M", "pyramid_groups",
            "params", "params_recurrent", "params_m", "ru_params_m", "budget"]
    table = _summarised(cells, keys, study, "table3")
    table["paper_params_fit"] = [paper_table3_counts_fit(r.row, r.pyramid_groups, r.g) for r in table.itertuples()]
    return table


def paper_table3_counts_fit(row: str, pyramid_groups: int, groups: int) -> bool:
    """Whether the paper's printed Table 3 counts fit this row's cell, by exact counting at the paper's
    sizes (``ablation_counts``; the PRU cell's docstring): R1, R4, R5, R6 with the released pyramid,
    R3 with the pyramid grouped like its context (g), R2 with neither (724,800 against 0.5 M)."""
    if row == "R2":
        return False
    if row == "R3":
        return pyramid_groups == groups > 1
    return pyramid_groups == 1


def table4(cells: pd.DataFrame, study: dict) -> pd.DataFrame:
    """Table 4: one row per dataset and sub-sampling method."""
    cells = with_cell_options(cells).rename(columns={"opt_subsample": "subsample"})
    cells["method"] = cells["subsample"].map(SUBSAMPLE_LABELS)
    keys = ["dataset", "corpus", "method", "model", "subsample", "g", "K", "M", "params", "params_recurrent",
            "budget"]
    return _summarised(cells, keys, study, "table4")


def fig5_table(cells: pd.DataFrame, study: dict) -> pd.DataFrame:
    """Figure 5's points: perplexity and RU parameters per (K, g), with the saving against the LSTM."""
    cells = with_cell_options(cells)
    # the LSTM of the same sizes (its count, so the saving exists whichever cells the budget trains)
    cells["lstm_ru_params"] = [lstm_params(e, m) for e, m in zip(cells["embedding_size"], cells["hidden_size"])]
    cells["ru_saving_pct"] = 100 * (1 - cells["params_recurrent"] / cells["lstm_ru_params"])
    cells["pyramid_groups"] = cells["opt_pyramid_groups"].astype("Int64")
    keys = ["dataset", "corpus", "model", "cell", "g", "K", "M", "pyramid_groups", "params", "params_recurrent",
            "lstm_ru_params", "ru_saving_pct", "budget"]
    return _summarised(cells, keys, study, "fig5")


def ablation_counts(study: dict, run_config: dict, artifact: str) -> pd.DataFrame:
    """Exact parameter counts of the artifact's models at the paper's sizes, each with the released
    pyramid and with its levels split into the cell's g groups (``pyramid_groups``: g; the same cell
    where it has no pyramid or g = 1), built on the meta device (no weights, no training), with the
    published vocabulary sizes. Beside them the paper's printed counts (``paper.table3``, ``paper.fig5``).

    Columns: the model, its Table 3 row (if it is one), whether it is a point of Figure 5 (``figure5``),
    g, K, ``pyramid``, ``pyramid_groups``, total and
    recurrent-unit (RU) parameters (also in millions), ``ru_saving_pct`` against a one-layer LSTM of
    the same sizes, ``ru_saving_vs_r4_pct`` against Table 3's R4 with the released pyramid (the paper's
    "R3 against R4" and "R1 against R4" savings), and ``paper_*``.
    """
    import torch

    from ..data.registry import get_dataset
    from ..train.language_model import build_model

    spec = study["artifacts"][artifact]
    paper_config = {**run_config, "budget": "paper"}
    rows = []
    for dataset in spec["datasets"]:
        vocab = get_dataset(dataset).expected.vocab_size
        for model_id in spec["models"]:
            cfg = grid.resolve_cell(study, paper_config, grid.Cell(study["study"], dataset, model_id, 100, 0, "paper"))
            arch = cfg["architecture"]
            options = {**pru_defaults(), **arch["cell_options"]} if arch["cell"] == "pru" else {}
            has_pyramid = "pt" in (options.get("input_transform"), options.get("context_transform"))
            for pyramid in PYRAMIDS:
                pyramid_groups = options.get("groups", 1) if pyramid == "grouped" and has_pyramid else 1
                variant = {**cfg, "architecture": {**arch, "cell_options": {
                    **arch["cell_options"], **({"pyramid_groups": pyramid_groups} if options else {})}}}
                with torch.device("meta"):
                    model = build_model(variant, vocab)
                row = TABLE3_ROWS.get((options.get("context_transform"), options.get("input_transform"),
                                       options.get("residual"))) if model_id in study["artifacts"]["table3"]["models"] else None
                rows.append({
                    "dataset": dataset, "model": model_id, "table3_row": row,
                    "figure5": model_id in study["artifacts"]["fig5"]["models"], "cell": arch["cell"],
                    "g": options.get("groups"), "K": options.get("levels"), "M": arch["hidden_size"],
                    "pyramid": pyramid, "pyramid_groups": pyramid_groups if options else None,
                    "params": sum(p.numel() for p in model.parameters()),
                    "params_recurrent": model.recurrent_parameter_count(),
                    "lstm_ru_params": lstm_params(arch["embedding_size"], arch["hidden_size"]),
                })
    table = pd.DataFrame(rows).astype({"g": "Int64", "K": "Int64", "pyramid_groups": "Int64"})
    table["params_m"], table["ru_params_m"] = table["params"] / 1e6, table["params_recurrent"] / 1e6
    table["ru_saving_pct"] = 100 * (1 - table["params_recurrent"] / table["lstm_ru_params"])
    r4 = table[(table["table3_row"] == "R4") & (table["pyramid"] == "released")]
    r4_params = r4.drop_duplicates("dataset").set_index("dataset")["params_recurrent"]
    saving_vs_r4 = 100 * (1 - table["params_recurrent"] / table["dataset"].map(r4_params))
    table["ru_saving_vs_r4_pct"] = saving_vs_r4.where(table["table3_row"].notna())
    counted = ["params_m", "ru_params_m", "ru_saving_pct", "ru_saving_vs_r4_pct"]
    for source in ("table3", "fig5"):
        paper = paper_values(study, source)
        if paper.empty:
            continue
        paper = paper[["dataset", "model", *[f"paper_{c}" for c in counted if f"paper_{c}" in paper]]]
        table = table.merge(paper, on=["dataset", "model"], how="left", suffixes=("", "_fig5"))
    for column in counted:  # one paper column per count, whichever of the two sections prints it
        name = f"paper_{column}"
        if f"{name}_fig5" in table:
            table[name] = table[name].combine_first(table.pop(f"{name}_fig5"))
        elif name not in table:
            table[name] = float("nan")
    return table


def read_histories(metrics_files: list[str]) -> pd.DataFrame:
    """Every epoch of every run, with the run's dataset, model, cell and width."""
    cells = read_cells(metrics_files)
    frames = [read_history(Path(path).parent).assign(
        dataset=cell.dataset, corpus=cell.corpus, model=cell.model, cell=cell.cell, M=cell.hidden_size,
        seed=cell.seed, budget=cell.budget, capped=cell.capped) for path, cell in zip(metrics_files, cells.itertuples())]
    return pd.concat(frames, ignore_index=True)


def fig1_figure(histories: pd.DataFrame, names: dict[str, str]):
    """Figure 1: one panel per cell (LSTM, PRU), training (solid) and validation (dashed) perplexity of
    every run, one line per seed in the model's colour, each run's end marked (:mod:`.plotting`)."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    from matplotlib.ticker import MaxNLocator

    from .plotting import CELL_WORDS, end_marker_legend, plain_log_axis, seed_curves

    cells = [c for c in ("lstm", "pru") if c in set(histories["cell"])]
    cells += [c for c in dict.fromkeys(histories["cell"]) if c not in cells]  # a cell of your own
    fig, axes = plt.subplots(1, len(cells), figsize=(6.5 * len(cells), 4.8), sharey=True, squeeze=False)
    for ax, cell in zip(axes[0], cells):
        runs = histories[histories["cell"] == cell]
        models = list(dict.fromkeys(runs.sort_values("M")["model"]))
        for model, colour in zip(models, sns.color_palette(n_colors=len(models))):
            mine = runs[runs["model"] == model]
            seed_curves(ax, mine, "epoch", "train_ppl", colour, "-", label=names.get(model, model), end_markers=False)
            seed_curves(ax, mine, "epoch", "val_ppl", colour, "--")
        ax.set(xlabel="epoch", ylabel="perplexity (log scale)", title=CELL_WORDS.get(cell, cell))
        plain_log_axis(ax, "y", histories[["train_ppl", "val_ppl"]].to_numpy().ravel())
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(color="0.93")
        styles = [plt.Line2D([], [], color="0.3", linestyle="-", label="training"),
                  plt.Line2D([], [], color="0.3", linestyle="--", label="validation")]
        ax.legend(handles=ax.get_legend_handles_labels()[0] + styles + end_marker_legend(), fontsize=8)
    return fig


def fig1_summary(histories: pd.DataFrame) -> pd.DataFrame:
    """Per run: best validation perplexity, the training perplexity of that epoch and their gap."""
    best = histories.loc[histories.groupby(["dataset", "model", "seed"])["val_ppl"].idxmin()]
    epochs = histories.groupby(["dataset", "model", "seed"])["epoch"].max().rename("epochs")
    table = best.join(epochs, on=["dataset", "model", "seed"]).rename(
        columns={"epoch": "best_epoch", "val_ppl": "best_val_ppl", "train_ppl": "train_ppl_at_best"})
    table["gap_at_best"] = table["best_val_ppl"] - table["train_ppl_at_best"]
    columns = ["dataset", "corpus", "model", "cell", "M", "seed", "epochs", "best_epoch", "best_val_ppl",
               "train_ppl_at_best", "gap_at_best", "budget"]
    return table[columns].sort_values(["dataset", "cell", "M"]).reset_index(drop=True)


# --- Figure 4 ----------------------------------------------------------------------------------------

def word_categories(lines, tagger=None) -> dict[str, str]:
    """Each word type's coarse part of speech: its most frequent tag in context (ties: the first seen).

    ``lines`` are whitespace-tokenised sentences (the corpus as trained on); ``tagger`` maps a list of
    tokens to a list of Penn Treebank tags (default: TextBlob's bundled tagger). A line the tagger
    splits differently from the corpus is skipped, never guessed.
    """
    tagger = tagger or textblob_tags
    counts: dict[str, Counter] = defaultdict(Counter)
    for line in lines:
        tokens = [t for t in line.split() if t not in UNTAGGED]
        if not tokens:
            continue
        tags = tagger(tokens)
        if len(tags) != len(tokens):
            continue
        for token, tag in zip(tokens, tags):
            counts[token][COARSE_TAGS.get(tag, "OTHER")] += 1
    categories = {word: c.most_common(1)[0][0] for word, c in counts.items()}
    categories.update({w: c for w, c in FIXED_CATEGORIES.items() if w in categories})
    return categories


def textblob_tags(tokens: list[str]) -> list[str]:
    """Penn Treebank tags of pre-tokenised text by TextBlob's pattern tagger (its lexicon ships in the package)."""
    from textblob.en import tag

    return [t for _, t in tag(" ".join(tokens), tokenize=False)]


def load_embedding(run_dir: Path):
    """The trained embedding matrix (V x E), the run's config, and its vocabulary (id order)."""
    from ..data.preprocess import read_vocab
    from ..train.checkpoint import load_weights

    saved = load_weights(Path(run_dir) / "model.pt", "cpu", "a cell whose embedding this analysis reads")
    cfg = saved["config"]
    vocab = read_vocab(Path(cfg["data"]["dir"]) / "vocab.txt")
    weight = saved["state_dict"]["embedding.weight"]
    if len(vocab) != weight.shape[0]:
        raise ValueError(f"{run_dir}: the embedding has {weight.shape[0]} rows but {cfg['data']['dir']}/vocab.txt "
                         f"lists {len(vocab)} words; the processed data changed since training: retrain the cell")
    return weight, cfg, vocab


def pyramid_levels(weight, cfg: dict) -> dict[int, object]:
    """The first PRU layer's pyramid inputs for every word: level 1 = the embedding, level k = level k-1
    sub-sampled by the trained layer's own method (the same module code the model ran)."""
    import torch

    from ..cells.pru import PyramidalTransform

    arch = cfg["architecture"]
    options = {**pru_defaults(), **arch["cell_options"]}
    pyramid = PyramidalTransform(arch["embedding_size"], arch["hidden_size"], options["levels"], options["subsample"],
                                 pooling_kernels=options["pooling_kernels"])
    if options["subsample"] == "conv":
        raise ValueError("Figure 4 reads pooled levels; a learned-convolution PRU needs its trained kernels loaded")
    levels = {1: weight}
    with torch.no_grad():
        for level in range(1, options["levels"]):
            levels[level + 1] = pyramid._halve(levels[level], level)
    return levels


def embedding_variance(vectors, vocab: list[str], categories: dict[str, str]) -> pd.DataFrame:
    """Mean (and spread) over the words of each category of the variance across a word vector's dimensions."""
    per_word = vectors.var(dim=1, unbiased=False).tolist()
    frame = pd.DataFrame({"word": vocab, "variance": per_word})
    frame["category"] = frame["word"].map(categories)
    frame = frame.dropna(subset=["category"])
    return (frame.groupby("category")["variance"].agg(variance="mean", variance_std="std", words="size")
            .reset_index())


def fig4_table(metrics_files: list[str], categories: dict[str, str]) -> pd.DataFrame:
    """One row per (model, level, category): the Figure 4 bars."""
    frames = []
    for path in metrics_files:
        run_dir = Path(path).parent
        metrics = read_metrics(path)
        weight, cfg, vocab = load_embedding(run_dir)
        levels = pyramid_levels(weight, cfg) if cfg["architecture"]["cell"] == "pru" else {1: weight}
        for level, vectors in levels.items():
            if level > 2:
                continue  # the paper plots levels 1 and 2
            label = "LSTM" if cfg["architecture"]["cell"] == "lstm" else f"PRU level {level}"
            frames.append(embedding_variance(vectors, vocab, categories).assign(
                dataset=metrics["dataset"], corpus=metrics["corpus"], model=metrics["model"], series=label,
                level=level, dimensions=vectors.shape[1], budget=metrics["budget"]))
    columns = ["dataset", "corpus", "model", "series", "level", "dimensions", "category", "words", "variance",
               "variance_std", "budget"]
    return pd.concat(frames, ignore_index=True)[columns]


def dropout_rates(study: dict, table: pd.DataFrame) -> dict[float, bool]:
    """Every dropout rate the dropout artifact compares (its models' recipes at the paper's grid) ->
    whether this budget's table has rows at it: the figure draws each trained rate and names the
    others as not trained at this budget."""
    rates = {}
    for model in study["artifacts"]["dropout"]["models"]:
        rate = float(study["recipes"][study["models"][model]["recipe"]]["dropout_output"])
        rates[rate] = rates.get(rate, False) or bool((table["dropout"].astype(float) == rate).any())
    return dict(sorted(rates.items()))
