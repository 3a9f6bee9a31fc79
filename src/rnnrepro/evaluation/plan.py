"""Which evaluations run over which cells, and each one's resolved settings (torch-free: the Snakefile
imports it).

A study file declares named evaluations under ``evaluations:`` (``method`` plus that method's
settings); a dataset may change settings (``evaluations.<name>.dataset_settings.<dataset>``, e.g. the
authors' dynamic-evaluation settings for WT-2), and a budget after it
(``budgets.<budget>.evaluations.<name>``); an artifact lists the names its notebook reads
(``artifacts.<artifact>.evaluations``). Evaluation ``<name>`` of a cell is written to
``<run dir>/<name>.json``.
"""

from __future__ import annotations

from ..configuration import ConfigError, definition_validator, merged
from ..grid import artifact_cells, budget_of, dataset_for

METHODS = ("dynamic", "entropy", "saliency")
# Files the training rule writes into a run folder: an evaluation may not take their names.
RUN_FILES = ("config", "metrics", "history", "model")


def settings_errors(settings: dict) -> list[str]:
    """What is wrong with one evaluation's settings (method and its keys), by the study schema."""
    return [f"{'.'.join(map(str, e.absolute_path)) or '(settings)'}: {e.message}"
            for e in definition_validator("study", "evaluation").iter_errors(settings)]


def check_evaluations(study: dict) -> None:
    """Every name an artifact or budget uses is declared, no name collides with a run file, and each
    budget's settings are valid for the method."""
    declared = study.get("evaluations", {})
    problems = [f"evaluations.{name}: the name is taken by the run folder's {name}.json; choose another"
                for name in declared if name in RUN_FILES]
    datasets = {d for spec in study["artifacts"].values() for d in spec["datasets"]}
    for name, settings in declared.items():
        for dataset in settings.get("dataset_settings", {}):
            if dataset not in datasets:
                problems.append(f"evaluations.{name}.dataset_settings.{dataset}: no artifact of the study uses "
                                f"dataset {dataset!r} (datasets: {', '.join(sorted(datasets))})")
            problems += [f"evaluations.{name}.dataset_settings.{dataset}: {error}"
                         for error in settings_errors(resolved(settings, dataset, {}))]
    for artifact, spec in study["artifacts"].items():
        for name in spec.get("evaluations", []):
            if name not in declared:
                problems.append(f"artifacts.{artifact}.evaluations: unknown evaluation {name!r} "
                                f"(declared: {', '.join(declared) or 'none'}; add it under `evaluations:`)")
    for budget_name, budget in study["budgets"].items():
        for name, override in budget.get("evaluations", {}).items():
            if name not in declared:
                problems.append(f"budgets.{budget_name}.evaluations.{name}: unknown evaluation")
            elif "method" in override:
                problems.append(f"budgets.{budget_name}.evaluations.{name}: a budget may change settings, "
                                "not the method")
            else:
                for dataset in [None, *declared[name].get("dataset_settings", {})]:
                    problems += [f"budgets.{budget_name}.evaluations.{name}{f' ({dataset})' if dataset else ''}."
                                 f"{error}" for error in settings_errors(resolved(declared[name], dataset, override))]
    if problems:
        raise ConfigError(f"study {study['study']!r} is invalid:\n  " + "\n  ".join(problems))


def resolved(settings: dict, dataset: str | None, budget_override: dict) -> dict:
    """An evaluation's settings for one dataset under one budget: declared, then the dataset's
    ``dataset_settings``, then the budget's changes (the budget scales whatever the dataset says)."""
    per_dataset = settings.get("dataset_settings", {})
    base = {k: v for k, v in settings.items() if k != "dataset_settings"}
    return merged(base, per_dataset.get(dataset, {}), budget_override)


def evaluation_spec(study: dict, config: dict, name: str, data_key: str) -> dict:
    """The settings of evaluation ``name`` for a cell's run folder data key (its corpus, e.g. ``ptb`` or
    ``synth_ptb``) under the run config's budget."""
    if name not in study.get("evaluations", {}):
        raise ConfigError(f"study {study['study']!r} declares no evaluation {name!r}")
    override = budget_of(study, config).get("evaluations", {}).get(name, {})
    dataset = dataset_for(study, config, data_key)
    return {"name": name, **resolved(study["evaluations"][name], dataset, override)}


def artifact_evaluation_files(study: dict, config: dict, artifact: str) -> list[str]:
    """``<run dir>/<name>.json`` of every cell of the artifact, for every evaluation it lists."""
    names = study["artifacts"][artifact].get("evaluations", [])
    return [f"{cell.run_dir}/{name}.json" for cell in artifact_cells(study, config, artifact) for name in names]


def evaluation_names(studies: dict) -> list[str]:
    return sorted({name for study in studies.values() for name in study.get("evaluations", {})})
