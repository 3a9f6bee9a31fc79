"""Loading and validating the run config and the study files.

Both are checked against the JSON schemas in ``workflow/schemas/`` before any job starts; an error
names the file, the offending key and what is allowed. Cross-references the schema cannot express
(a model naming an unknown recipe, cell or cell option, an artifact naming an unknown model or
dataset) are checked here too. Values given on the command line (``--config``) are read as the
schema's types first, and an error in one of them names the command line.

This module imports no torch: the Snakefile imports it at parse time.
"""

from __future__ import annotations

import copy
import difflib
import functools
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from . import tuning
from .errors import ConfigError

# The checkout this package was imported from; its schemas describe this code's files.
REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO_ROOT / "workflow" / "schemas"
# What marks a folder as a checkout of this project.
PROJECT_MARKERS = ("config/studies", "workflow/schemas")
# task -> the definition in study.schema.yaml that a resolved recipe of that task must satisfy
RECIPE_DEFINITIONS = {"lm": "recipe", "autocomplete": "autocomplete_recipe"}
# How a boolean may be written after --config (YAML 1.1's words; Snakemake itself reads only True/False)
BOOLEAN_WORDS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}


# libyaml's loader where PyYAML has it (its wheels do): the study files are long, and every Snakemake
# run, job and notebook reads them; the pure-Python loader took most of a dry run's time.
_FAST_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SAFE_LOADER(_FAST_SAFE_LOADER):  # noqa: N801 (a loader class, named as the constant it replaced)
    """The safe loader, refusing a key given twice in one mapping: YAML keeps the last silently, so a
    model or budget pasted twice into a study file would replace the first without a word."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark,
                    f"key {key!r} appears twice (first on line {seen[key].line + 1}): keep one", key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def working_tree(start: Path | None = None) -> Path | None:
    """The checkout a command runs in: the nearest folder from ``start`` (the working directory) up that
    holds config/studies/ and workflow/schemas/; None outside any."""
    start = Path.cwd() if start is None else Path(start)
    for folder in (start.resolve(), *start.resolve().parents):
        if all((folder / marker).is_dir() for marker in PROJECT_MARKERS):
            return folder
    return None


def project_root() -> Path:
    """Where the study files and the run config are read from: the working tree a command runs in (two
    clones may share one environment), else the checkout the package was imported from."""
    return working_tree() or REPO_ROOT


def _code_digest(package: Path) -> str:
    """sha256 over the package's Python files (their paths and bytes)."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(f"{path.relative_to(package)}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def other_checkout_problem() -> str | None:
    """Why a command must not run here: it runs in a checkout whose own src/rnnrepro holds other code than
    the package this process imported (another clone's editable install, say). It would read this
    checkout's study files and results with the other's code, and record runs under this checkout's git
    sha. None when they agree (the same checkout, or a copy of the same code), or outside a checkout."""
    tree = working_tree()
    if tree is None or tree == REPO_ROOT or not (tree / "src" / "rnnrepro").is_dir():
        return None
    if _code_digest(tree / "src" / "rnnrepro") == _code_digest(Path(__file__).resolve().parent):
        return None
    return (f"this command runs in {tree}, but imports rnnrepro from {Path(__file__).resolve().parent}, another "
            f"checkout: it would read this checkout's study files and results with that one's code. Use this "
            f"checkout's code: `PYTHONPATH=src python -m ...`, or its own environment (`make setup` makes "
            f".venv here), or `pip install -e .` here")


def check_checkout() -> None:
    """Raise ConfigError with :func:`other_checkout_problem`'s message, if there is one (the commands
    that read a checkout's study files or results call it first)."""
    problem = other_checkout_problem()
    if problem:
        raise ConfigError(problem)


def load_yaml(path: Path) -> Any:
    try:
        with open(path) as f:
            return yaml_text(f.read(), path)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None


def load_config_file(path: Path) -> dict:
    """A config file: a YAML mapping of keys (an empty file, a list or a single value is named)."""
    data = load_yaml(path)
    if not isinstance(data, dict):
        what = "empty" if data is None else f"a {type(data).__name__}, not keys and values"
        raise ConfigError(f"{path}: the config file is {what}: a config file holds keys at its top level, "
                          f"e.g. `custom_cells:` (docs/custom_cells.md) or `budget: cpu`")
    return data


