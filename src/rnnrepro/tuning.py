"""Each compared unit at its own learning rate: the tuning grid, its cells and the rate it chooses.

A budget tunes the models of its study file's ``tuning`` artifact: each is trained once per factor of
the artifact's ``lr_factors`` (the recipe's learning rate times the factor, log-spaced around it), on the
artifact's seed, which no verdict reads, on the same data fraction and under the same recipe and stop
rule as its compared cells, within the artifact's epoch cap (``epochs``; None: the recipe's own). The
factor whose cell ends with the lowest validation loss is chosen, and every cell of that model on that
dataset and fraction trains at the recipe's rate times it (a finetuned cell inherits the factor of the
cell it starts from). A tuning cell that diverges ends there and is scored on the weights it had before
the step that diverged (``recipe.tuning``; rnnrepro.train.loop), so a rate too high for a model is a point
of its tuning curve, not a failed run.

A variant's model id is ``<model>__lrx<factor>`` (``lstm_m1000__lrx0p5``: the recipe's rate x 0.5), so
it is an ordinary model of the study: it has a run folder, a record, a row in ``status``. The choice is
read from the variants' metrics.json in the budget's results tree, else from their records when those are
current; until every variant has finished, the tuned cells cannot be resolved (:class:`TuningPending`):
the workflow trains the variants first (the checkpoint ``lr_choice``, workflow/rules/train.smk) and
``records grow`` records them before the cells they tune.

No torch here: the workflow imports it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

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


def tuned_settings(study: dict, config: dict) -> dict | None:
    """The tuning artifact's grid under the current budget (its models, datasets, fractions, seeds and
    ``tuning`` settings), or None where the budget tunes nothing."""
    from . import grid

    if ARTIFACT not in grid.artifacts(study, config):
        return None
    spec = grid.artifact_spec(study, config, ARTIFACT)
    return {**spec, "tuning": {**study["artifacts"][ARTIFACT]["tuning"], **spec.get("tuning", {})}}


def variant_cells(study: dict, config: dict) -> list:
    """The tuning artifact's cells: every variant of every tuned model, dataset and fraction, on its seeds."""
    from . import grid

    spec = tuned_settings(study, config)
    if spec is None:
        return []
    return [grid.Cell(study["study"], grid.data_key(study, config, dataset), variant_id(model, factor), fraction,
                      seed, config["budget"], config.get("precision", "fp32"))
            for dataset in spec["datasets"] for model in spec["models"]
            for factor in spec["tuning"]["lr_factors"] for fraction in spec["fractions"] for seed in spec["seeds"]]


def tuned_root(study: dict, model: str) -> str:
    """The model whose tuning sets this model's rate: itself, or the cell it is finetuned from (first)."""
    while (parent := study["models"][model].get("init_from")) is not None:
        model = parent
    return model


def tuning_cells_of(study: dict, config: dict, cell) -> list:
    """The variants whose results choose this cell's learning rate (empty: it is not tuned here)."""
    import dataclasses

    if parse_variant(cell.model) is not None:
        return []
    spec = tuned_settings(study, config)
    if spec is None:
        return []
    root = tuned_root(study, cell.model)
    if root not in spec["models"] or cell.fraction not in spec["fractions"]:
        return []
    from . import grid

    if cell.corpus not in {grid.data_key(study, config, d) for d in spec["datasets"]}:
        return []
    return [dataclasses.replace(cell, model=variant_id(root, factor), seed=seed)
            for factor in spec["tuning"]["lr_factors"] for seed in spec["seeds"]]


def validation_loss(metrics: dict) -> float | None:
    return next((float(metrics[k]) for k in VALUE_KEYS if isinstance(metrics.get(k), (int, float))), None)


