"""A recurrent unit of your own beside the studies' baselines: the ``custom_cells:`` config section.

A config file given with ``--configfile`` (docs/custom_cells.md, examples/mgu.yaml) names a layer
class ``module:Class`` and, per study, a baseline model to stand beside and the artifacts to add it to:

    custom_cells:
      mgu:                                   # the new model's id in every table, figure and claim
        cell: examples.mgu:MGULayer
        cell_options: {}
        studies:
          pru: {like: lstm_m1000, artifacts: [table1]}
          lru: {like: gru_24m, artifacts: [accuracy]}

:func:`add_custom_cells` turns that into plain study-file content, so everything downstream (the
grid, sizing, training, notebooks, the scorecard, the report) treats the new model like any other:

- model ``<name>``: the ``like`` model with its cell and cell_options replaced (same layers, embedding,
  recipe, initialisation; sized to the same ``param_budget`` where the study sizes models that way,
  or given its own ``hidden_size`` / ``param_budget``);
- the model is appended to each named artifact's models, and to every budget's cut of that artifact
  that lists models;
- claims "the new cell against each baseline": for every (table, value) that the study's own claims
  read in those artifacts, one ``less_than`` (``greater_than`` with ``better: higher``) claim per
  other model of the artifact, over the same datasets and fractions (``per``) and budgets (``testable``).

``rnnrepro.custom_cell_checks.check_custom_cells`` checks what the schema cannot (studies, models, artifacts, the cell's
module, class and options) and names the config file and key. Then :func:`try_cell` builds each cell
small on the CPU, at the layer sizes its models stack, and runs it on a tiny window, once more from the
state it returned, then on a window as long as training and evaluation give it (the recipe's BPTT
length at the run's budget), then on one in evaluation mode (``layer.eval()``): a constructor that
raises, outputs of the wrong shape, a state that cannot be carried into the next window, an error that
only a longer window or evaluation mode brings out, NaN or infinite outputs, states or gradients stop the
dry run, not the first training job. Importing the cell's module runs its code there (docs/custom_cells.md).
Only that trial imports torch, and only when the config has cells of its own. When a cell of your own
fails in training all the same, :func:`where_it_failed` finds the line of its module the error came
from, so that the trainer's one-line error names the cell and its file.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import traceback

from .tuning import ARTIFACT as TUNING

#: environment variable carrying the custom cells from the Snakefile to the jobs it starts (notebooks
#: and the scorecard call ``grid.load_study``, which adds them): JSON {"source": ..., "cells": ...}
ENVIRONMENT_VARIABLE = "RNNREPRO_CUSTOM_CELLS"
#: claim ``per`` keys that describe the data (kept); others (``g``, ``recipe``) describe baseline models
DATA_KEYS = ("dataset", "fraction")
#: the widths a cell is tried at, given in turn to its model's distinct widths (hidden, embedding, last
#: layer's): small, so the trial takes milliseconds, and with many divisors, so a cell that needs its
#: width to be a multiple of its groups (as the PRU does, also in each of up to 4 pyramid levels split
#: into 4 groups) accepts them
TRIAL_WIDTHS = (64, 32, 48)
#: the window a cell is tried on: (steps, batch), different so that a transposed output shows
TRIAL_STEPS, TRIAL_BATCH = 3, 2
#: how far above the recipe's ``bptt`` a variable BPTT window reaches where the recipe has no cap: the
#: training draws N(bptt, 5) (rnnrepro.train.language_model), so four standard deviations
VARIABLE_BPTT_REACH = 4 * 5
#: the column a table gets where a cell of your own is a row: how it stands beside its baseline
FOOTING = "footing"
#: the layer contract the trial checks, quoted under its errors
CONTRACT = ("the layer contract (docs/custom_cells.md): forward(x of shape (T, B, input_size), state) returns "
            "outputs of shape (T, B, hidden_size) and a state shaped like init_state(B)'s")


def from_environment() -> tuple[dict, str]:
    """The custom cells (and the file they came from) the running workflow exported, if any."""
    exported = os.environ.get(ENVIRONMENT_VARIABLE)
    if not exported:
        return {}, ""
    data = json.loads(exported)
    return data["cells"], data["source"]


def export(custom_cells: dict, source: str) -> None:
    """Make the custom cells visible to the jobs the workflow starts (they inherit its environment)."""
    if custom_cells:
        os.environ[ENVIRONMENT_VARIABLE] = json.dumps({"cells": custom_cells, "source": source})
    else:
        os.environ.pop(ENVIRONMENT_VARIABLE, None)


def trial_layer_sizes(study: dict, model: dict) -> list[tuple[int, int]]:
    """(input size, hidden size) of each kind of layer ``model`` stacks, at the trial widths.

    The first layer reads the embedding; a language model's last layer gives the tied embedding's
    width (or ``last_hidden_size``). Widths the model keeps equal stay equal (a lattice cell needs its
    input as wide as its state), and widths it keeps apart stay apart.
    """
    hidden = model.get("hidden_size", "sized to its param_budget")
    embedding = hidden if model["embedding_size"] == "hidden_size" else model["embedding_size"]
    if study["task"] == "autocomplete":
        last = hidden
    else:
        last = model.get("last_hidden_size", embedding if model["tie_weights"] else hidden)
    trial = dict(zip(dict.fromkeys([hidden, embedding, last]), TRIAL_WIDTHS))
    widths = [trial[embedding]] + [trial[hidden]] * (model["layers"] - 1) + [trial[last]]
    return list(dict.fromkeys(zip(widths, widths[1:])))


def _shapes(state) -> object:
    """A state's shape: a tensor's, or a tuple of its parts' (anything else as its type's name)."""
    if hasattr(state, "shape"):
        return tuple(state.shape)
    if isinstance(state, (tuple, list)):
        return tuple(_shapes(part) for part in state)
    return type(state).__name__


def _raised(what: str, error: Exception) -> str:
    return f"{what} raised {type(error).__name__}: {error}"


def _not_finite(value) -> bool:
    """Whether a tensor, or any tensor of a (nested) tuple of them, holds a NaN or an infinity."""
    import torch

    if isinstance(value, torch.Tensor):
        return not bool(torch.isfinite(value).all())
    if isinstance(value, (tuple, list)):
        return any(_not_finite(part) for part in value)
    return False


def try_cell(cell: str, options: dict, input_size: int, hidden_size: int, long_steps: int | None = None) -> str | None:
    """Build one layer of ``cell`` on the CPU and run two windows through it, the second from the
    state the first returned (as training carries it), then (``long_steps``) one as long as training
    gives it, and the backward pass of that one: each output, state and gradient must be finite. What
    went wrong, or None."""
    import torch

    from .cells import cell_class

    arguments = ", ".join([f"input_size={input_size}", f"hidden_size={hidden_size}",
                           *(f"{key}={value!r}" for key, value in options.items())])
    call = f"{cell}({arguments})"
    try:
        layer_class = cell_class(cell)
    except ValueError as error:  # not importable as named, or not a RecurrentLayer
        return str(error)
    except Exception as error:  # the module's own code failed while it was imported
        return _raised(f"importing {cell.partition(':')[0]}", error)
    # One thread: the trial's tensors are tiny, and threads that wait on each other on a busy machine
    # made the backward pass of one window take seconds instead of a tenth of one.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _trial(layer_class, call, options, input_size, hidden_size, long_steps)
    finally:
        torch.set_num_threads(threads)


def _trial(layer_class, call: str, options: dict, input_size: int, hidden_size: int,
           long_steps: int | None) -> str | None:
    import torch

    from .cells import detach_state

    steps, batch = TRIAL_STEPS, TRIAL_BATCH
    with torch.random.fork_rng(devices=[]):  # the trial leaves the workflow's random state alone
        torch.manual_seed(0)
        try:
            layer = layer_class(input_size, hidden_size, **options)
        except Exception as error:
            return _raised(f"constructing {call}", error)
        try:
            state = layer.init_state(batch, torch.device("cpu"), torch.get_default_dtype())
        except Exception as error:
            return _raised(f"{call}.init_state({batch})", error)
        windows = [("first", steps), ("second", steps)] + [("long", long_steps)] * bool(long_steps)
        for window, length in windows:
            x = torch.randn(length, batch, input_size, requires_grad=window == "long")
            expected = (length, batch, hidden_size)
            try:
                returned = layer(x, state)
            except Exception as error:
                carried = {"first": "", "second": " from the state the first returned",
                           "long": " (as long as training's windows) from the state the second returned"}[window]
                return _raised(f"{call} forward on x of shape {tuple(x.shape)}{carried}", error)
            if not (isinstance(returned, tuple) and len(returned) == 2):
                return f"forward returned {type(returned).__name__}, expected a pair (outputs, state)"
            outputs, carried_state = returned
            if _shapes(outputs) != expected:
                return f"forward returned {_shapes(outputs)}, expected {expected}"
            if _shapes(carried_state) != _shapes(state):
                return (f"forward returned a state of shape {_shapes(carried_state)}, expected "
                        f"{_shapes(state)} (init_state's), so it cannot be carried into the next window")
            if _not_finite(outputs) or _not_finite(carried_state):
                what = "outputs" if _not_finite(outputs) else "a state"
                return (f"{call} forward on x of shape {tuple(x.shape)} (finite, from torch.randn) returned "
                        f"{what} with NaN or infinite values")
            state = detach_state(carried_state)
        if long_steps:
            try:
                outputs.float().sum().backward()
            except Exception as error:
                return _raised(f"the backward pass of {call} on x of shape {tuple(x.shape)}", error)
            gradients = [x.grad] + [p.grad for p in layer.parameters() if p.grad is not None]
            if any(_not_finite(g) for g in gradients):
                return f"the backward pass of {call} on x of shape {tuple(x.shape)} gave NaN or infinite gradients"
        return _evaluation_trial(layer, call, batch, input_size, hidden_size, steps)


def _evaluation_trial(layer, call: str, batch: int, input_size: int, hidden_size: int, steps: int) -> str | None:
    """One window in evaluation mode (``layer.eval()``, no gradients), as validation and test run the
    cell: a cell whose dropout or statistics differ there may fail only there."""
    import torch

    layer.eval()
    x = torch.randn(steps, batch, input_size)
    where = f"{call} in evaluation mode (layer.eval(), as validation and test run it) on x of shape {tuple(x.shape)}"
    try:
        with torch.no_grad():
            state = layer.init_state(batch, torch.device("cpu"), torch.get_default_dtype())
            outputs, carried_state = layer(x, state)
    except Exception as error:
        return _raised(where, error)
    if _shapes(outputs) != (steps, batch, hidden_size):
        return f"{where} returned {_shapes(outputs)}, expected {(steps, batch, hidden_size)}"
    if _not_finite(outputs) or _not_finite(carried_state):
        what = "outputs" if _not_finite(outputs) else "a state"
        return f"{where} (finite, from torch.randn) returned {what} with NaN or infinite values"
    return None


def module_file(cell: str) -> str | None:
    """The file an outside cell's module is read from (relative to the working directory where it lies
    below it: rnnrepro.cells.source_file), or None when it cannot be found."""
    from .cells import source_file

    try:
        return str(source_file(cell))
    except (ImportError, ValueError):
        return None


def where_it_failed(cell: str, error: BaseException) -> str | None:
    """``<file>, line <n>``: the last line of an outside cell's own module in ``error``'s traceback, or
    None when the error did not pass through that module."""
    path = module_file(cell)
    if path is None:
        return None
    inside = [frame for frame in traceback.extract_tb(error.__traceback__)
              if os.path.abspath(frame.filename) == os.path.abspath(path)]
    return f"{path}, line {inside[-1].lineno}" if inside else None


def uncountable(model: dict) -> str | None:
    """What of a model rnnrepro.sizing does not count (so no other model can be sized to its parameter
    count), or None."""
    if model.get("head", {}).get("type") == "mixture_of_softmaxes":
        return "a mixture-of-softmaxes head"
    if "last_hidden_size" in model:
        return "a last layer of its own width (last_hidden_size)"
    return None


def sizing(entry: dict, like: dict) -> str:
    """How a cell of your own is sized beside its ``like`` model: ``parameters`` (to its parameter count
    at every budget, or its parameter budget where it is sized to one), ``width`` (its width, its own
    parameter count), or the entry's own ``hidden_size`` / ``param_budget``."""
    for own in ("hidden_size", "param_budget"):
        if own in entry:
            return own
    if entry.get("match", "parameters") == "width" or ("param_budget" not in like and uncountable(like)):
        return "width"
    return "parameters"