def yaml_text(text: str, path: Path | str) -> Any:
    """The YAML document ``text`` read from the file ``path`` (named in a syntax error)."""
    try:
        return yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as e:
        raise ConfigError(yaml_error(path, e)) from None


def yaml_error(path: Path | str, error: yaml.YAMLError) -> str:
    """A YAML syntax error as one message that names the file, the line and the column (1-based)."""
    mark = getattr(error, "problem_mark", None)
    where = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark else str(path)
    problem = getattr(error, "problem", None) or str(error)
    context, context_mark = getattr(error, "context", None), getattr(error, "context_mark", None)
    started = (f"; {context} at line {context_mark.line + 1}, column {context_mark.column + 1}"
               if context and context_mark else "")
    return f"{where}: not valid YAML ({problem}{started}). Fix the file there (mind the indentation and the brackets)"


# The schemas are this checkout's own files, read once per process (every Snakemake run, job and notebook
# validates several files against them): callers must not change what these return.
@functools.cache
def _schema(name: str) -> dict:
    return load_yaml(SCHEMA_DIR / f"{name}.schema.yaml")


@functools.cache
def definition_validator(schema_name: str, definition: str) -> jsonschema.Draft202012Validator:
    """A validator for one ``$defs`` entry of a schema (e.g. a study's recipe or evaluation settings)."""
    return jsonschema.Draft202012Validator({"$defs": _schema(schema_name)["$defs"], "$ref": f"#/$defs/{definition}"})


@functools.cache
def _validator(schema_name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(_schema(schema_name))


def budgets() -> list[str]:
    """Every budget a run config may name (workflow/schemas/config.schema.yaml)."""
    return list(_schema("config")["properties"]["budget"]["enum"])


def check_budget(budget: str, option: str = "--budget") -> None:
    """A budget given on a command line (``option``) that is none of the budgets: an error naming it, the
    nearest budget and all of them (rather than the config file the budget would be merged into)."""
    if budget not in budgets():
        near = difflib.get_close_matches(budget, budgets(), n=1)
        raise ConfigError(f"{option} {budget}: no such budget{f'; did you mean {near[0]}?' if near else ''} "
                          f"(the budgets are {', '.join(budgets())})")


def _key_path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "(top level)"


def _describe(error: jsonschema.ValidationError, schema: dict) -> str:
    where = _key_path(error)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed)) if isinstance(error.instance, dict) else []
        hint = f"; allowed keys: {', '.join(allowed)}" if allowed else ""
        return f"unknown key {', '.join(repr(k) for k in extra)} under {where}{hint}"
    if error.validator == "required":
        return f"{error.message} under {where}"
    return f"key '{where}': {error.message}"


def _errors(instance: Any, schema_name: str) -> list[jsonschema.ValidationError]:
    return sorted(_validator(schema_name).iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))


def _raise(source: str, errors: list[jsonschema.ValidationError], schema_name: str) -> None:
    details = "\n  ".join(_describe(e, {}) for e in errors[:5])
    raise ConfigError(f"{source} is invalid:\n  {details}\nFix the key(s) above; "
                      f"the allowed keys and types are in workflow/schemas/{schema_name}.schema.yaml")


def schema_problems(instance: Any, schema_name: str) -> list[str]:
    """Every way ``instance`` breaks workflow/schemas/<schema_name>.schema.yaml, one line each."""
    problems = []
    for error in _errors(instance, schema_name):
        if error.validator == "anyOf" and not error.absolute_path:  # the closest alternative's missing keys
            missing = min(([key for key in alternative.get("required", []) if key not in instance]
                           for alternative in error.schema["anyOf"]), key=len)
            problems.append(f"missing {', '.join(map(repr, missing))}")
        else:
            problems.append(_describe(error, {}))
    return problems


