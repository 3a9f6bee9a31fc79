"""The training grid: which cells an artifact needs, where they live, and each cell's resolved config.

A *cell* is one training run of one budget: study x dataset x model x data fraction x seed. Its folder
is ``<results>/runs/{study}/{corpus}/{model}/frac{fraction}/seed{seed}/``, where ``<results>`` is the
budget's results tree (:func:`results_dir`: ``results`` for the default budget, ``paper``, and
``results/<budget>`` for every other one, so budgets never share a run folder, a table or a speed
result; ``runs-bf16/`` instead of ``runs/`` for cells trained at a precision whose numbers differ from
fp32's, :func:`runs_dir`) and ``corpus`` is the data it is actually trained on: the paper's dataset id,
or the budget's stand-in for it (the smoke budget trains on synthetic corpora, so real and synthetic
results never share a folder). When a budget
trains several paper datasets on one stand-in, the folder is ``{corpus}-{dataset}`` so their runs stay
apart (:func:`data_key`); ``Cell.corpus`` holds that folder name.

A model may give a ``param_budget`` instead of a ``hidden_size``: the cell is then sized to the
hidden size whose language model comes closest to it (:mod:`rnnrepro.sizing`), with the corpus's
vocabulary size from the study's ``vocab_sizes``. A cell of your own (rnnrepro.custom_cells) gives
``param_budget_of: <model>`` instead: the parameter count of that model at the same budget, so it is
compared with its baseline on equal footing at every scale. A model marked ``as_published`` (a published model
the trainer is calibrated against) keeps its widths and recipe under every budget on a real corpus; on
a synthetic stand-in (the smoke budget) the budget scales it like every other model.

The resolved config of a cell is everything the training CLI needs and nothing else; it is passed to
the train rule as a parameter and saved as ``config.json`` in the run folder. No torch here, but for
sizing a cell with no parameter formula (rnnrepro.sizing counts its layers on the meta device).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path

from . import layout, precision, tuning
from .cell_identity import stale_reason
from .cells import code_identity
from .configuration import ConfigError, budgets, check_references, merged, project_root, study_file
from .custom_cells import add_custom_cells, from_environment
from .data.registry import DATASETS

# The results and logs of each budget (results/ for the default budget, paper; results/<budget>/ for
# every other one) are rnnrepro.layout's, re-exported here, where the workflow and the tools look.
from .layout import (  # noqa: F401
    DEFAULT_BUDGET, LOGS, RESERVED_NAMES, RESULTS, SMOKE, earlier_layout, logs_dir, results_dir, runs_dir)
from .sizing import hidden_size_for_budget, language_model_params

PROCESSED = "data/processed"


def load_study(study: str, root: Path | None = None, custom_cells: dict | None = None,
               custom_source: str = "") -> dict:
    """The study a run's grid is built from: its file (configuration.study_file), with the run's cells of
    your own added (rnnrepro.custom_cells) and then the tuning variants (rnnrepro.tuning).

    ``custom_cells`` None: those the running workflow exported (a notebook or the scorecard run by a
    rule sees the same study as the Snakefile), else none. Check them first with
    ``custom_cell_checks.check_custom_cells``, which names the config file they came from.
    """
    data = study_file(study, root)
    if custom_cells is None:
        custom_cells, custom_source = from_environment()
    if any(study in custom["studies"] for custom in custom_cells.values()):
        data = add_custom_cells(data, custom_cells, custom_source)
        path = (project_root() if root is None else root) / "config" / "studies" / f"{study}.yaml"
        check_references(data, f"{path} with the cells of {custom_source}")
    return tuning.add_variants(data)


def budgets_with_results(root: Path = Path(".")) -> list[str]:
    """The budgets with a results tree under ``root``, the default budget first (a folder of results/
    named like no budget, a copy or a leftover, is not one)."""
    return [budget for budget in layout.budgets_with_results(root) if budget in budgets()]


@dataclass(frozen=True)
class Cell:
    study: str
    corpus: str  # the run folder's data key (data_key): the corpus, or `corpus-dataset`
    model: str
    fraction: int
    seed: int
    budget: str
    precision: str = precision.DEFAULT

    @property
    def key(self) -> str:
        """The cell within its budget's runs: ``{study}/{corpus}/{model}/frac{fraction}/seed{seed}``."""
        return f"{self.study}/{self.corpus}/{self.model}/frac{self.fraction}/seed{self.seed}"

    @property
    def run_dir(self) -> str:
        return f"{runs_dir(self.budget, self.precision)}/{self.key}"