def _model(study: dict, custom: dict, entry: dict) -> dict:
    """The ``like`` model with the custom cell in it, sized as :func:`sizing` says."""
    like = study["models"][entry["like"]]
    model = {**copy.deepcopy(like), "cell": custom["cell"], "cell_options": copy.deepcopy(custom.get("cell_options", {}))}
    how = sizing(entry, like)
    if how in ("hidden_size", "param_budget"):
        model.pop("hidden_size", None)
        model.pop("param_budget", None)
        model[how] = entry[how]
    elif how == "parameters" and "hidden_size" in like:
        del model["hidden_size"]
        model["param_budget_of"] = entry["like"]
    if entry.get("recipe"):
        model["recipe_changes"] = {**like.get("recipe_changes", {}), **copy.deepcopy(entry["recipe"])}
    return model


def _number(value) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else f"{value:g}" \
        if isinstance(value, float) else str(value)


def standing(study: dict, name: str, baseline: str | None = None) -> str:
    """In words, how the cell of your own ``name`` stands beside ``baseline`` (default: the model it is
    ``like``): its size against that model's, and the recipe it trains with. The same at every budget
    (the numbers of one budget: rnnrepro.analysis.footing)."""
    added = study["custom_cells"][name]
    like, how, source = added["like"], added["sizing"], added["source"]
    baseline = baseline or like
    if how == "parameters" and "param_budget" in study["models"][like]:
        size = f"sized to {like}'s parameter budget"
    elif how == "parameters":
        size = f"sized to {like}'s parameter count"
    elif how == "width":
        why = (f"{source} asks for match: width" if added["match"] == "width" else
               f"{like} has {uncountable(study['models'][like])}, which the sizing does not count")
        size = f"at {like}'s width with a parameter count of its own, not sized to its parameters ({why})"
    elif how == "hidden_size":
        size = (f"at a width of its own ({added['hidden_size']:,} at the paper's size), not sized to {like}'s "
                f"parameters, as {source} asks")
    else:
        size = f"sized to a parameter budget of its own ({added['param_budget']:,} at the paper's size), as {source} asks"
    if baseline != like and how == "parameters":
        size += f", not to {baseline}'s"
    recipe = study["models"][like]["recipe"]
    changes = added.get("recipe") or {}
    trained = (f"in {like}'s recipe ({recipe})" if not changes else
               f"in {like}'s recipe ({recipe}) but " + ", ".join(f"{key} {_number(value)}" for key, value in changes.items())
               + f", as {source} asks")
    return f"{name} is {size}, trained {trained}"


