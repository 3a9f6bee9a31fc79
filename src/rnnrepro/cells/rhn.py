"""Recurrent Highway Network (Zilly et al., 2016): L highway layers per time step, coupled carry gate.

    s_0^t = s_L^{t-1},   and for l = 1 .. L:
    h_l^t = tanh(W_H x_t 1{l=1} + R_{H,l} s_{l-1}^t + b_{H,l})
    t_l^t = σ(W_T x_t 1{l=1} + R_{T,l} s_{l-1}^t + b_{T,l})
    s_l^t = h_l^t ⊙ t_l^t + s_{l-1}^t ⊙ c_l^t,   with the coupled carry gate c = 1 - t
    y_t = s_L^t

State: s (B, M). Parameters: 2NM + L(2M^2 + 2M) -- weight_ih ([W_H; W_T], 2M x N, used by the first
micro-layer only) and per micro-layer l = 0 .. L-1 weight_hh_l{l} ([R_H; R_T], 2M x M) and bias_l{l}
(2M), as the authors' TensorFlow cell (one bias per gate and micro-layer). The transform-gate biases
start at ``transform_bias`` (the authors' configs: -2 for PTB words, -4 for enwik8 / text8), so the
carry gate starts mostly open. Weight drop takes every R_l (they multiply the previous state).

The LRU authors' "highway" baseline is the same cell. W x_t is hoisted out of the loop; a step does L
products M x 2M, i.e. L/2 times the recurrent work of an LSTM of the same width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from . import gpu
from .base import RecurrentLayer
from .recurrence import (StepProduct, grad_or_zeros, sigmoid_grad, tanh_grad, uniform_init_, weight_grad,
                         zero_state)


def _forward_loop(projected: torch.Tensor, s0: torch.Tensor, *weights: torch.Tensor):
    """s_0 .. s_L of every step and the activated gates; on a GPU replayed from a CUDA graph."""
    depth = len(weights) // 2
    steps, hidden_size = projected.size(0), s0.size(1)
    states = projected.new_empty(steps, depth + 1, *s0.shape)   # s_0 .. s_L of every step
    gates = projected.new_empty(steps, depth, s0.size(0), 2 * hidden_size)  # h, t activated
    products = [StepProduct(weights[2 * layer], s0.size(0), weights[2 * layer + 1]) for layer in range(depth)]
    s = s0
    kernels = gpu.kernels_for(projected, s0, *weights)
    for t in range(steps):
        states[t, 0] = s
        for layer in range(depth):
            # R s + b, and x enters the first micro-layer only
            products[layer](s, add=projected[t] if layer == 0 else None, out=gates[t, layer])
            if kernels is not None:   # GPU: the gates and the highway update in one kernel
                kernels.highway(gates[t, layer], states[t, layer], states[t, layer + 1])
                s = states[t, layer + 1]
                continue
            h, transform = gates[t, layer].chunk(2, dim=1)
            h.tanh_()
            transform.sigmoid_()
            s = torch.lerp(s, h, transform, out=states[t, layer + 1])   # h ⊙ t + s ⊙ (1 - t)
    return states, gates


def _backward_loop(grad_output: torch.Tensor, states: torch.Tensor, gates: torch.Tensor, *weights: torch.Tensor):
    """Gradients of the projections, s_0 and every weight; on a GPU replayed from a CUDA graph."""
    steps, depth = gates.shape[:2]
    grad_preactivations = torch.empty_like(gates)
    grad_s = torch.zeros_like(states[0, 0])
    products = [StepProduct(weights[2 * layer].t().contiguous(), grad_s.size(0)) for layer in range(depth)]
    kernels = gpu.kernels_for(grad_output, states, *weights)
    if kernels is not None:
        grad_output = grad_output.contiguous()   # the kernels read (B, M) rows of grad_s
    for t in range(steps - 1, -1, -1):
        grad_s = grad_s + grad_output[t]
        for layer in range(depth - 1, -1, -1):
            if kernels is not None:   # GPU: both gates' derivatives and the carry in one kernel
                carry = kernels.highway_backward(grad_s, gates[t, layer], states[t, layer], grad_preactivations[t, layer])
                grad_s = products[layer](grad_preactivations[t, layer], add=carry)
                continue
            h, transform = gates[t, layer].chunk(2, dim=1)
            grad = torch.cat([tanh_grad(grad_s * transform, h),
                              sigmoid_grad(grad_s * (h - states[t, layer]), transform)], dim=1)
            grad_preactivations[t, layer] = grad
            grad_s = products[layer](grad, add=grad_s * (1 - transform))
    grad_weights = []
    for layer in range(depth):
        grad = grad_preactivations[:, layer]
        grad_weights += [weight_grad(grad, states[:, layer]), grad.sum(dim=(0, 1))]
    return grad_preactivations[:, 0], grad_s, *grad_weights


class _HighwayRecurrence(torch.autograd.Function):
    """y_1..y_T given the hoisted [W_H; W_T] x_t (T, B, 2M) and s_0."""

    @staticmethod
    def forward(ctx, projected: torch.Tensor, s0: torch.Tensor, *weights: torch.Tensor) -> torch.Tensor:
        states, gates = gpu.captured(_forward_loop, (projected, s0, *weights))
        ctx.save_for_backward(states, gates, *weights)
        return states[:, len(weights) // 2]

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        states, gates, *weights = ctx.saved_tensors
        grad_output = grad_or_zeros(grad_output, states[:, 0])
        return gpu.captured(_backward_loop, (grad_output, states, gates, *weights))


class RHNLayer(RecurrentLayer):
    """Recurrent highway layer with recurrence depth L; state s (B, M)."""

    def __init__(self, input_size: int, hidden_size: int, *, recurrence_depth: int, transform_bias: float = -2.0):
        """``recurrence_depth``: L, highway micro-layers per step (Zilly et al.: 10 for PTB words).
        ``transform_bias``: initial bias of the transform gates (authors: -2 PTB, -4 enwik8/text8)."""
        super().__init__(input_size, hidden_size)
        if recurrence_depth < 1:
            raise ValueError(f"rhn: recurrence_depth={recurrence_depth}, must be at least 1")
        self.recurrence_depth = recurrence_depth
        self.weight_ih = nn.Parameter(torch.empty(2 * hidden_size, input_size))
        for layer in range(recurrence_depth):
            self.register_parameter(f"weight_hh_l{layer}", nn.Parameter(torch.empty(2 * hidden_size, hidden_size)))
            self.register_parameter(f"bias_l{layer}", nn.Parameter(torch.empty(2 * hidden_size)))
        uniform_init_(self, hidden_size)
        with torch.no_grad():
            for layer in range(recurrence_depth):
                getattr(self, f"bias_l{layer}")[hidden_size:] = transform_bias
        self.recurrent_weight_names = tuple(f"weight_hh_l{layer}" for layer in range(recurrence_depth))

    @staticmethod
    def parameter_count(input_size: int, hidden_size: int, *, recurrence_depth: int,
                        transform_bias: float = -2.0) -> int:
        return 2 * input_size * hidden_size + recurrence_depth * (2 * hidden_size * hidden_size + 2 * hidden_size)

    def init_state(self, batch_size: int, device=None, dtype=None) -> torch.Tensor:
        return zero_state(self.weight_ih, batch_size, self.hidden_size, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor, state: torch.Tensor):
        weights = [getattr(self, f"{name}_l{layer}") for layer in range(self.recurrence_depth)
                   for name in ("weight_hh", "bias")]
        y = _HighwayRecurrence.apply(F.linear(x, self.weight_ih), state, *weights)
        return y, y[-1]
