"""Checks of a config's cells of your own (rnnrepro.custom_cells) against the study files and the run:
what the schema cannot see (studies, models, artifacts, the cell's module, class and options, the
recipe keys it changes), then a trial of each cell at the layer sizes and window lengths it will get
(rnnrepro.custom_cells.try_cell). Above the grid and the configuration, which it reads; the workflow and
``records`` call it once per run, before anything is planned.
"""

from __future__ import annotations

from . import grid
from .configuration import recipe_problems
from .custom_cells import (CONTRACT, TRIAL_BATCH, TRIAL_STEPS, VARIABLE_BPTT_REACH, _model, trial_layer_sizes,
                           try_cell, uncountable)
from .errors import ConfigError


def check_custom_cells(custom_cells: dict, studies: dict[str, dict], source: str, config: dict | None = None) -> None:
    """Raise ConfigError naming ``source`` and every offending key of the ``custom_cells`` section;
    when the keys are right, try each cell (:func:`try_cell`) at the layer sizes of every model it
    becomes and, given the run ``config``, on windows as long as its recipes give it at the run's
    budget, and name each cell that fails with what went wrong.

    ``studies``: the run's studies as their files define them (before any custom cell is added).
    """
    from .cells import cell_options, validate_cell  # torch-free: read the class's constructor from its source

    problems = []
    for name, custom in custom_cells.items():
        where = f"custom_cells.{name}"
        try:
            cell_options(custom["cell"])  # the module and the class
        except ValueError as error:
            problems.append(f"{where}.cell: {error}")
        else:
            try:
                validate_cell(custom["cell"], custom.get("cell_options", {}))
            except ValueError as error:
                problems.append(f"{where}.cell_options: {error}")
        for study_name, entry in custom["studies"].items():
            at = f"{where}.studies.{study_name}"
            if study_name not in studies:
                problems.append(f"{at}: study {study_name!r} is not run (config `studies`: "
                                f"{', '.join(studies)}); add it to `studies` or remove this entry")
                continue
            study = studies[study_name]
            if name in study["models"]:
                problems.append(f"{where}: study {study_name!r} already has a model {name!r}; rename the cell")
            if entry["like"] not in study["models"]:
                problems.append(f"{at}.like: unknown model {entry['like']!r} (models: {', '.join(study['models'])})")
            elif "init_from" in study["models"][entry["like"]]:
                problems.append(f"{at}.like: {entry['like']!r} is finetuned from another model's weights; "
                                f"name a model trained from scratch")
            else:
                problems += _sizing_problems(study, entry, at)
            for artifact in entry["artifacts"]:
                if artifact not in study["artifacts"]:
                    problems.append(f"{at}.artifacts: unknown artifact {artifact!r} "
                                    f"(artifacts: {', '.join(study['artifacts'])})")
                elif not study["artifacts"][artifact].get("needs_training", True):
                    problems.append(f"{at}.artifacts: {artifact!r} trains no cells, so a new cell cannot "
                                    f"appear in it")
    if problems:
        raise ConfigError(f"{source} is invalid:\n  " + "\n  ".join(problems))
    failed = []
    for name, custom in custom_cells.items():
        sizes = dict.fromkeys(pair for study_name, entry in custom["studies"].items()
                              for pair in trial_layer_sizes(studies[study_name],
                                                            _model(studies[study_name], custom, entry)))
        longest = max((length for study_name, entry in custom["studies"].items()
                       for length in window_lengths(studies[study_name], config, entry)), default=None)
        problem = next(filter(None, (try_cell(custom["cell"], custom.get("cell_options", {}), *pair, longest)
                                     for pair in sizes)), None)
        if problem:
            failed.append(f"{source}: custom_cells.{name}: {problem}")
    if failed:
        raise ConfigError("\n".join(failed) + f"\nEach cell was built small on the CPU and run twice on a window of "
                          f"{TRIAL_STEPS} steps and batch {TRIAL_BATCH}, the state carried, then on a window as "
                          f"long as its recipes give it; {CONTRACT}, every number finite.")


def window_lengths(study: dict, config: dict | None, entry: dict) -> list[int]:
    """The longest window (time steps) that training and evaluation give a cell standing in for
    ``entry["like"]`` in each dataset of the entry's artifacts at the run's budget: the recipe's
    ``bptt``, or for a variable BPTT its ``seq_len_cap`` (else ``bptt`` + VARIABLE_BPTT_REACH). None
    known without a run config, for a budget the study lacks, or for a task without BPTT windows."""
    if config is None or config["budget"] not in study["budgets"]:
        return []
    lengths = []
    for artifact in entry["artifacts"]:
        spec = grid.artifact_spec(study, config, artifact)
        for dataset in spec.get("datasets", []):
            cell = grid.Cell(study["study"], grid.data_key(study, config, dataset), entry["like"], 100,
                             spec["seeds"][0], config["budget"], config.get("precision", "fp32"))
            recipe = grid.resolve_cell(study, config, cell)["recipe"]
            if "bptt" in recipe:
                reach = (recipe.get("seq_len_cap") or recipe["bptt"] + VARIABLE_BPTT_REACH) \
                    if recipe.get("variable_bptt") else recipe["bptt"]
                lengths.append(max(reach, recipe["bptt"]))
    return lengths


def _sizing_problems(study: dict, entry: dict, at: str) -> list[str]:
    """A width asked for twice, equal parameters where they cannot be counted, recipe keys the baseline's
    recipe does not have."""
    like = study["models"][entry["like"]]
    asked = [key for key in ("match", "hidden_size", "param_budget") if key in entry]
    problems = []
    if len(asked) > 1:
        problems.append(f"{at}: {' and '.join(asked)} both size the cell; give one of them")
    elif entry.get("match") == "parameters" and "param_budget" not in like and uncountable(like):
        problems.append(f"{at}.match: {entry['like']!r} has {uncountable(like)}, which rnnrepro.sizing does not "
                        f"count, so the cell cannot be sized to its parameters; give match: width, or a "
                        f"hidden_size or param_budget of its own")
    recipe = study["recipes"][like["recipe"]]
    unknown = [key for key in entry.get("recipe", {}) if key not in recipe]
    if unknown:
        problems.append(f"{at}.recipe: {', '.join(map(repr, unknown))} not in {entry['like']}'s recipe "
                        f"{like['recipe']!r} (its keys: {', '.join(recipe)})")
    elif entry.get("recipe"):
        changed = {**recipe, **like.get("recipe_changes", {}), **entry["recipe"]}
        problems += [f"{at}.{problem}" for problem in recipe_problems(changed, study["task"])]
    return problems