def _finished(study: dict, config: dict, variant, records: Path) -> dict | None:
    """A variant's metrics where it has finished and is current: in the budget's results tree, else in
    its record; None otherwise."""
    from . import grid
    from .analysis.run_files import config_differences

    expected = grid.resolve_cell(study, config, variant)
    relative = Path(variant.run_dir).relative_to(grid.results_dir(variant.budget))
    for folder in (Path(variant.run_dir), records / variant.budget / relative):
        try:
            metrics = json.loads((folder / "metrics.json").read_text())
            recorded = json.loads((folder / "config.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(metrics, dict) and isinstance(recorded, dict) and not config_differences(recorded, expected) \
                and validation_loss(metrics) is not None and math.isfinite(validation_loss(metrics)):
            return metrics
    return None


def curve(study: dict, config: dict, cell, records: Path = Path("records")) -> list[dict]:
    """The tuning curve behind a cell: one entry per variant (factor, lr, validation loss, epochs, whether
    it diverged). Raises TuningPending while a variant has not finished."""
    variants = tuning_cells_of(study, config, cell)
    found, missing = [], []
    for variant in variants:
        metrics = _finished(study, config, variant, records)
        if metrics is None:
            missing.append(variant.key)
            continue
        _, factor = parse_variant(variant.model)
        found.append({"factor": factor, "seed": variant.seed, "val_loss": validation_loss(metrics),
                      "epochs": metrics.get("epochs"), "best_epoch": metrics.get("best_epoch"),
                      "diverged": metrics.get("diverged")})
    if missing:
        raise TuningPending(tuned_root(study, cell.model), missing)
    return found


def chosen_factor(points: list[dict]) -> float:
    """The factor of the lowest mean validation loss over the tuning seeds (a tie: the one nearest 1)."""
    by_factor: dict[float, list[float]] = {}
    for point in points:
        by_factor.setdefault(point["factor"], []).append(point["val_loss"])
    return min(by_factor, key=lambda f: (sum(by_factor[f]) / len(by_factor[f]), abs(math.log(f))))


def choice(study: dict, config: dict, cell, records: Path = Path("records")) -> dict | None:
    """What tuning sets for a cell: the chosen factor, the grid it was chosen from and the seeds it was
    tuned on (part of the cell's config: another grid or choice is another cell), or None where the cell
    is not tuned at this budget. Raises TuningPending until its variants have finished."""
    spec = tuned_settings(study, config)
    if not tuning_cells_of(study, config, cell):
        return None
    return {"lr_factor": chosen_factor(curve(study, config, cell, records)),
            "lr_factors": list(spec["tuning"]["lr_factors"]), "seeds": list(spec["seeds"]),
            "epochs": spec["tuning"].get("epochs")}


def write_choice(study: dict, config: dict, cell, output: Path, records: Path = Path("records")) -> dict:
    """The tuning curve behind a model's cells and the factor chosen, as JSON (the workflow's
    ``lr_choice``; the tuning notebook reads the same curves from the variants' metrics)."""
    from . import grid

    points = curve(study, config, cell, records)
    factor = chosen_factor(points)
    recipe_lr = grid.resolve_cell(study, config, cell)["recipe"]["lr"] / factor
    factors = sorted({p["factor"] for p in points})
    result = {"study": cell.study, "corpus": cell.corpus, "model": cell.model, "fraction": cell.fraction,
              "budget": cell.budget, "recipe_lr": recipe_lr, "lr_factor": factor, "lr": recipe_lr * factor,
              "at_edge_of_grid": factor in (factors[0], factors[-1]),
              "curve": [{**p, "lr": recipe_lr * p["factor"]} for p in points]}
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    partial.write_text(json.dumps(result, indent=1) + "\n")
    partial.replace(output)
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m rnnrepro.tuning --cell JSON --output FILE``: the workflow's lr_choice job."""
    import argparse

    from . import grid
    from .configuration import load_study

    parser = argparse.ArgumentParser(prog="python -m rnnrepro.tuning", description=main.__doc__)
    parser.add_argument("--cell", required=True, help="the cell as JSON: study, corpus, model, fraction, seed, "
                                                      "budget, precision")
    parser.add_argument("--output", required=True, type=Path)
    args = parser.parse_args(argv)
    fields = json.loads(args.cell)
    cell = grid.Cell(**fields)
    config = {"budget": cell.budget, "precision": cell.precision, "device": "auto"}
    result = write_choice(load_study(cell.study), config, cell, args.output)
    print(f"[rnnrepro] {cell.study}/{cell.corpus}/{cell.model}/frac{cell.fraction}: learning rate {result['lr']:g} "
                f"(x{result['lr_factor']:g} the recipe's), chosen on validation from "
                f"{len(result['curve'])} tuning cells", flush=True)
    return 0


if __name__ == "__main__":
    import sys

    from .console import run_command

    sys.exit(run_command(main))