def studies_with_budget(studies: dict, budget: str) -> dict:
    """The studies whose files define ``budget`` (every study defines the four main budgets; a second
    scale of one, like ``cpu_wide``, and ``paper_start`` only some). None: an error naming the budget."""
    kept = {name: study for name, study in studies.items() if budget in study["budgets"]}
    if not kept:
        raise ConfigError(f"budget {budget!r}: none of the studies {', '.join(studies)} defines it "
                          f"(config/studies/<study>.yaml, `budgets:`)")
    return kept


def budget_of(study: dict, config: dict) -> dict:
    return study["budgets"][config["budget"]]


def corpus_for(study: dict, config: dict, dataset: str) -> str:
    """The corpus trained on for a paper dataset under the current budget."""
    return budget_of(study, config).get("datasets", {}).get(dataset, dataset)


def data_key(study: dict, config: dict, dataset: str) -> str:
    """A paper dataset's run-folder name: its corpus, plus the dataset if the corpus stands in for several."""
    corpus = corpus_for(study, config, dataset)
    stand_ins = list(budget_of(study, config).get("datasets", {}).values())
    return f"{corpus}-{dataset}" if stand_ins.count(corpus) > 1 else corpus


def dataset_for(study: dict, config: dict, key: str) -> str:
    """The paper dataset of a run folder's data key under the current budget (inverse of data_key)."""
    for dataset in budget_of(study, config).get("datasets", {}):
        if data_key(study, config, dataset) == key:
            return dataset
    return key


def trained_corpus(study: dict, config: dict, cell: Cell) -> str:
    """The corpus a cell trains on (its folder's data key may also name the paper dataset)."""
    return corpus_for(study, config, dataset_for(study, config, cell.corpus))


def train_file(corpus: str, fraction: int) -> str:
    """The training split, or its first ``fraction`` % (a prefix, so fractions nest)."""
    if fraction == 100:
        return f"{PROCESSED}/{corpus}/train.txt"
    return f"{PROCESSED}/{corpus}/train.fraction{fraction}.txt"


def artifacts(study: dict, config: dict) -> list[str]:
    """The study's artifacts the current budget builds (all but those its `omit` leaves out, and those
    whose own `budgets` do not name it; none when the study file has no entry for the budget, as for a
    second scale that only some studies have)."""
    if config["budget"] not in study["budgets"]:
        return []
    omitted = set(budget_of(study, config).get("omit", []))
    return [name for name, spec in study["artifacts"].items()
            if name not in omitted and config["budget"] in spec.get("budgets", [config["budget"]])]


def artifact_spec(study: dict, config: dict, artifact: str) -> dict:
    """An artifact's grid under the current budget: the budget's smaller lists where it gives them, and
    its seeds (the artifact's own, else the budget's, else the run config's)."""
    budget = budget_of(study, config)
    spec = {**study["artifacts"][artifact], **budget.get("artifacts", {}).get(artifact, {})}
    seeds = spec["seeds"] if "seeds" in spec else budget["seeds"] if "seeds" in budget else config["seeds"]
    return {**spec, "seeds": seeds}


def artifact_cells(study: dict, config: dict, artifact: str) -> list[Cell]:
    """The training cells an artifact's notebook reads (none when it needs no training)."""
    if artifact == tuning.ARTIFACT:
        return variant_cells(study, config)
    spec = artifact_spec(study, config, artifact)
    if not spec.get("needs_training", True):
        return []
    return [
        Cell(study["study"], data_key(study, config, dataset), model, fraction, seed, config["budget"],
             config.get("precision", precision.DEFAULT))
        for dataset, model, fraction, seed in itertools.product(
            spec["datasets"], spec["models"], spec["fractions"], spec["seeds"])
    ]


