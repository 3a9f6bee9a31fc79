"""Addition-subtraction twin-gated recurrent unit, ATR (Zhang, Xiong, Su, Lin & Zhang, EMNLP 2018).

    p_t = W x_t + b_W,        q_t = U h_{t-1} + b_U
    i_t = σ(p_t + q_t),       f_t = σ(p_t - q_t)           (the twin gates share p and q)
    h_t = tanh(i_t ⊙ p_t + f_t ⊙ h_{t-1})

State: h (B, M). Parameters: NM + M^2 + 2M (weight_ih, bias_ih, weight_hh, bias_hh).

The ATR paper writes h_t = i_t ⊙ p_t + f_t ⊙ h_{t-1} without an output non-linearity; the ATR cell
of the LRN authors' code, the one the LRN paper compares against (our ``lrn`` study), applies tanh.
We follow the LRN code. Its counts confirm the parameterisation: with one bias on each product,
their 3-layer PTB LM (280 -> 960 -> 960 -> 620, MoS decoder) has the 9M parameters the LRN paper
reports. W x_t is hoisted out of the loop; a step does one M x M product, a quarter of an LSTM's.

``init``: "uniform" (U(±1/√M) for every parameter) or "xavier", the LRN authors' LM code: W (N x M)
and U (M x M) each Xavier-uniform, both biases 0.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from . import gpu
from .base import RecurrentLayer
from .recurrence import (StepProduct, check_init, grad_or_zeros, sigmoid_grad, tanh_grad, uniform_init_,
                         weight_grad, xavier_uniform_, zero_state)


def _forward_loop(p: torch.Tensor, h0: torch.Tensor, weight_hh: torch.Tensor, bias_hh: torch.Tensor):
    """(hidden (T+1, B, M) with h0 first, input gates, forget gates): the eager loop, or on a GPU one
    product and one fused Triton step per time step."""
    hidden = p.new_empty(p.size(0) + 1, *h0.shape)
    input_gates, forget_gates = torch.empty_like(p), torch.empty_like(p)
    hidden[0] = h0
    product = StepProduct(weight_hh, h0.size(0), bias_hh)   # h ↦ U h + b_U
    kernels = gpu.kernels_for(p, h0, weight_hh)
    if kernels is not None:
        p = p.contiguous()  # the fused step reads each p_t as B*M contiguous lanes
    for t in range(p.size(0)):
        q = product(hidden[t])
        if kernels is not None:
            kernels.atr_step(p[t], q, hidden[t], input_gates[t], forget_gates[t], hidden[t + 1])
            continue
        torch.sigmoid(p[t] + q, out=input_gates[t])
        torch.sigmoid(p[t] - q, out=forget_gates[t])
        torch.tanh(torch.addcmul(input_gates[t] * p[t], forget_gates[t], hidden[t]), out=hidden[t + 1])
    return hidden, input_gates, forget_gates


def _backward_loop(grad_output, p, hidden, input_gates, forget_gates, weight_hh):
    """(dL/dp, dL/dq, dL/dh0) through the loop, eager or with one fused Triton step per time step."""
    grad_p, grad_q = torch.empty_like(p), torch.empty_like(p)
    grad_h = torch.zeros_like(hidden[0])
    product = StepProduct(weight_hh.t().contiguous(), grad_h.size(0))   # g ↦ g U
    kernels = gpu.kernels_for(grad_output, p, hidden)
    if kernels is not None:
        grad_output, p = grad_output.contiguous(), p.contiguous()  # e.g. sum()'s expanded gradient
    for t in range(p.size(0) - 1, -1, -1):
        if kernels is not None:
            carry = kernels.atr_step_backward(grad_h, grad_output[t], hidden[t + 1], p[t], hidden[t], input_gates[t],
                                              forget_gates[t], grad_p[t], grad_q[t])
            grad_h = product(grad_q[t], add=carry)
            continue
        grad_sum = tanh_grad(grad_h + grad_output[t], hidden[t + 1])
        grad_i = sigmoid_grad(grad_sum * p[t], input_gates[t])
        grad_f = sigmoid_grad(grad_sum * hidden[t], forget_gates[t])
        grad_p[t] = grad_sum * input_gates[t] + grad_i + grad_f
        torch.sub(grad_i, grad_f, out=grad_q[t])
        grad_h = product(grad_q[t], add=grad_sum * forget_gates[t])
    return grad_p, grad_q, grad_h


class _ATRRecurrence(torch.autograd.Function):
    """h_1..h_T given p_t = W x_t + b_W for all steps (T, B, M) and h_0. On a GPU each loop is replayed
    from a CUDA graph (``gpu.captured``); on a CPU it runs as written."""

    @staticmethod
    def forward(ctx, p: torch.Tensor, h0: torch.Tensor, weight_hh: torch.Tensor, bias_hh: torch.Tensor):
        hidden, input_gates, forget_gates = gpu.captured(_forward_loop, (p, h0, weight_hh, bias_hh))
        ctx.save_for_backward(p, hidden, input_gates, forget_gates, weight_hh)
        return hidden[1:]

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        p, hidden, input_gates, forget_gates, weight_hh = ctx.saved_tensors
        grad_output = grad_or_zeros(grad_output, p)
        grad_p, grad_q, grad_h = gpu.captured(_backward_loop,
                                              (grad_output, p, hidden, input_gates, forget_gates, weight_hh))
        return grad_p, grad_h, weight_grad(grad_q, hidden[:-1]), grad_q.sum(dim=(0, 1))


class ATRLayer(RecurrentLayer):
    """ATR layer, input (T, B, N) -> output (T, B, M); state h (B, M)."""

    recurrent_weight_names = ("weight_hh",)

    def __init__(self, input_size: int, hidden_size: int, init: str = "uniform"):
        super().__init__(input_size, hidden_size)
        check_init("atr", init)
        self.weight_ih = nn.Parameter(torch.empty(hidden_size, input_size))
        self.bias_ih = nn.Parameter(torch.empty(hidden_size))
        self.weight_hh = nn.Parameter(torch.empty(hidden_size, hidden_size))
        self.bias_hh = nn.Parameter(torch.empty(hidden_size))
        uniform_init_(self, hidden_size)
        if init == "xavier":
            xavier_uniform_(self.weight_ih, input_size + hidden_size)
            xavier_uniform_(self.weight_hh, 2 * hidden_size)
            nn.init.zeros_(self.bias_ih)
            nn.init.zeros_(self.bias_hh)

    @staticmethod
    def parameter_count(input_size: int, hidden_size: int) -> int:
        return input_size * hidden_size + hidden_size * hidden_size + 2 * hidden_size

    def init_state(self, batch_size: int, device=None, dtype=None) -> torch.Tensor:
        return zero_state(self.weight_hh, batch_size, self.hidden_size, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor, state: torch.Tensor):
        p = F.linear(x, self.weight_ih, self.bias_ih)
        hidden = _ATRRecurrence.apply(p, state, self.weight_hh, self.bias_hh)
        return hidden, hidden[-1]
