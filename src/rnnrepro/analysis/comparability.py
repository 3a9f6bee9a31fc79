"""Whether a budget's models still pose the paper's comparison: one rule for every claim.

A claim that compares different models is testable at a budget only when, for each compared pair, the
two models keep

- the paper's ratio of recurrent parameters (the stacked recurrent layers, embedding and head aside),
  within :data:`RATIO_TOLERANCE` of it: at a smaller width a cell whose parameters grow more slowly can
  gain or lose ground on the other, and then the comparison measures that, not the cells; and
- the paper's output head (a plain softmax where the paper has a mixture of softmaxes trains another
  model around the same cells).

Otherwise the verdict is "not testable at this scale" and says which part fails, with the counts. A
claim that compares one model with itself (two stages, two evaluations: finetuning, dynamic
evaluation) has no ratio to keep and is not judged by this rule; neither are claims on exact counts
or on a speed benchmark timed at the paper's shapes (their models are the paper's). A study file's
``not_testable`` stays the place for any other reason. The counts are the models as the budget builds
them (rnnrepro.grid.architecture, rnnrepro.sizing), known without training.
"""

from __future__ import annotations

import pandas as pd

from .. import grid, sizing
from ..configuration import ConfigError

#: how far our ratio of recurrent parameters may stray from the paper's (a fraction of the paper's)
RATIO_TOLERANCE = 0.10


def recurrent_params_and_head(study: dict, config: dict, model: str, dataset: str) -> tuple[int, str]:
    """(recurrent parameters, output head type) of a model as ``config``'s budget builds it."""
    arch = grid.architecture(study, config, model, grid.corpus_for(study, config, dataset), dataset)
    last = arch.get("last_hidden_size") or (arch["embedding_size"] if arch["tie_weights"] else arch["hidden_size"])
    sizes = [arch["embedding_size"]] + [arch["hidden_size"]] * (arch["layers"] - 1) + [last]
    count = sum(sizing.layer_params(arch["cell"], sizes[i], sizes[i + 1], arch["cell_options"])
                for i in range(arch["layers"]))
    return count, arch.get("head", {"type": "softmax"})["type"]


def _model_of(table: pd.DataFrame, selector: dict, matches) -> str | None:
    if isinstance(selector.get("model"), str):
        return selector["model"]
    if "model" not in table.columns:
        return None
    models = table.loc[matches(table, selector), "model"].dropna().astype(str).unique()
    return models[0] if len(models) == 1 else None


def problem(study: dict, config: dict, rows: list[dict], pairs: list[tuple[int, int]], table: pd.DataFrame,
            dataset: str, matches) -> str | None:
    """Why the compared models of these pairs (indices into ``rows``, the row selectors) do not pose the
    paper's comparison at this budget, or None. ``matches(table, selector)`` is the claims' row
    matcher; ``dataset`` the one whose models are counted."""
    models = [_model_of(table, selector, matches) for selector in rows]
    paper = {**config, "budget": "paper"}
    problems = []
    for a, b in pairs:
        first, second = models[a], models[b]
        if first is None or second is None or first == second:
            continue
        try:
            (ours_a, head_a), (ours_b, head_b) = (recurrent_params_and_head(study, config, m, dataset)
                                                  for m in (first, second))
            (paper_a, paper_head_a), (paper_b, paper_head_b) = (recurrent_params_and_head(study, paper, m, dataset)
                                                                for m in (first, second))
        except (ConfigError, KeyError, ValueError, IndexError, TypeError):
            continue
        ratio, paper_ratio = ours_a / ours_b, paper_a / paper_b
        counts = (f"{first} {ours_a:,} recurrent parameters against {second}'s {ours_b:,} (ratio {ratio:.2f}; "
                  f"the paper's models {paper_a:,} against {paper_b:,}, ratio {paper_ratio:.2f})")
        kept = abs(ratio / paper_ratio - 1) <= RATIO_TOLERANCE
        if not kept:
            problems.append(f"the ratio of recurrent parameters is not the paper's within "
                            f"{RATIO_TOLERANCE * 100:g} %: {counts}")
        if (head_a, head_b) != (paper_head_a, paper_head_b):
            heads = " and ".join(dict.fromkeys([head_a, head_b])).replace("_", " ")
            paper_heads = " and ".join(dict.fromkeys([paper_head_a, paper_head_b])).replace("_", " ")
            problems.append(f"the output head is not the paper's ({heads} here, {paper_heads} in the paper), so "
                            f"the comparison measures the cells inside another model"
                            + (f"; the ratio of recurrent parameters is kept: {counts}" if kept else ""))
    return "; ".join(dict.fromkeys(problems)) or None
