"""The interface every recurrent unit implements, and the state helpers shared by all of them.

A *layer* maps a whole sequence ``x`` of shape (T, B, N) and a carried state to an output of shape
(T, B, M) and the new state. Working on whole sequences (not single steps) lets a cell hoist every
input-side projection out of the time loop into one matrix product.

State is a tensor or a tuple of tensors, each of shape (B, ...). It is carried across BPTT windows by
the training loop, which detaches it with :func:`detach_state`.

Weight drop (DropConnect on hidden-to-hidden weights, AWD-LSTM) is shared by all cells: a cell only
names its hidden-to-hidden parameters in ``recurrent_weight_names``, and
:class:`rnnrepro.models.regularisation.WeightDrop` swaps dropped copies in for one forward call.
"""

from __future__ import annotations

from typing import Union

import torch
from torch import nn

State = Union[torch.Tensor, tuple[torch.Tensor, ...]]


class RecurrentLayer(nn.Module):
    """Base class of one recurrent layer (input_size -> hidden_size)."""

    #: names of the parameters that multiply the previous hidden state (weight-drop targets)
    recurrent_weight_names: tuple[str, ...] = ()

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size

    def init_state(self, batch_size: int, device=None, dtype=None) -> State:
        raise NotImplementedError

    def forward(self, x: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        raise NotImplementedError

    def recurrent_parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())


def detach_state(state: State) -> State:
    """Cut the graph at a BPTT window boundary, keeping the values."""
    if isinstance(state, torch.Tensor):
        return state.detach()
    return tuple(detach_state(s) for s in state)
