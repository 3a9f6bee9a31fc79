"""Long short-term memory layer (Hochreiter & Schmidhuber, 1997), as torch.nn.LSTM parameterises it.

    i_t = σ(W_ii x_t + b_ii + W_hi h_{t-1} + b_hi)
    f_t = σ(W_if x_t + b_if + W_hf h_{t-1} + b_hf)
    g_t = tanh(W_ig x_t + b_ig + W_hg h_{t-1} + b_hg)
    o_t = σ(W_io x_t + b_io + W_ho h_{t-1} + b_ho)
    c_t = f_t ⊙ c_{t-1} + i_t ⊙ g_t,        h_t = o_t ⊙ tanh(c_t)

Parameters (gate order i, f, g, o stacked along the rows): weight_ih (4M x N), weight_hh (4M x M),
bias_ih and bias_hh (4M each): 4M(N + M) + 8M in all (``counting.lstm_params``). Init U(±1/√M), the
nn.LSTM default, which is what both the PRU and the AWD-LSTM code use for their LSTM baselines.

The layer wraps a one-layer nn.LSTM so the whole sequence runs in the fused kernel (cuDNN on a GPU).
Weight drop replaces ``rnn.weight_hh_l0`` through torch.func.functional_call; nn.LSTM notices the
swapped tensor at call time and uses it.
"""

from __future__ import annotations

import torch
from torch import nn

from .base import RecurrentLayer


class LSTMLayer(RecurrentLayer):
    """One LSTM layer, input (T, B, N) -> output (T, B, M); state (h, c), each (B, M)."""

    recurrent_weight_names = ("rnn.weight_hh_l0",)

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__(input_size, hidden_size)
        self.rnn = nn.LSTM(input_size, hidden_size, num_layers=1)

    def init_state(self, batch_size: int, device=None, dtype=None) -> tuple[torch.Tensor, torch.Tensor]:
        weight = self.rnn.weight_hh_l0
        zeros = torch.zeros(batch_size, self.hidden_size, device=device or weight.device,
                            dtype=dtype or weight.dtype)
        return zeros, zeros.clone()

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
        h, c = state
        y, (h, c) = self.rnn(x, (h.unsqueeze(0), c.unsqueeze(0)))  # nn.LSTM wants (layers, B, M)
        return y, (h.squeeze(0), c.squeeze(0))
