"""Each compared unit at its own learning rate: the tuning grid, its cells and the rate it chooses.

A budget tunes the models of its study file's ``tuning`` artifact: each is trained once per factor of
the artifact's ``lr_factors`` (the recipe's learning rate times the factor, log-spaced around it), on the
artifact's seed, which no verdict reads, on the same data fraction and under the same recipe and stop
rule as its compared cells, within the artifact's epoch cap (``epochs``; None: the recipe's own). The
factor whose cell ends with the lowest validation loss is chosen, and every cell of that model on that
dataset and fraction trains at the recipe's rate times it (a finetuned cell inherits the factor of the
cell it starts from). A tuning cell that diverges ends there and is scored on the weights it had before
the step that diverged (its config's ``tuning.diverged_is_a_result``; rnnrepro.train.loop), so a rate
too high is a point of its tuning curve, not a failed run.

A variant's model id is ``<model>__lrx<factor>`` (``lstm_m1000__lrx0p5``: the recipe's rate x 0.5), so
it is an ordinary model of the study: it has a run folder, a record, a row in ``status``. The choice is
read from the variants' metrics.json in the budget's results tree, else from their records when those are
current; until every variant has finished, the tuned cells cannot be resolved (:class:`TuningPending`):
the workflow trains the variants first (the checkpoint ``lr_choice``, workflow/rules/train.smk) and
``records grow`` records them before the cells they tune.

This module is a leaf (it imports nothing of the package): the names and the rule. Which cells a budget
tunes and what they resolve to is the grid's (rnnrepro.grid: ``variant_cells``, ``tuning_cells_of``,
``tuning_choice``); ``python -m rnnrepro.lr_choice`` writes a choice for the workflow.
"""

from __future__ import annotations

import math

ARTIFACT = "tuning"
SEPARATOR = "__lrx"
VALUE_KEYS = ("val_loss", "val_cross_entropy")  # the validation loss a cell's metrics.json gives, by task


class TuningPending(Exception):
    """A tuned cell whose learning rate is not chosen yet: not every variant of its tuning has finished."""

    def __init__(self, model: str, missing: list[str]):
        self.model, self.missing = model, missing
        super().__init__(f"the learning rate of {model} is not chosen yet: its tuning cells "
                         f"{', '.join(missing[:2])}{' ...' if len(missing) > 2 else ''} have not finished")


def factor_token(factor: float) -> str:
    """``0.5`` -> ``0p5``, ``2.0`` -> ``2``: a factor as a model id may spell it."""
    text = f"{factor:g}"
    if "e" in text:
        raise ValueError(f"learning-rate factor {factor!r}: give it as a plain decimal (e.g. 0.25)")
    return text.replace(".", "p")


def variant_id(model: str, factor: float) -> str:
    return f"{model}{SEPARATOR}{factor_token(factor)}"


def parse_variant(model_id: str) -> tuple[str, float] | None:
    """The tuned model and the factor of a variant's id, or None for any other model."""
    if SEPARATOR not in model_id:
        return None
    model, token = model_id.rsplit(SEPARATOR, 1)
    return model, float(token.replace("p", "."))


def add_variants(study: dict) -> dict:
    """The study with a model for each variant the ``tuning`` artifact names under any budget (the base
    model's entry, marked with ``tuning_of`` and ``lr_factor``). Changes ``study`` in place."""
    spec = study["artifacts"].get(ARTIFACT)
    if spec is None:
        return study
    pairs = {(model, factor) for model in spec["models"] for factor in spec["tuning"]["lr_factors"]}
    for budget in study["budgets"].values():
        cut = {**spec, **budget.get("artifacts", {}).get(ARTIFACT, {})}
        factors = cut.get("tuning", spec["tuning"])["lr_factors"]
        pairs |= {(model, factor) for model in cut["models"] for factor in factors}
    for model, factor in sorted(pairs):
        if model not in study["models"]:
            continue  # named by the artifact but not defined: the study's reference check says so
        study["models"][variant_id(model, factor)] = {**study["models"][model], "tuning_of": model,
                                                     "lr_factor": factor}
    return study


def tuned_root(study: dict, model: str) -> str:
    """The model whose tuning sets this model's rate: itself, or the cell it is finetuned from (first)."""
    while (parent := study["models"][model].get("init_from")) is not None:
        model = parent
    return model


def validation_loss(metrics: dict) -> float | None:
    return next((float(metrics[k]) for k in VALUE_KEYS if isinstance(metrics.get(k), (int, float))), None)


def chosen_factor(points: list[dict]) -> float:
    """The factor of the lowest mean validation loss over the tuning seeds (a tie: the one nearest 1)."""
    by_factor: dict[float, list[float]] = {}
    for point in points:
        by_factor.setdefault(point["factor"], []).append(point["val_loss"])
    return min(by_factor, key=lambda f: (sum(by_factor[f]) / len(by_factor[f]), abs(math.log(f))))


