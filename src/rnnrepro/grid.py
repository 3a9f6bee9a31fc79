"""The training grid: which cells an artifact needs, where they live, and each cell's resolved config.

A *cell* is one training run: study x dataset x model x data fraction x seed. Its folder is
``results/runs/{study}/{corpus}/{model}/frac{fraction}/seed{seed}/`` where ``corpus`` is the data it
is actually trained on: the paper's dataset id, or the budget's stand-in for it (the smoke budget
trains on synthetic corpora, so real and synthetic results never share a folder).

The resolved config of a cell is everything the training CLI needs and nothing else; it is passed to
the train rule as a parameter and saved as ``config.json`` in the run folder. No torch here.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from .configuration import ConfigError, merged

RUNS = "results/runs"
PROCESSED = "data/processed"


@dataclass(frozen=True)
class Cell:
    study: str
    corpus: str
    model: str
    fraction: int
    seed: int

    @property
    def run_dir(self) -> str:
        return f"{RUNS}/{self.study}/{self.corpus}/{self.model}/frac{self.fraction}/seed{self.seed}"


def budget_of(study: dict, config: dict) -> dict:
    return study["budgets"][config["budget"]]


def corpus_for(study: dict, config: dict, dataset: str) -> str:
    """The corpus trained on for a paper dataset under the current budget."""
    return budget_of(study, config).get("datasets", {}).get(dataset, dataset)


def dataset_for(study: dict, config: dict, corpus: str) -> str:
    """The paper dataset a corpus stands for under the current budget (inverse of corpus_for)."""
    for dataset, stand_in in budget_of(study, config).get("datasets", {}).items():
        if stand_in == corpus:
            return dataset
    return corpus


def train_file(corpus: str, fraction: int) -> str:
    """The training split, or its first ``fraction`` % (a prefix, so fractions nest)."""
    if fraction == 100:
        return f"{PROCESSED}/{corpus}/train.txt"
    return f"{PROCESSED}/{corpus}/train.fraction{fraction}.txt"


def artifact_cells(study: dict, config: dict, artifact: str) -> list[Cell]:
    spec = study["artifacts"][artifact]
    return [
        Cell(study["study"], corpus_for(study, config, dataset), model, fraction, seed)
        for dataset, model, fraction, seed in itertools.product(
            spec["datasets"], spec["models"], spec["fractions"], config["seeds"])
    ]


def parent_cell(study: dict, cell: Cell) -> Cell | None:
    """The cell whose best checkpoint initialises this one (finetuning), if any."""
    parent = study["models"][cell.model].get("init_from")
    if parent is None:
        return None
    return Cell(cell.study, cell.corpus, parent, cell.fraction, cell.seed)


def _scaled(width: int, budget: dict) -> int:
    scale = budget.get("width_scale")
    if scale is None:
        return width
    multiple = budget.get("width_multiple", 1)
    return max(multiple, round(width * scale / multiple) * multiple)


def resolve_cell(study: dict, config: dict, cell: Cell) -> dict:
    """Everything one training run needs, from the validated study and run config."""
    if cell.model not in study["models"]:
        raise ConfigError(f"study {cell.study!r} has no model {cell.model!r}")
    model = study["models"][cell.model]
    budget = budget_of(study, config)
    dataset = dataset_for(study, config, cell.corpus)
    recipe_name = model["recipe"]
    recipe = merged(
        study["recipes"][recipe_name],
        study.get("dataset_recipes", {}).get(recipe_name, {}).get(dataset, {}),
        budget.get("recipe", {}),
        budget.get("recipes", {}).get(recipe_name, {}),
    )
    parent = parent_cell(study, cell)
    return {
        "study": cell.study,
        "task": study["task"],
        "dataset": dataset,
        "corpus": cell.corpus,
        "model": cell.model,
        "fraction": cell.fraction,
        "seed": cell.seed,
        "budget": config["budget"],
        "device": config["device"],
        "threads": config["threads"],
        "data": {"dir": f"{PROCESSED}/{cell.corpus}", "train_file": train_file(cell.corpus, cell.fraction)},
        "architecture": {
            "cell": model["cell"],
            "embedding_size": _scaled(model["embedding_size"], budget),
            "hidden_size": _scaled(model["hidden_size"], budget),
            "layers": model["layers"],
            "tie_weights": model["tie_weights"],
            "cell_options": dict(model["cell_options"]),
        },
        "recipe_name": recipe_name,
        "recipe": recipe,
        "init_from": f"{parent.run_dir}/model.pt" if parent else None,
    }