def validate(instance: Any, schema_name: str, source: str) -> None:
    """Raise ConfigError naming the first offending key (in document order) of ``instance``."""
    errors = _errors(instance, schema_name)
    if errors:
        _raise(source, errors, schema_name)


def _from_command_line(value: Any, schema: dict) -> Any:
    """A ``--config KEY=VALUE`` value as the schema's type, where it reads as one; else unchanged.

    Snakemake turns a command-line value into an int, a float, True/False (only those spellings), a
    list of strings (``[1111,1112]``) or a string, and an empty value into None.
    """
    kind = schema.get("type")
    if kind == "boolean" and isinstance(value, str) and value.lower() in BOOLEAN_WORDS:
        return BOOLEAN_WORDS[value.lower()]
    if kind == "integer" and isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value.strip()):
        return int(value)
    if kind == "number" and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    if kind == "string" and value is None:  # data_mirror=
        return ""
    if kind == "string" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if kind == "array":
        if value is None:
            value = []
        elif isinstance(value, str):  # seeds=1111,1112
            value = [item.strip() for item in value.strip("[]").split(",") if item.strip()]
        elif not isinstance(value, list):  # seeds=1111
            value = [value]
        return [_from_command_line(item, schema.get("items", {})) for item in value]
    return value


def _top_keys(error: jsonschema.ValidationError, properties: dict) -> set[str]:
    """The top-level config keys a validation error is about."""
    if error.absolute_path:
        return {error.absolute_path[0]}
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        return set(error.instance) - set(properties)
    return set()


def load_run_config(config: dict, source: str = "config/config.yaml", command_line: dict | None = None) -> dict:
    """Validate the run config (in place: command-line values are first read as the schema's types).

    ``command_line``: the ``--config`` overrides (Snakemake's ``workflow.config_settings.config``); an
    error in one of them names the command line rather than ``source``.
    """
    command_line = dict(command_line or {})
    properties = _schema("config")["properties"]
    for key in command_line:
        if key in config and key in properties:
            config[key] = _from_command_line(config[key], properties[key])
    errors = _errors(config, "config")
    if not errors:
        return config
    from_command_line = [e for e in errors if _top_keys(e, properties) and _top_keys(e, properties) <= set(command_line)]
    if from_command_line:
        keys = sorted(set().union(*(_top_keys(e, properties) for e in from_command_line)))
        settings = " ".join(f"{key}={command_line[key]}" for key in keys)
        details = "\n  ".join(_describe(e, {}) for e in from_command_line[:5])
        raise ConfigError(f"the command line (--config {settings}) is invalid:\n  {details}\nFix the value(s) "
                          f"after --config; the allowed keys and types are in workflow/schemas/config.schema.yaml "
                          f"and explained in {source}")
    _raise(source, errors, "config")


def study_file(study: str, root: Path | None = None) -> dict:
    """A study file (under ``root``, by default :func:`project_root`), validated, as written: no tuning
    variants, no cells of your own (a run's, which ``grid.load_study`` adds before the variants)."""
    path = (project_root() if root is None else root) / "config" / "studies" / f"{study}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise ConfigError(f"studies: unknown study {study!r} (no {path}); known studies: {', '.join(known)}")
    return copy.deepcopy(_checked_study(str(path), study, path.read_text()))


def load_study(study: str, root: Path | None = None) -> dict:
    """A study file, validated, with its tuning variants (rnnrepro.tuning): the study as its file defines
    it. ``grid.load_study`` is the study a run sees, with the run's cells of your own added."""
    return tuning.add_variants(study_file(study, root))


@functools.lru_cache(maxsize=32)
def _checked_study(path: str, study: str, text: str) -> dict:
    """A study file's text, parsed and checked once per process and content (a Snakemake run, a job or a
    notebook asks for each study several times); :func:`load_study` hands out copies."""
    data = yaml_text(text, path)
    validate(data, "study", path)
    if data["study"] != study:
        raise ConfigError(f"{path}: `study: {data['study']}` does not match the file name ({study})")
    check_references(data, path)
    return data