#: the values the studies' claims read, in words for the claims a cell of your own adds
VALUE_WORDS = {"test_ppl": "test perplexity", "val_ppl": "validation perplexity",
               "test_loss": "test loss (nats per character)", "median_epochs": "median number of epochs to its best",
               "test_cross_entropy_mean": "test cross entropy", "early_val_area_mean": "early validation loss",
               "mean_entropy": "mean next-token entropy", "lm_ratio": "language-model step time",
               "layer_ratio": "layer step time"}


def _claims(study: dict, name: str, artifact: str, baselines: list[str], better: str, source: str) -> list[dict]:
    """One claim per baseline and per (table, value) the study's claims read in this artifact's tables."""
    tables = study["artifacts"][artifact]["tables"]
    templates = {}
    for claim in study.get("claims", []):
        if claim["table"] in tables:
            templates.setdefault((claim["table"], claim["value"]), claim)
    claims, taken = [], {claim["id"] for claim in study.get("claims", [])}
    for (table, value), template in templates.items():
        per = {key: values for key, values in template.get("per", {}).items() if key in DATA_KEYS}
        for baseline in baselines:
            claim_id = f"{name}_vs_{baseline}"
            if claim_id in taken:  # the same baseline in another artifact or value: name the table too
                claim_id = f"{claim_id}_{table}_{value}"
            taken.add(claim_id)
            claim = {
                "id": claim_id,
                "statement": f"The added cell {name} reaches a {better} {VALUE_WORDS.get(value, value.replace('_', ' '))} "
                             f"than {baseline} ({standing(study, name, baseline)}).",
                "source": f"{source} custom_cells.{name} (the new cell against each baseline of {artifact})",
                "table": table,
                "value": value,
                "check": "less_than" if better == "lower" else "greater_than",
                "rows": [{"model": name}, {"model": baseline}],
                **({"per": per} if per else {}),
                **({"testable": list(template["testable"])} if "testable" in template else {}),
            }
            claims.append(claim)
    return claims


