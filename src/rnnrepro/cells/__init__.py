"""The recurrent-unit library: every unit the four studies compare, picked by id from a config.

``build_layer("pru", 400, 1400, groups=4, levels=2)`` returns one layer; the language model stacks
them. Each cell lives in its own module (equations and parameter-count formula in its docstring) and
is imported only when asked for.

``validate_cell("pru", {"groups": 4, "levles": 2})`` checks a cell id and its options against the
cell's constructor without importing torch: the Snakefile calls it when it loads the study files, so
a misspelled cell or option stops the run before any data is fetched. Importing this package imports
no torch either (``RecurrentLayer``, ``State`` and ``detach_state`` load :mod:`.base` on first use).

A cell id is a built-in id (``CELLS``) or ``module:Class``, a layer class from outside the package
(docs/custom_cells.md): ``build_layer("examples.mgu:MGULayer", 64, 128)``. Its module is looked up on
``sys.path`` and in the working directory (the project root, where Snakemake runs), and is validated
from its source like a built-in cell's, without being imported.

A cell's code is part of each of its training cells' identity (``code_identity``, in every resolved
config): a built-in cell by its numerics version (``NUMERICS_VERSION``), a cell of your own by the
sha256 of its module file, so a change of what a cell computes makes its records and runs stale.
"""

from __future__ import annotations

import ast
import hashlib
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from importlib.util import find_spec, resolve_name
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import RecurrentLayer

# cell id -> "module:Class" (modules relative to this package)
CELLS: dict[str, str] = {
    "lstm": "lstm:LSTMLayer",
    "pru": "pru:PRULayer",
    "lstm_single_bias": "lstm_single_bias:SingleBiasLSTMLayer",
    "gru": "gru:GRULayer",
    "gru_single_bias": "gru:SingleBiasGRULayer",
    "nested_lstm": "nested_lstm:NestedLSTMLayer",
    "rhn": "rhn:RHNLayer",
    "grid_lstm": "grid_lstm:GridLSTMLayer",
    "ps_lru": "lru:PSLRULayer",
    "rg_lru": "lru:RGLRULayer",
    "lru": "lru:LRULayer",
    "lrn": "lrn:LRNLayer",
    "atr": "atr:ATRLayer",
    "sru": "sru:SRULayer",
}


# cell id -> the version of its numbers: what its layer computes from its inputs, and how it initialises
# its weights. Bump a cell's version (by one) in the commit that changes its outputs (its module, or one it
# runs through: base, recurrence); its records and runs are then stale and train again. Records made
# before versions were written hold none, which counts as version 1 (rnnrepro.cell_identity), so a cell
# whose numbers never changed keeps every record current across commits. tests/test_cell_numerics.py keeps
# each (cell, version)'s outputs on a fixed input and fails when they change without a bump.
NUMERICS_VERSION: dict[str, int] = {
    "lstm": 1, "pru": 1, "lstm_single_bias": 1, "gru": 1, "gru_single_bias": 1, "nested_lstm": 1, "rhn": 1,
    "grid_lstm": 1, "ps_lru": 1, "rg_lru": 1, "lru": 1, "lrn": 1, "atr": 1, "sru": 1,
}


# cell id -> the devices on which its whole recurrence runs in one fused library kernel (torch's LSTM:
# oneDNN on a CPU, cuDNN on a GPU; nn.GRU: cuDNN only); every other cell runs a loop of operators per step
FUSED_RECURRENCE: dict[str, set[str]] = {
    "lstm": {"cpu", "cuda"}, "lstm_single_bias": {"cpu", "cuda"}, "grid_lstm": {"cpu", "cuda"}, "gru": {"cuda"},
}
FUSED, LOOP = "fused library kernel", "loop of operators"


def implementation(cell: str, device: str) -> str:
    """How a cell's recurrence runs on a device type (``cpu``, ``cuda``): FUSED or LOOP. Speeds of
    the two kinds compare the kernels as much as the cells."""
    return FUSED if device in FUSED_RECURRENCE.get(cell, set()) else LOOP