def known_datasets() -> list[str]:
    """Every dataset id the data layer can fetch or derive (the registry's and the autocomplete sets)."""
    # imported when a study is checked: the data package (numpy) is more than the config needs
    from .data.autocomplete import AUTOCOMPLETE_DATASETS
    from .data.registry import DATASETS

    return sorted({*DATASETS, *AUTOCOMPLETE_DATASETS})


def _check_model(name: str, model: dict) -> list[str]:
    """A model's cell id and cell_options against the cell's constructor, and its sizing."""
    from .cells import CELLS, is_outside_cell, validate_cell  # torch-free: signatures are read from the source

    if model["cell"] not in CELLS and not is_outside_cell(model["cell"]):
        return [f"models.{name}.cell: unknown cell {model['cell']!r}; known cells: {', '.join(sorted(CELLS))}, "
                f"or module:Class (docs/custom_cells.md)"]
    try:
        validate_cell(model["cell"], model["cell_options"])
    except ValueError as e:
        return [f"models.{name}.cell_options: {e}"]
    return []  # any cell can be sized to a param_budget (rnnrepro.sizing counts its parameters)


def _check_datasets(study: dict) -> list[str]:
    """Dataset ids of the grid, of dataset recipes and of each budget's stand-ins: ids the data layer knows."""
    known = known_datasets()
    named = [(f"artifacts.{name}.datasets", dataset)
             for name, artifact in study["artifacts"].items() for dataset in artifact.get("datasets", [])]
    named += [(f"dataset_recipes.{recipe}", dataset)
              for recipe, datasets in study.get("dataset_recipes", {}).items() for dataset in datasets]
    for budget_name, budget in study["budgets"].items():
        for dataset, corpus in budget.get("datasets", {}).items():
            named += [(f"budgets.{budget_name}.datasets", dataset),
                      (f"budgets.{budget_name}.datasets.{dataset}", corpus)]
    return [f"{key}: unknown dataset {dataset!r}; known datasets: {', '.join(known)} "
            f"(`python -m rnnrepro.data info` describes them)"
            for key, dataset in named if dataset not in known]


def _listed_twice(key: str, artifact: dict) -> list[str]:
    """A model, dataset or fraction listed twice in an artifact's grid: its cells would count twice (twice
    the samples, a narrower interval), so it is an error, not something to drop silently."""
    problems = []
    for part in ("models", "datasets", "fractions"):
        listed = artifact.get(part) or []
        twice = sorted({str(x) for x in listed if listed.count(x) > 1})
        if twice:
            problems.append(f"{key}.{part}: {', '.join(twice)} listed twice (each cell counts once: remove the copy)")
    return problems


def _tuning_seed_problems(study: dict) -> list[str]:
    """The tuning artifact's seeds (rnnrepro.tuning) must be seeds no verdict reads: none of the seeds of
    any other artifact under the same budget."""
    if tuning.ARTIFACT not in study["artifacts"]:
        return []
    problems = []
    for name, budget in study["budgets"].items():
        def seeds(artifact: str) -> set:
            cut = budget.get("artifacts", {}).get(artifact, {})
            return set(cut.get("seeds", study["artifacts"][artifact].get("seeds", budget.get("seeds", []))))
        shared = seeds(tuning.ARTIFACT) & set().union(*(seeds(a) for a in study["artifacts"] if a != tuning.ARTIFACT))
        if shared:
            problems.append(f"budgets.{name}: the tuning seeds {sorted(shared)} are also seeds of the compared "
                            f"cells; give the tuning artifact seeds of its own (artifacts.{tuning.ARTIFACT}.seeds)")
    return problems