def parent_cell(study: dict, cell: Cell) -> Cell | None:
    """The cell whose best checkpoint initialises this one (finetuning), if any."""
    parent = study["models"][cell.model].get("init_from")
    if parent is None:
        return None
    return dataclasses.replace(cell, model=parent)


def trains_as_published(model: dict, corpus: str) -> bool:
    """Whether the budget leaves a model's widths and recipe alone: it is marked ``as_published`` and
    trains on a real corpus (not a synthetic stand-in)."""
    synthetic = corpus in DATASETS and DATASETS[corpus].archive == "synthetic"
    return bool(model.get("as_published")) and not synthetic


def _scaled(width: int, budget: dict) -> int:
    scale = budget.get("width_scale")
    if scale is None:
        return width
    multiple = budget.get("width_multiple", 1)
    return max(multiple, round(width * scale / multiple) * multiple)


def _head(head: dict, budget: dict) -> dict:
    """A model's output head under a budget: a mixture of softmaxes takes the budget's `head` sizes
    (``experts``), or gives way to a plain softmax through the tied decoder (``type: softmax``)."""
    change = budget.get("head", {})
    if head["type"] != "mixture_of_softmaxes":
        return dict(head)
    if change.get("type") == "softmax":
        return {"type": "softmax"}
    return {**head, **change}


def _vocab_size(study: dict, model_id: str, corpus: str) -> int:
    """The vocabulary size a model sized to a parameter count is counted with (the study's ``vocab_sizes``)."""
    if corpus not in study.get("vocab_sizes", {}):
        raise ConfigError(f"study {study['study']!r}: model {model_id!r} is sized to a parameter budget, but "
                          f"vocab_sizes has no entry for corpus {corpus!r}; add its vocabulary size")
    return study["vocab_sizes"][corpus]


def architecture(study: dict, config: dict, model_id: str, corpus: str, dataset: str | None = None) -> dict:
    """A model's layer sizes under the current budget: scaled widths, or sized to its parameter budget.
    The study's ``dataset_architectures`` change a paper dataset's widths first (the LRN authors'
    WT-2 models are wider than their PTB ones)."""
    model = {**study["models"][model_id], **study.get("dataset_architectures", {}).get(dataset, {})}
    budget = {} if trains_as_published(model, corpus) else budget_of(study, config)
    same_width = model["embedding_size"] == "hidden_size"
    if "param_budget_of" in model:
        # a cell of your own on equal footing: as many parameters as the baseline's model at this budget
        baseline = architecture(study, config, model["param_budget_of"], corpus, dataset)
        vocab = _vocab_size(study, model_id, corpus)
        param_budget = language_model_params(
            baseline["cell"], vocab, baseline["embedding_size"], baseline["hidden_size"], baseline["layers"],
            baseline["tie_weights"], baseline["cell_options"])
        hidden, _ = hidden_size_for_budget(
            param_budget, model["cell"], vocab, model["layers"], model["tie_weights"], model["cell_options"],
            embedding_size=None if same_width else baseline["embedding_size"])
        embedding = hidden if same_width else baseline["embedding_size"]
    elif "param_budget" in model:
        param_budget = round(model["param_budget"] * budget.get("param_scale", 1))
        hidden, _ = hidden_size_for_budget(
            param_budget, model["cell"], _vocab_size(study, model_id, corpus), model["layers"], model["tie_weights"],
            model["cell_options"], embedding_size=None if same_width else model["embedding_size"])
        embedding = hidden if same_width else model["embedding_size"]
    else:
        param_budget, hidden = None, _scaled(model["hidden_size"], budget)
        embedding = hidden if same_width else _scaled(model["embedding_size"], budget)
    head = _head(model["head"], budget) if "head" in model else None
    # A softmax through the tied decoder reads the embedding's width: the last layer outputs that.
    last_hidden = (None if "last_hidden_size" not in model or (head == {"type": "softmax"} and model["tie_weights"])
                   else _scaled(model["last_hidden_size"], budget))
    return {"cell": model["cell"], "embedding_size": embedding, "hidden_size": hidden, "layers": model["layers"],
            "tie_weights": model["tie_weights"], "cell_options": dict(model["cell_options"]),
            **code_identity(model["cell"]), "param_budget": param_budget,
            **({"param_budget_of": model["param_budget_of"]} if "param_budget_of" in model else {}),
            **({"init": model["init"]} if "init" in model else {}),
            **({"init_range": model["init_range"]} if "init_range" in model else {}),
            **({"last_hidden_size": last_hidden} if last_hidden is not None else {}),
            **({"head": head} if head is not None else {})}


