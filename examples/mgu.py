"""Minimal gated unit (Zhou, Wu, Zhang & Zhou 2016, "Minimal Gated Unit for Recurrent Neural
Networks", International Journal of Automation and Computing 13(3); arXiv 1603.09420), a recurrent
unit this library does not ship, written as an *outside* cell: it lives outside the package and is
named in a config file as ``examples.mgu:MGULayer`` (docs/custom_cells.md).

One gate, the forget gate f, does the work of the GRU's reset and update gates (the paper's eq. 6):

    f_t = σ(W_f x_t + U_f h_{t-1} + b_f)
    h̃_t = tanh(W_h x_t + U_h (f_t ⊙ h_{t-1}) + b_h)
    h_t = (1 - f_t) ⊙ h_{t-1} + f_t ⊙ h̃_t

    parameters: 2(NM + M^2 + M) for input size N and hidden size M, stored as weight_ih (rows f, h;
    2M x N), weight_hf and weight_hh (M x M each) and bias (2M).

Departures from the paper: the paper writes one matrix on the concatenation [h_{t-1}, x_t]; it is
split here into its input and recurrent halves (the same function and count) so the input products
for the whole sequence are one matrix product outside the time loop, and weight drop can name the
recurrent halves alone. The paper does not give an initialisation: every parameter starts at
U(±1/√M), torch's own recurrent-layer rule.

The layer contract this follows (rnnrepro.cells.RecurrentLayer): constructor (input_size,
hidden_size, **options); ``init_state`` gives the state a new sequence starts from (h_0 = 0, shape
(B, M)); ``forward(x, state)`` maps a whole window x (T, B, N) to (outputs (T, B, M), last state),
and the training loop carries the state into the next window; ``recurrent_weight_names`` lists the
hidden-to-hidden weights weight drop replaces (the loop must read them as attributes on every call).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from rnnrepro.cells import RecurrentLayer
from rnnrepro.cells.gpu import graphed


def _mgu_loop(projected: torch.Tensor, h0: torch.Tensor, weight_hf: torch.Tensor,
              weight_hh: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """h_1..h_T from the hoisted input projections (T, B, 2M: rows f, h̃) and h_0; autograd records it.
    Tensors only, no host synchronisation: on a GPU ``graphed`` replays it from a CUDA graph."""
    hidden_size = h0.size(1)
    outputs, h = [], h0
    for t in range(projected.size(0)):
        forget = torch.sigmoid(torch.addmm(projected[t, :, :hidden_size], h, weight_hf.t()))
        candidate = torch.tanh(torch.addmm(projected[t, :, hidden_size:], forget * h, weight_hh.t()))
        h = torch.lerp(h, candidate, forget)  # (1 - f) ⊙ h + f ⊙ h̃
        outputs.append(h)
    return (torch.stack(outputs),)


class MGULayer(RecurrentLayer):
    """One MGU layer (input_size -> hidden_size); state h (B, M)."""

    recurrent_weight_names = ("weight_hf", "weight_hh")

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__(input_size, hidden_size)
        self.weight_ih = nn.Parameter(torch.empty(2 * hidden_size, input_size))
        self.weight_hf = nn.Parameter(torch.empty(hidden_size, hidden_size))
        self.weight_hh = nn.Parameter(torch.empty(hidden_size, hidden_size))
        self.bias = nn.Parameter(torch.empty(2 * hidden_size))
        bound = 1 / math.sqrt(hidden_size)
        for parameter in self.parameters():
            nn.init.uniform_(parameter, -bound, bound)

    @staticmethod
    def parameter_count(input_size: int, hidden_size: int) -> int:
        return 2 * (input_size * hidden_size + hidden_size * hidden_size + hidden_size)

    def init_state(self, batch_size: int, device=None, dtype=None) -> torch.Tensor:
        return self.weight_hh.new_zeros(batch_size, self.hidden_size, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        projected = torch.nn.functional.linear(x, self.weight_ih, self.bias)  # every step's W x_t + b at once
        (hidden,) = graphed(_mgu_loop, (projected, state, self.weight_hf, self.weight_hh))
        return hidden, hidden[-1]