def add_custom_cells(study: dict, custom_cells: dict, source: str) -> dict:
    """A copy of ``study`` with every custom cell that names it: model, artifacts' grids and claims."""
    study = copy.deepcopy(study)
    for name, custom in custom_cells.items():
        entry = custom["studies"].get(study["study"])
        if entry is None:
            continue
        study["models"][name] = _model(study, custom, entry)
        # how it was added, for the words beside its rows and claims (standing, footing)
        study.setdefault("custom_cells", {})[name] = {
            "cell": custom["cell"], "like": entry["like"], "artifacts": list(entry["artifacts"]), "source": source,
            "sizing": sizing(entry, study["models"][entry["like"]]), "match": entry.get("match", "parameters"),
            **{key: copy.deepcopy(entry[key]) for key in ("hidden_size", "param_budget", "recipe") if key in entry}}
        for artifact in entry["artifacts"]:
            for table, columns in study["artifacts"][artifact]["columns"].items():
                if "model" in columns and FOOTING not in columns:
                    columns.append(FOOTING)
        for artifact in entry["artifacts"]:
            baselines = list(study["artifacts"][artifact]["models"])
            study["artifacts"][artifact]["models"].append(name)
            for budget in study["budgets"].values():
                cut = budget.get("artifacts", {}).get(artifact, {})
                # (a budget that is a scale of another shares its cut through the YAML merge: once)
                if "models" in cut and name not in cut["models"]:
                    cut["models"].append(name)
            study.setdefault("claims", []).extend(
                _claims(study, name, artifact, baselines, entry.get("better", "lower"), source))
        _tune_like_its_baseline(study, name, entry["like"])
        if "budgets" in entry:
            _leave_out(study, name, [*entry["artifacts"], TUNING], [b for b in study["budgets"] if b not in entry["budgets"]])
    return study


