"""Loading and validating the run config and the study files.

Both are checked against the JSON schemas in ``workflow/schemas/`` before any job starts; an error
names the file, the offending key and what is allowed. Cross-references the schema cannot express
(a model naming an unknown recipe, an artifact naming an unknown model) are checked here too.

This module imports no torch: the Snakefile imports it at parse time.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO_ROOT / "workflow" / "schemas"
# task -> the definition in study.schema.yaml that a resolved recipe of that task must satisfy
RECIPE_DEFINITIONS = {"lm": "recipe", "autocomplete": "autocomplete_recipe"}


class ConfigError(ValueError):
    """A config or study file is malformed; the message says which key and what to do."""


def load_yaml(path: Path) -> Any:
    try:
        with open(path) as f:
            return yaml.safe_load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None


def _schema(name: str) -> dict:
    schema = load_yaml(SCHEMA_DIR / f"{name}.schema.yaml")
    defs = schema.get("$defs", {})
    # A recipe needs every field; an override may name any subset of them. Each task has its own
    # `<prefix>recipe_fields` (prefix "" for lm, "autocomplete_" for autocomplete).
    for name in [name for name in defs if name.endswith("recipe_fields")]:
        prefix = name.removesuffix("recipe_fields")
        defs[f"{prefix}recipe"]["properties"] = defs[name]
        defs[f"{prefix}recipe_override"]["properties"] = defs[name]
    return schema


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


def validate(instance: Any, schema_name: str, source: str) -> None:
    """Raise ConfigError naming the first offending key (in document order) of ``instance``."""
    schema = _schema(schema_name)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        details = "\n  ".join(_describe(e, schema) for e in errors[:5])
        raise ConfigError(f"{source} is invalid:\n  {details}\nFix the key(s) above; "
                          f"the allowed keys and types are in workflow/schemas/{schema_name}.schema.yaml")


def load_run_config(config: dict, source: str = "config/config.yaml") -> dict:
    validate(config, "config", source)
    return config


def load_study(study: str, root: Path = REPO_ROOT) -> dict:
    path = root / "config" / "studies" / f"{study}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise ConfigError(f"studies: unknown study {study!r} (no {path}); known studies: {', '.join(known)}")
    data = load_yaml(path)
    validate(data, "study", str(path))
    if data["study"] != study:
        raise ConfigError(f"{path}: `study: {data['study']}` does not match the file name ({study})")
    _check_references(data, str(path))
    return data


def _check_references(study: dict, source: str) -> None:
    models, recipes = study["models"], study["recipes"]
    problems = []
    for name, model in models.items():
        if model["recipe"] not in recipes:
            problems.append(f"models.{name}.recipe: unknown recipe {model['recipe']!r} (have: {', '.join(recipes)})")
        if "init_from" in model and model["init_from"] not in models:
            problems.append(f"models.{name}.init_from: unknown model {model['init_from']!r}")
    for name, artifact in study["artifacts"].items():
        for model in artifact["models"]:
            if model not in models:
                problems.append(f"artifacts.{name}.models: unknown model {model!r}")
    for recipe in study.get("dataset_recipes", {}):
        if recipe not in recipes:
            problems.append(f"dataset_recipes.{recipe}: unknown recipe")
    for budget_name, budget in study["budgets"].items():
        for recipe in budget.get("recipes", {}):
            if recipe not in recipes:
                problems.append(f"budgets.{budget_name}.recipes.{recipe}: unknown recipe")
        for name, smaller in budget.get("artifacts", {}).items():
            if name not in study["artifacts"]:
                problems.append(f"budgets.{budget_name}.artifacts.{name}: unknown artifact")
                continue
            for key in ("datasets", "models", "fractions"):
                extra = set(smaller.get(key, [])) - set(study["artifacts"][name][key])
                if extra:
                    problems.append(f"budgets.{budget_name}.artifacts.{name}.{key}: {sorted(extra)} not in "
                                    f"artifacts.{name}.{key} (a budget can only leave cells out)")
    for artifact, datasets in study["paper"].items():
        if artifact not in study["artifacts"]:
            problems.append(f"paper.{artifact}: unknown artifact")
            continue
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


def validate_cell_config(cfg: dict, source: str) -> dict:
    """Check a resolved training-cell config (the train CLI's input)."""
    validate(cfg, "cell", source)
    recipe_schema = {"$defs": _schema("study")["$defs"], "$ref": f"#/$defs/{RECIPE_DEFINITIONS[cfg['task']]}"}
    errors = list(jsonschema.Draft202012Validator(recipe_schema).iter_errors(cfg["recipe"]))
    if errors:
        details = "\n  ".join("recipe." + _describe(e, recipe_schema) for e in errors[:5])
        raise ConfigError(f"{source} is invalid:\n  {details}")
    return cfg