def is_outside_cell(cell: str) -> bool:
    """Whether a cell id names a class from outside the package (``module:Class``)."""
    return ":" in cell


def _module_and_class(cell: str) -> tuple[str, str]:
    """The absolute module name and class name of a cell id (built-in or ``module:Class``)."""
    if is_outside_cell(cell):
        module_name, _, class_name = cell.partition(":")
        if not module_name or not class_name or ":" in class_name:
            raise ValueError(f"cell {cell!r}: an outside cell is written module:Class (e.g. examples.mgu:MGULayer)")
        return module_name, class_name
    if cell not in CELLS:
        raise ValueError(f"unknown recurrent cell {cell!r}; known cells: {', '.join(sorted(CELLS))}, "
                         f"or module:Class for a cell of your own (docs/custom_cells.md)")
    module_name, class_name = CELLS[cell].split(":")
    return f"{__name__}.{module_name}", class_name


@contextmanager
def _working_directory_importable():
    """Outside modules are found in the working directory too, as ``python -m`` finds them in a job."""
    added = os.getcwd() not in sys.path and "" not in sys.path
    if added:
        sys.path.append(os.getcwd())
    try:
        yield
    finally:
        if added:
            sys.path.remove(os.getcwd())


def source_file(cell: str) -> Path:
    """The module file of a cell of your own (``module:Class``), relative to the working directory when
    it lies under it (examples/mgu.py), found as the cell's options are."""
    module_name, _ = _module_and_class(cell)
    with _working_directory_importable():
        try:
            spec = find_spec(module_name)
        except ModuleNotFoundError:  # a parent package is missing
            spec = None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise ValueError(f"cell {cell!r}: module {module_name} not found (looked in the working directory and on "
                         f"PYTHONPATH); put it in the project directory or on PYTHONPATH")
    path = Path(spec.origin).resolve()
    return path.relative_to(Path.cwd().resolve()) if path.is_relative_to(Path.cwd().resolve()) else path


def code_identity(cell: str) -> dict:
    """What of a cell's code makes its training cells what they are, for their resolved config: a built-in
    cell's numerics version (``cell_numerics``); a cell of your own's module file (``cell_source``, where it
    is, which is not compared) and the sha256 of its content (``cell_source_sha256``), so that editing the
    module makes its runs and records stale."""
    if not is_outside_cell(cell):
        _module_and_class(cell)  # an unknown id is named here
        return {"cell_numerics": NUMERICS_VERSION[cell]}
    path = source_file(cell)
    return {"cell_source": str(path), "cell_source_sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def cell_class(cell: str) -> type[RecurrentLayer]:
    module_name, class_name = _module_and_class(cell)
    with _working_directory_importable():
        try:
            module = import_module(module_name)
        except ModuleNotFoundError as error:
            raise ValueError(f"cell {cell!r}: module {module_name} cannot be imported ({error}); put it in the "
                             f"project directory or on PYTHONPATH") from None
    if not hasattr(module, class_name):
        raise ValueError(f"cell {cell!r}: module {module_name} defines no class {class_name}")
    layer_class = getattr(module, class_name)
    from .base import RecurrentLayer

    if not (isinstance(layer_class, type) and issubclass(layer_class, RecurrentLayer)):
        raise ValueError(f"cell {cell!r}: {class_name} is not a subclass of rnnrepro.cells.RecurrentLayer "
                         f"(the layer contract: docs/custom_cells.md)")
    return layer_class


def build_layer(cell: str, input_size: int, hidden_size: int, **options) -> RecurrentLayer:
    """One recurrent layer of the given cell id; ``options`` are the cell's own hyperparameters."""
    return cell_class(cell)(input_size, hidden_size, **options)


# Constructor arguments every layer takes from the model's sizes, never from cell_options.
SIZE_ARGUMENTS = ("self", "input_size", "hidden_size")
# Annotations whose values validate_cell checks (a bool is not an int here, though Python says it is).
OPTION_TYPES = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
}


