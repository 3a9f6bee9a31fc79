"""Lightweight recurrent network, LRN (Zhang & Sennrich, ACL 2019).

Every parameterised product is taken out of the recurrence:

    [q_t; k_t; v_t] = W_qkv x_t + b_qkv          (for the whole sequence at once)
    i_t = σ(k_t + h_{t-1})                        (input gate)
    f_t = σ(q_t - h_{t-1})                        (forget gate: twin of the input gate)
    h_t = g(i_t ⊙ v_t + f_t ⊙ h_{t-1})

g is tanh or the identity (``activation``); the LM experiments and the authors' LM code use tanh,
the identity makes h_t a weighted sum of the v_k (the paper's link to self-attention).

``init``: "uniform" (the library's U(±1/√M) for every parameter) or "xavier", the authors' LM code
(``lm/code/rnn.py``): W_qkv Xavier-uniform over its N x 3M shape, bias 0 (RMS gains stay 1).

``layer_norm=True`` normalises W_qkv x_t over its 3M features before the bias, with a learned gain.
The paper calls this layer normalisation; the authors' code (``func.linear(..., ln=True)``) uses
RMSNorm -- no centring, no shift, a gain per feature -- and that is what we implement.

State: h (B, M). Parameters: 3NM + 3M, plus 3M gains with layer_norm (weight_ih rows q, k, v; bias;
norm_gain). The authors' code names the chunks p, q, r: p feeds the input gate, q the forget gate.
Their PTB LM (280 -> 960 -> 960 -> 620 with a MoS decoder) has 11M parameters with this count, as
the paper reports. The loop is elementwise only (no product with h), so it runs far faster than an
LSTM of the same width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from . import gpu
from .base import RecurrentLayer
from .recurrence import check_init, grad_or_zeros, sigmoid_grad, tanh_grad, uniform_init_, xavier_uniform_, zero_state

ACTIVATIONS = ("tanh", "identity")
RMS_NORM_EPS = 1e-8  # the authors' layer_norm epsilon


class _LRNRecurrence(torch.autograd.Function):
    """h_1..h_T given [q; k; v] for all steps (T, B, 3M) and h_0."""

    @staticmethod
    def forward(ctx, projected: torch.Tensor, h0: torch.Tensor, tanh_output: bool) -> torch.Tensor:
        q, k, v = projected.chunk(3, dim=2)
        kernels = gpu.kernels_for(projected, h0)
        if kernels is not None:  # GPU: the whole loop is one Triton scan
            hidden, input_gates, forget_gates = kernels.lrn_forward(projected, h0, tanh_output)
        else:
            hidden = projected.new_empty(projected.size(0) + 1, *h0.shape)
            input_gates, forget_gates = torch.empty_like(q), torch.empty_like(q)
            hidden[0] = h0
            for t in range(projected.size(0)):
                torch.sigmoid(k[t] + hidden[t], out=input_gates[t])
                torch.sigmoid(q[t] - hidden[t], out=forget_gates[t])
                torch.addcmul(input_gates[t] * v[t], forget_gates[t], hidden[t], out=hidden[t + 1])
                if tanh_output:
                    hidden[t + 1].tanh_()
        ctx.tanh_output = tanh_output
        ctx.save_for_backward(v, hidden, input_gates, forget_gates)
        return hidden[1:]

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        v, hidden, input_gates, forget_gates = ctx.saved_tensors
        grad_output = grad_or_zeros(grad_output, v)
        kernels = gpu.kernels_for(grad_output, v, hidden)
        if kernels is not None:
            return *kernels.lrn_backward(grad_output, v, hidden, input_gates, forget_gates, ctx.tanh_output), None
        grad_q, grad_k, grad_v = torch.empty_like(v), torch.empty_like(v), torch.empty_like(v)
        grad_h = torch.zeros_like(hidden[0])
        for t in range(v.size(0) - 1, -1, -1):
            grad_sum = grad_h + grad_output[t]
            if ctx.tanh_output:
                grad_sum = tanh_grad(grad_sum, hidden[t + 1])
            torch.mul(grad_sum, input_gates[t], out=grad_v[t])
            grad_k[t] = sigmoid_grad(grad_sum * v[t], input_gates[t])
            grad_q[t] = sigmoid_grad(grad_sum * hidden[t], forget_gates[t])
            grad_h = grad_sum * forget_gates[t] + grad_k[t] - grad_q[t]
        return torch.cat([grad_q, grad_k, grad_v], dim=2), grad_h, None


class LRNLayer(RecurrentLayer):
    """LRN layer, input (T, B, N) -> output (T, B, M); state h (B, M). No hidden-to-hidden weights."""

    def __init__(self, input_size: int, hidden_size: int, activation: str = "tanh", layer_norm: bool = False,
                 init: str = "uniform"):
        """``activation``: g, "tanh" (default, the LM setting) or "identity".
        ``layer_norm``: RMS-normalise W_qkv x_t before the bias (the authors' ``ln`` option).
        ``init``: "uniform" or "xavier" (the authors' LM code), see the module docstring."""
        super().__init__(input_size, hidden_size)
        if activation not in ACTIVATIONS:
            raise ValueError(f"lrn: activation={activation!r}; use one of {ACTIVATIONS}")
        check_init("lrn", init)
        self.activation = activation
        self.weight_ih = nn.Parameter(torch.empty(3 * hidden_size, input_size))
        self.bias = nn.Parameter(torch.empty(3 * hidden_size))
        uniform_init_(self, hidden_size)
        if init == "xavier":
            xavier_uniform_(self.weight_ih, input_size + 3 * hidden_size)
            nn.init.zeros_(self.bias)
        self.norm_gain = nn.Parameter(torch.ones(3 * hidden_size)) if layer_norm else None

    @staticmethod
    def parameter_count(input_size: int, hidden_size: int, activation: str = "tanh", layer_norm: bool = False) -> int:
        return 3 * input_size * hidden_size + 3 * hidden_size + (3 * hidden_size if layer_norm else 0)

    def init_state(self, batch_size: int, device=None, dtype=None) -> torch.Tensor:
        return zero_state(self.weight_ih, batch_size, self.hidden_size, device=device, dtype=dtype)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """[q; k; v] for the whole sequence: one product, then the optional RMS normalisation."""
        if self.norm_gain is None:
            return F.linear(x, self.weight_ih, self.bias)
        normalised = F.rms_norm(F.linear(x, self.weight_ih), self.norm_gain.shape, self.norm_gain, RMS_NORM_EPS)
        return normalised + self.bias

    def forward(self, x: torch.Tensor, state: torch.Tensor):
        hidden = _LRNRecurrence.apply(self.project(x), state, self.activation == "tanh")
        return hidden, hidden[-1]
