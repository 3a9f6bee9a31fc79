"""The dropout family of AWD-LSTM (Merity et al., 2018), shared by every recurrent cell.

- ``sequence_dropout``: ordinary elementwise dropout ("standard" regime: a new mask per element and
  time step) or locked/variational dropout (one mask per sequence, shared across time steps).
- ``embedding_dropout``: drops whole word types (rows of the embedding matrix).
- ``run_with_weight_drop``: DropConnect on a layer's hidden-to-hidden weights, one mask per forward
  call (= per minibatch, the same for every time step). Cells only name those weights in
  ``recurrent_weight_names``; the dropped copies are swapped in with ``torch.func.functional_call``,
  so fused kernels (nn.LSTM) keep working and gradients reach the original parameters.
  ``targets`` picks the weights: "recurrent" (AWD-LSTM: the hidden-to-hidden matrices only) or
  "all_matrices" (every weight matrix of the layer, input projections included). The second is what
  the LRN authors' LM code meant to drop -- its WeightDrop names each cell's ``_W`` and ``_U``, which
  are all of a cell's matrices (LSTM/GRU: the joint [x; h] matrices; ATR: W and U; LRN, SRU: the
  input projection) -- but as released it finds none of them and drops nothing (lm/code/model.py of
  github.com/bzhangGo/lrn wraps each layer module, while ``_W`` and ``_U`` belong to the layer's child
  cell); the ``lrn`` study's "as released" rows therefore use weight_drop 0.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.func import functional_call

from ..cells import RecurrentLayer, State

WEIGHT_DROP_TARGETS = ("recurrent", "all_matrices")


def sequence_dropout(x: torch.Tensor, p: float, kind: str, training: bool) -> torch.Tensor:
    """Dropout on a (T, B, D) sequence; ``kind`` is "elementwise" or "locked"."""
    if not training or p == 0:
        return x
    if kind == "elementwise":
        return F.dropout(x, p, training=True)
    if kind == "locked":
        mask = x.new_empty(1, x.size(1), x.size(2)).bernoulli_(1 - p) / (1 - p)
        return x * mask
    raise ValueError(f"unknown dropout kind {kind!r}; use 'elementwise' or 'locked'")


def embedding_dropout(embedding: torch.nn.Embedding, tokens: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    if not training or p == 0:
        return embedding(tokens)
    weight = embedding.weight
    mask = weight.new_empty(weight.size(0), 1).bernoulli_(1 - p) / (1 - p)
    return F.embedding(tokens, weight * mask, embedding.padding_idx)


def weight_drop_names(layer: RecurrentLayer, targets: str) -> tuple[str, ...]:
    """The parameter names weight drop replaces in ``layer`` for ``targets`` (WEIGHT_DROP_TARGETS)."""
    if targets == "recurrent":
        return layer.recurrent_weight_names
    if targets == "all_matrices":
        return tuple(name for name, param in layer.named_parameters() if param.dim() >= 2)
    raise ValueError(f"weight drop targets {targets!r}: expected one of {WEIGHT_DROP_TARGETS}")


def run_with_weight_drop(layer: RecurrentLayer, x: torch.Tensor, state: State, p: float,
                         training: bool, targets: str = "recurrent") -> tuple[torch.Tensor, State]:
    names = weight_drop_names(layer, targets)
    if not training or p == 0 or not names:
        return layer(x, state)
    params = dict(layer.named_parameters())
    dropped = {name: F.dropout(params[name], p, training=True) for name in names}
    return functional_call(layer, dropped, (x, state))