def resolve_cell(study: dict, config: dict, cell: Cell) -> dict:
    """Everything one training run needs, from the validated study and run config."""
    if cell.model not in study["models"]:
        raise ConfigError(f"study {cell.study!r} has no model {cell.model!r}")
    model = study["models"][cell.model]
    dataset = dataset_for(study, config, cell.corpus)
    corpus = corpus_for(study, config, dataset)
    budget = {} if trains_as_published(model, corpus) else budget_of(study, config)
    recipe_name = model["recipe"]
    recipe = merged(
        study["recipes"][recipe_name],
        study.get("dataset_recipes", {}).get(recipe_name, {}).get(dataset, {}),
        # this model's own changes (a cell of your own that needs another learning rate), which the
        # budget then scales as it scales the recipe
        model.get("recipe_changes", {}),
        budget.get("recipe", {}),
        budget.get("recipes", {}).get(recipe_name, {}),
    )
    tuned = tuning_of(study, config, cell, model, recipe)
    parent = parent_cell(study, cell)
    arch = architecture(study, config, cell.model, corpus, dataset)
    problem = precision.config_problem(arch["cell"], config["precision"], config["device"])
    if problem:
        raise ConfigError(f"study {cell.study!r}, model {cell.model!r}: {problem}")
    return {
        "study": cell.study,
        "task": study["task"],
        "dataset": dataset,
        "corpus": corpus,
        "model": cell.model,
        "fraction": cell.fraction,
        "seed": cell.seed,
        "budget": config["budget"],
        "precision": config["precision"],
        "data": {"dir": f"{PROCESSED}/{corpus}", "train_file": train_file(corpus, cell.fraction)},
        "architecture": arch,
        "recipe_name": recipe_name,
        "recipe": recipe,
        "init_from": f"{parent.run_dir}/model.pt" if parent else None,
        **({"tuning": tuned} if tuned else {}),
    }


def tuning_of(study: dict, config: dict, cell: Cell, model: dict, recipe: dict) -> dict | None:
    """A tuning variant's or a tuned cell's learning rate, set in ``recipe`` (changed in place), and what
    the cell's config says of it (rnnrepro.tuning); None for a cell this budget does not tune."""
    if "tuning_of" in model:
        settings = tuned_settings(study, config) or study["artifacts"][tuning.ARTIFACT]
        recipe["lr"] = recipe["lr"] * model["lr_factor"]
        epochs = settings["tuning"].get("epochs")
        if epochs is not None:
            recipe["epochs"] = min(recipe["epochs"], epochs)
        return {"variant_of": model["tuning_of"], "lr_factor": model["lr_factor"], "diverged_is_a_result": True}
    chosen = tuning_choice(study, config, cell)
    if chosen is not None:
        recipe["lr"] = recipe["lr"] * chosen["lr_factor"]
    return chosen


# ---------------------------------------------------------------- learning-rate tuning (rnnrepro.tuning)

def tuned_settings(study: dict, config: dict) -> dict | None:
    """The tuning artifact's grid under the current budget (its models, datasets, fractions, seeds and
    ``tuning`` settings), or None where the budget tunes nothing."""
    if tuning.ARTIFACT not in artifacts(study, config):
        return None
    spec = artifact_spec(study, config, tuning.ARTIFACT)
    return {**spec, "tuning": {**study["artifacts"][tuning.ARTIFACT]["tuning"], **spec.get("tuning", {})}}