def check_references(study: dict, source: str) -> None:
    """Raise ConfigError naming ``source`` and every reference of the study the schema cannot check: a
    model's recipe, cell and options, an artifact's models and datasets, each budget's cuts."""
    models, recipes = study["models"], study["recipes"]
    problems = _check_datasets(study)
    for name, model in models.items():
        problems += _check_model(name, model)
        if model["recipe"] not in recipes:
            problems.append(f"models.{name}.recipe: unknown recipe {model['recipe']!r} (have: {', '.join(recipes)})")
        if "init_from" in model and model["init_from"] not in models:
            problems.append(f"models.{name}.init_from: unknown model {model['init_from']!r}")
    for name, artifact in study["artifacts"].items():
        for model in artifact["models"]:
            if model not in models:
                problems.append(f"artifacts.{name}.models: unknown model {model!r}")
        problems += _listed_twice(f"artifacts.{name}", artifact)
        for budget_name in artifact.get("budgets", []):
            if budget_name not in study["budgets"]:
                problems.append(f"artifacts.{name}.budgets: {budget_name!r} is not a budget of this study "
                                f"(have: {', '.join(study['budgets'])})")
    for recipe in study.get("dataset_recipes", {}):
        if recipe not in recipes:
            problems.append(f"dataset_recipes.{recipe}: unknown recipe")
    for budget_name, budget in study["budgets"].items():
        for recipe in budget.get("recipes", {}):
            if recipe not in recipes:
                problems.append(f"budgets.{budget_name}.recipes.{recipe}: unknown recipe")
        for name in budget.get("omit", []):
            if name not in study["artifacts"]:
                problems.append(f"budgets.{budget_name}.omit: {name!r} is not an artifact of this study")
        for name, smaller in budget.get("artifacts", {}).items():
            problems += _listed_twice(f"budgets.{budget_name}.artifacts.{name}", smaller)
            if name not in study["artifacts"]:
                problems.append(f"budgets.{budget_name}.artifacts.{name}: unknown artifact")
                continue
            # (fractions may differ: a budget may train on a smaller share of the training split)
            for key in ("datasets", "models"):
                extra = set(smaller.get(key, [])) - set(study["artifacts"][name][key])
                if extra:
                    problems.append(f"budgets.{budget_name}.artifacts.{name}.{key}: {sorted(extra)} not in "
                                    f"artifacts.{name}.{key} (a budget can only leave cells out)")
    problems += _tuning_seed_problems(study)
    for artifact, datasets in study["paper"].items():
        if artifact not in study["artifacts"]:
            problems.append(f"paper.{artifact}: unknown artifact")
            continue
        if "paper_source" not in study["artifacts"][artifact]:
            problems.append(f"artifacts.{artifact}: no paper_source; say where in the paper the values under "
                            f"paper.{artifact} come from (a table, a figure, a section)")
        for dataset, rows in datasets.items():
            for model in rows:
                if model not in models:
                    problems.append(f"paper.{artifact}.{dataset}.{model}: unknown model")
    if problems:
        raise ConfigError(f"{source} is invalid:\n  " + "\n  ".join(problems))


def merged(base: dict, *overrides: dict) -> dict:
    out = copy.deepcopy(base)
    for override in overrides:
        out.update(copy.deepcopy(override))
    return out


def read_json_argument(text: str) -> tuple[Any, str]:
    """A command-line ``--config`` value: JSON text, or the path of a JSON file. Returns the parsed
    value and how to name it in an error (``--config`` or the file's path)."""
    source = "--config"
    if not text.lstrip().startswith("{"):
        source = text
        try:
            text = Path(text).read_text()
        except OSError as e:
            raise ConfigError(f"--config {source}: cannot read it ({e.strerror})") from None
    try:
        return json.loads(text), source
    except json.JSONDecodeError as e:
        raise ConfigError(f"{source}: not valid JSON ({e})") from None


def recipe_problems(recipe: dict, task: str) -> list[str]:
    """What is wrong with a whole recipe of a task (``recipe.<key>: ...``), checked against the study
    schema's recipe definition."""
    validator = definition_validator("study", RECIPE_DEFINITIONS[task])
    errors = list(validator.iter_errors(recipe))
    return ["recipe." + _describe(e, validator.schema) for e in errors[:5]]


def validate_cell_config(cfg: dict, source: str) -> dict:
    """Check a resolved training-cell config (the train CLI's input)."""
    validate(cfg, "cell", source)
    problems = recipe_problems(cfg["recipe"], cfg["task"])
    if problems:
        raise ConfigError(f"{source} is invalid:\n  " + "\n  ".join(problems))
    return cfg