def _leave_out(study: dict, name: str, artifacts: list[str], budgets: list[str]) -> None:
    """Take the cell of your own ``name`` out of these budgets' cuts of these artifacts (``budgets`` of its
    entry: rnnrepro.records renders it only where it has records). Each such cut gets lists of its own: a
    budget that is a scale of another shares its cuts with it through the YAML merge."""
    for budget_name in budgets:
        budget = study["budgets"][budget_name]
        cuts = dict(budget.get("artifacts", {}))
        for artifact in artifacts:
            if artifact not in study["artifacts"]:
                continue
            cut = cuts.get(artifact, {})
            models = cut.get("models", study["artifacts"][artifact].get("models", []))
            if name in models:
                cuts[artifact] = {**cut, "models": [model for model in models if model != name]}
        budget["artifacts"] = cuts


def _tune_like_its_baseline(study: dict, name: str, baseline: str) -> None:
    """A cell of your own is tuned wherever its baseline is (rnnrepro.tuning: the same learning-rate grid,
    seed and epochs), so that it is compared at its own best rate against the baselines at theirs."""
    spec = study["artifacts"].get(TUNING)
    if spec is None:
        return
    for cut in [spec] + [budget.get("artifacts", {}).get(TUNING, {}) for budget in study["budgets"].values()]:
        if baseline in cut.get("models", []) and name not in cut["models"]:
            cut["models"].append(name)