def variant_cells(study: dict, config: dict) -> list[Cell]:
    """The tuning artifact's cells: every variant of every tuned model, dataset and fraction, on its seeds."""
    spec = tuned_settings(study, config)
    if spec is None:
        return []
    return [Cell(study["study"], data_key(study, config, dataset), tuning.variant_id(model, factor), fraction,
                 seed, config["budget"], config.get("precision", precision.DEFAULT))
            for dataset in spec["datasets"] for model in spec["models"]
            for factor in spec["tuning"]["lr_factors"] for fraction in spec["fractions"] for seed in spec["seeds"]]


def tuning_cells_of(study: dict, config: dict, cell: Cell) -> list[Cell]:
    """The variants whose results choose this cell's learning rate (empty: it is not tuned here)."""
    if tuning.parse_variant(cell.model) is not None:
        return []
    spec = tuned_settings(study, config)
    if spec is None:
        return []
    root = tuning.tuned_root(study, cell.model)
    if root not in spec["models"] or cell.fraction not in spec["fractions"]:
        return []
    if cell.corpus not in {data_key(study, config, d) for d in spec["datasets"]}:
        return []
    return [dataclasses.replace(cell, model=tuning.variant_id(root, factor), seed=seed)
            for factor in spec["tuning"]["lr_factors"] for seed in spec["seeds"]]


def _finished(study: dict, config: dict, variant: Cell, records: Path) -> dict | None:
    """A variant's metrics where it has finished and is current: in the budget's results tree, else in
    its record; None otherwise."""
    expected = resolve_cell(study, config, variant)
    relative = Path(variant.run_dir).relative_to(results_dir(variant.budget))
    for folder in (Path(variant.run_dir), records / variant.budget / relative):
        try:
            metrics = json.loads((folder / "metrics.json").read_text())
            recorded = json.loads((folder / "config.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(metrics, dict) and isinstance(recorded, dict) \
                and stale_reason(recorded, expected, str(metrics.get("git_sha", "")), epochs=metrics.get("epochs"),
                                 folder=folder) is None \
                and tuning.validation_loss(metrics) is not None and math.isfinite(tuning.validation_loss(metrics)):
            return metrics
    return None


def tuning_curve(study: dict, config: dict, cell: Cell, records: Path = Path("records")) -> list[dict]:
    """The tuning curve behind a cell: one entry per variant (factor, lr, validation loss, epochs, whether
    it diverged). Raises tuning.TuningPending while a variant has not finished."""
    variants = tuning_cells_of(study, config, cell)
    found, missing = [], []
    for variant in variants:
        metrics = _finished(study, config, variant, records)
        if metrics is None:
            missing.append(variant.key)
            continue
        _, factor = tuning.parse_variant(variant.model)
        found.append({"factor": factor, "seed": variant.seed, "val_loss": tuning.validation_loss(metrics),
                      "epochs": metrics.get("epochs"), "best_epoch": metrics.get("best_epoch"),
                      "diverged": metrics.get("diverged")})
    if missing:
        raise tuning.TuningPending(tuning.tuned_root(study, cell.model), missing)
    return found


def tuning_choice(study: dict, config: dict, cell: Cell, records: Path = Path("records")) -> dict | None:
    """What tuning sets for a cell: the chosen factor, the grid it was chosen from and the seeds it was
    tuned on (part of the cell's config: another grid or choice is another cell), or None where the cell
    is not tuned at this budget. Raises tuning.TuningPending until its variants have finished."""
    spec = tuned_settings(study, config)
    if not tuning_cells_of(study, config, cell):
        return None
    return {"lr_factor": tuning.chosen_factor(tuning_curve(study, config, cell, records)),
            "lr_factors": list(spec["tuning"]["lr_factors"]), "seeds": list(spec["seeds"]),
            "epochs": spec["tuning"].get("epochs")}


def absent_custom_cells(study: dict, config: dict) -> set[str]:
    """The cells of your own of ``study`` that no artifact of the budget's grid holds (left out of the
    budget, :func:`rnnrepro.custom_cells._leave_out`): their claims have no place in the budget's scorecard."""
    present = {model for artifact in artifacts(study, config)
               for model in artifact_spec(study, config, artifact).get("models", [])}
    return {name for name in study.get("custom_cells", {}) if name not in present}
