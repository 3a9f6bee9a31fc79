"""Model size for a parameter budget: the hidden size whose language model comes closest to it.

The LRU study compares recurrent units at equal parameter counts (Ahuja & Morency 2017: 10 M and
24 M). :func:`hidden_size_for_budget` takes a cell, its depth and options, the vocabulary size and the
budget, and returns the hidden size M whose whole language model -- embedding, recurrent layers and
decoder, laid out as :class:`rnnrepro.models.language_model.LanguageModel` builds it -- has the
parameter count closest to the budget, together with that count.

A layer's count is a closed-form formula where the cell has one (``RECURRENT_PARAMS``: plain
integers, no torch, so the Snakefile sizes the built-in cells without importing torch when it parses
the grid), else :func:`counted_layer_params`: the layer built on torch's ``meta`` device, which has
shapes but no storage, so a layer of any size costs microseconds and no memory. That is how a cell of
your own (``module:Class``, docs/custom_cells.md) is sized. The tests check every formula against that
count.
"""

from __future__ import annotations

import json
from functools import lru_cache

from .configuration import ConfigError

# cell id -> parameters of one layer (input size n, hidden size m, the cell's options)
RECURRENT_PARAMS = {
    "lstm": lambda n, m: 4 * m * (n + m) + 8 * m,                      # nn.LSTM, two biases
    "gru": lambda n, m: 3 * m * (n + m) + 6 * m,                       # nn.GRU, two biases
    "gru_single_bias": lambda n, m, init="uniform": 3 * (n * m + m * m + m),   # (init: starting values only)
    # Lattice units (n = m): 2, 3, 4 gates plus two projected states, each on [x; h] with one bias
    "ps_lru": lambda n, m: 4 * (2 * m * m + m),
    "rg_lru": lambda n, m: 5 * (2 * m * m + m),
    "lru": lambda n, m: 6 * (2 * m * m + m),
    # (transform_bias only sets initial values)
    "rhn": lambda n, m, recurrence_depth, **initial: 2 * n * m + recurrence_depth * (2 * m * m + 2 * m),
    # one layer holds the whole grid of `depth` rows (n = m), two LSTM transforms per row
    "grid_lstm": lambda n, m, depth: depth * (16 * m * m + 16 * m),
}


def counted_layer_params(cell: str, input_size: int, hidden_size: int, cell_options: dict) -> int:
    """Parameters of one layer, counted on the layer built on the meta device (no weights allocated)."""
    return _counted(cell, input_size, hidden_size, json.dumps(cell_options, sort_keys=True))


@lru_cache(maxsize=4096)  # sizing to a budget asks for the same few shapes many times
def _counted(cell: str, input_size: int, hidden_size: int, options: str) -> int:
    import torch  # imported only here: sizing a cell with a formula needs no torch

    from .cells import build_layer

    try:
        with torch.device("meta"):
            layer = build_layer(cell, input_size, hidden_size, **json.loads(options))
    except Exception as error:  # the cell's own constructor failed: say which cell and shape
        raise ConfigError(f"cell {cell!r} could not be built to count its parameters "
                          f"(input {input_size}, hidden {hidden_size}, options {options}): "
                          f"{type(error).__name__}: {error}") from error
    return sum(parameter.numel() for parameter in layer.parameters())


def layer_params(cell: str, input_size: int, hidden_size: int, cell_options: dict) -> int:
    if cell not in RECURRENT_PARAMS:
        return counted_layer_params(cell, input_size, hidden_size, cell_options)
    return RECURRENT_PARAMS[cell](input_size, hidden_size, **cell_options)


def language_model_params(cell: str, vocab_size: int, embedding_size: int, hidden_size: int, layers: int,
                          tie_weights: bool, cell_options: dict) -> int:
    """Embedding V x E, the stacked layers, the decoder (its weight shared with the embedding when tied)."""
    last = embedding_size if tie_weights else hidden_size
    sizes = [embedding_size] + [hidden_size] * (layers - 1) + [last]
    recurrent = sum(layer_params(cell, sizes[i], sizes[i + 1], cell_options) for i in range(layers))
    decoder = vocab_size if tie_weights else last * vocab_size + vocab_size
    return vocab_size * embedding_size + recurrent + decoder


def hidden_size_for_budget(budget: int, cell: str, vocab_size: int, layers: int, tie_weights: bool,
                           cell_options: dict, embedding_size: int | None = None) -> tuple[int, int]:
    """(hidden size, parameter count) of the model closest to ``budget``; the smaller size on a tie.

    ``embedding_size`` None: the embedding has the hidden size (the lattice cells need it).
    """
    def count(hidden: int) -> int:
        embedding = hidden if embedding_size is None else embedding_size
        return language_model_params(cell, vocab_size, embedding, hidden, layers, tie_weights, cell_options)

    if count(1) >= budget:
        return 1, count(1)
    low, high = 1, 2  # the count grows with the hidden size: find count(low) < budget <= count(high)
    while count(high) < budget:
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if count(middle) < budget else (low, middle)
    below, above = count(low), count(high)
    return (low, below) if budget - below <= above - budget else (high, above)
