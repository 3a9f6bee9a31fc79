"""Model size for a parameter budget: the hidden size whose language model comes closest to it.

The LRU study compares recurrent units at equal parameter counts (Ahuja & Morency 2017: 10 M and
24 M). :func:`hidden_size_for_budget` takes a cell, its depth and options, the vocabulary size and the
budget, and returns the hidden size M whose whole language model -- embedding, recurrent layers and
decoder, laid out as :class:`rnnrepro.models.language_model.LanguageModel` builds it -- has the
parameter count closest to the budget, together with that count.

Closed-form counts in plain integers, no torch: the Snakefile sizes every cell when it parses the
grid. Each formula restates the cell module's own ``parameter_count``; the tests compare every one
with the parameters of the instantiated layer.
"""

from __future__ import annotations

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


def layer_params(cell: str, input_size: int, hidden_size: int, cell_options: dict) -> int:
    if cell not in RECURRENT_PARAMS:
        raise ConfigError(f"cell {cell!r} has no closed-form parameter count, so it cannot be sized to a "
                          f"parameter budget; give the model a hidden_size, or add the cell's formula to "
                          f"rnnrepro.sizing.RECURRENT_PARAMS (known: {', '.join(RECURRENT_PARAMS)})")
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
