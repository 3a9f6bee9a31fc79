"""The recurrent-unit library: every unit the four studies compare, picked by id from a config.

``build_layer("pru", 400, 1400, groups=4, levels=2)`` returns one layer; the language model stacks
them. Each cell lives in its own module (equations and parameter-count formula in its docstring) and
is imported only when asked for.
"""

from __future__ import annotations

from importlib import import_module

from .base import RecurrentLayer, State, detach_state

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


def cell_class(cell: str) -> type[RecurrentLayer]:
    try:
        module_name, class_name = CELLS[cell].split(":")
    except KeyError:
        raise ValueError(f"unknown recurrent cell {cell!r}; known cells: {', '.join(sorted(CELLS))}") from None
    return getattr(import_module(f".{module_name}", __name__), class_name)


def build_layer(cell: str, input_size: int, hidden_size: int, **options) -> RecurrentLayer:
    """One recurrent layer of the given cell id; ``options`` are the cell's own hyperparameters."""
    return cell_class(cell)(input_size, hidden_size, **options)


__all__ = ["CELLS", "RecurrentLayer", "State", "build_layer", "cell_class", "detach_state"]