@dataclass(frozen=True)
class CellOption:
    name: str
    annotation: str | None  # as written in the constructor, e.g. "int"
    required: bool


def cell_options(cell: str) -> tuple[dict[str, CellOption], bool]:
    """The options of a cell's constructor beyond the sizes, and whether it also takes ``**kwargs``."""
    module_name, class_name = _module_and_class(cell)
    return constructor_options(module_name, class_name)


@cache  # each module's source is parsed once per process
def constructor_options(module: str, class_name: str) -> tuple[dict[str, CellOption], bool]:
    """``cell_options`` of any layer class ``module.class_name``, read from its module's source.

    The ``__init__`` is the class's own or, if it has none, its first base's (followed through the
    module's classes and its ``from ... import`` lines).
    """
    init = _find_init(module, class_name)
    if init is None:
        raise ValueError(f"{module}.{class_name}: no __init__ found in the class or its bases")
    arguments = init.args
    positional = arguments.posonlyargs + arguments.args
    defaults = [None] * (len(positional) - len(arguments.defaults)) + list(arguments.defaults)
    pairs = list(zip(positional, defaults)) + list(zip(arguments.kwonlyargs, arguments.kw_defaults))
    options = {
        arg.arg: CellOption(arg.arg, ast.unparse(arg.annotation) if arg.annotation else None, default is None)
        for arg, default in pairs if arg.arg not in SIZE_ARGUMENTS
    }
    return options, arguments.kwarg is not None


def _find_init(module: str, class_name: str) -> ast.FunctionDef | None:
    with _working_directory_importable():
        try:
            spec = find_spec(module)
        except ModuleNotFoundError:  # a parent package is missing
            spec = None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise ValueError(f"module {module} not found (looked in the working directory and on PYTHONPATH)")
    tree = ast.parse(Path(spec.origin).read_text())
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    if class_name not in classes:
        raise ValueError(f"{module} defines no class {class_name}")
    package = module.rpartition(".")[0]
    imported = {
        alias.asname or alias.name: (resolve_name("." * node.level + (node.module or ""), package), alias.name)
        for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names
    }
    node = classes[class_name]
    init = next((item for item in node.body if isinstance(item, ast.FunctionDef) and item.name == "__init__"), None)
    if init is not None:
        return init
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in classes:
            return _find_init(module, base.id)
        if isinstance(base, ast.Name) and base.id in imported:
            return _find_init(*imported[base.id])
    return None


def validate_cell(cell: str, options: dict) -> None:
    """Raise ValueError naming what is wrong with a cell id or its options (unknown, missing, wrong type)."""
    accepted, takes_any = cell_options(cell)
    problems = []
    unknown = sorted(set(options) - set(accepted))
    if unknown and not takes_any:
        problems.append(f"unknown option{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))}")
    missing = [name for name, option in accepted.items() if option.required and name not in options]
    if missing:
        problems.append(f"missing option{'s' * (len(missing) > 1)} {', '.join(map(repr, missing))}")
    for name, value in options.items():
        option = accepted.get(name)
        if option and option.annotation in OPTION_TYPES and not OPTION_TYPES[option.annotation](value):
            problems.append(f"option {name!r} must be {option.annotation}, not {value!r}")
    if problems:
        described = ", ".join(f"{o.name}: {o.annotation or 'any'}{'' if o.required else ' (optional)'}"
                              for o in accepted.values()) or "none"
        raise ValueError(f"cell {cell!r}: {'; '.join(problems)} (its options: {described})")


def __getattr__(name: str):
    # The torch-using base module loads on first use, so validate_cell runs without torch.
    if name in ("RecurrentLayer", "State", "detach_state"):
        return getattr(import_module(".base", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CELLS", "NUMERICS_VERSION", "CellOption", "RecurrentLayer", "State", "build_layer", "cell_class",
           "cell_options", "code_identity", "constructor_options", "detach_state", "is_outside_cell", "source_file",
           "validate_cell"]
