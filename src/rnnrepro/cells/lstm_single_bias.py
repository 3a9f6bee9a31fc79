"""LSTM with one bias per gate, as TensorFlow's BasicLSTMCell and the LRN authors' LSTMCell define it.

    i_t = σ(W_i x_t + U_i h_{t-1} + b_i)
    f_t = σ(W_f x_t + U_f h_{t-1} + b_f)
    g_t = tanh(W_g x_t + U_g h_{t-1} + b_g)
    o_t = σ(W_o x_t + U_o h_{t-1} + b_o)
    c_t = f_t ⊙ c_{t-1} + i_t ⊙ g_t,        h_t = o_t ⊙ tanh(c_t)

Parameters: 4(NM + M^2 + M) -- weight_ih (4M x N), weight_hh (4M x M), bias (4M), gate rows in
torch's order i, f, g, o (TensorFlow stores i, g, f, o; the order is only a layout).

Why it exists beside ``lstm`` (nn.LSTM, two biases b_ih + b_hh per gate, 4M(N + M) + 8M): the
published counts of two studies are single-bias counts. The Nested-LSTM comparison's LSTM recurrent
part, 2 layers of 600 on a 600-d embedding, is 2 x 4(600·600 + 600·600 + 600) = 5,764,800 (nn.LSTM:
5,769,600); the LRN paper's LSTM LM (22M) also adds up only with one bias per gate.

Initialisation: U(±1/√M) with the forget-gate bias at 1. TensorFlow adds a constant forget_bias = 1 to
a zero-initialised bias; a trainable bias that starts at 1 is the same model and the same training.

``init``: "uniform" (the above) or "xavier", the LRN authors' LM code (``lm/code/rnn.py``): their
joint (N+M) x 4M matrix Xavier-uniform -- so weight_ih and weight_hh share the bound √(6/(N+5M)) --
and the bias 0, with no forget-bias offset. (Their gate order is i, f, o, g; only a layout.)

Speed: the recurrence runs in torch's fused LSTM kernel (oneDNN on a CPU, cuDNN on a GPU) with
b_hh fixed at zero -- a buffer, not a parameter, so the count above is exact. Weight drop swaps
``weight_hh``, which forward reads at call time.
"""

from __future__ import annotations

import torch
from torch import nn

from .base import RecurrentLayer
from .recurrence import check_init, uniform_init_, xavier_uniform_, zero_state

FORGET_BIAS = 1.0


class SingleBiasLSTMLayer(RecurrentLayer):
    """One LSTM layer with one bias per gate, input (T, B, N) -> output (T, B, M); state (h, c)."""

    recurrent_weight_names = ("weight_hh",)

    def __init__(self, input_size: int, hidden_size: int, init: str = "uniform"):
        super().__init__(input_size, hidden_size)
        check_init("lstm_single_bias", init)
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(4 * hidden_size, hidden_size))
        self.bias = nn.Parameter(torch.empty(4 * hidden_size))
        self.register_buffer("zero_bias", torch.zeros(4 * hidden_size), persistent=False)
        uniform_init_(self, hidden_size)
        if init == "xavier":
            for weight in (self.weight_ih, self.weight_hh):
                xavier_uniform_(weight, input_size + 5 * hidden_size)
            nn.init.zeros_(self.bias)
        else:
            with torch.no_grad():
                self.bias[hidden_size: 2 * hidden_size] = FORGET_BIAS

    @staticmethod
    def parameter_count(input_size: int, hidden_size: int) -> int:
        return 4 * (input_size * hidden_size + hidden_size * hidden_size + hidden_size)

    def init_state(self, batch_size: int, device=None, dtype=None) -> tuple[torch.Tensor, torch.Tensor]:
        h = zero_state(self.weight_hh, batch_size, self.hidden_size, device=device, dtype=dtype)
        return h, torch.zeros_like(h)

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
        h, c = state
        weights = [self.weight_ih, self.weight_hh, self.bias, self.zero_bias]
        y, h, c = torch.lstm(x, (h.unsqueeze(0), c.unsqueeze(0)), weights, True, 1, 0.0, self.training,
                             False, False)
        return y, (h.squeeze(0), c.squeeze(0))
