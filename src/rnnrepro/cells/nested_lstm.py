"""Nested LSTM (Moniz & Krueger, 2018): the memory cell of an LSTM is itself an LSTM.

Outer LSTM (level 0), with gates from the input and h_{t-1}:

    [i_t, f_t, g_t, o_t] = [σ, σ, σ_c, σ](W x_t + U h_{t-1} + b)
    h̃_t = f_t ⊙ c_{t-1}            (the inner LSTM's "previous hidden state")
    x̃_t = i_t ⊙ g_t                (the inner LSTM's input)
    c_t = inner_LSTM(x̃_t, h̃_t)     (= the inner LSTM's new hidden state)
    h_t = o_t ⊙ tanh(c_t)

Level d = 1 .. D-1 is an LSTM whose gates read [x̃; h̃] from level d-1 instead of [x; h]; its memory
c^d is its own state; the innermost level D-1 updates its memory as a plain LSTM,
c^{D-1}_t = f ⊙ c^{D-1}_{t-1} + i ⊙ tanh(g). σ_c is the identity at the outermost level and tanh
inside: the paper leaves σ_c open, the reference implementation (hannw/nlstm) and the one used for
the published comparison (Distill's "memorization in RNNs", a simplified copy) use the identity at
level 0 only; we follow them.

State: (h, c^0, ..., c^{D-1}), D + 1 tensors of shape (B, M); c^{d-1} equals the hidden output of level d.

Parameters: one bias per gate, as the TensorFlow cell (one kernel over the concatenated inputs):
4(NM + M^2 + M) for level 0 and 4(2M^2 + M) per inner level, so 4(NM + M^2 + M) + (D-1)·4(2M^2 + M).
With N = M = 600 and D = 2 (the comparison's model): 2,882,400 + 2,882,400 = 5,764,800, the published
count. Stored per level d as weight_ih_l{d} (rows i, f, g, o; on x_t, or on x̃ inside),
weight_hh_l{d} (on h_{t-1}, or on h̃ inside) and bias_l{d}; the forget-gate biases start at 1 (the
reference adds a constant forget_bias = 1). Weight drop takes every weight_hh_l{d}: each multiplies
its level's previous hidden state.

Only W x_t is hoisted out of the loop; every inner product depends on h_{t-1}. So one step does three
M x 4M products where an LSTM does one: at equal width a depth-2 NLSTM costs about three LSTM layers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .base import RecurrentLayer
from .recurrence import (grad_or_zeros, sigmoid_grad, tanh_grad, uniform_init_, weight_grad,
                         zero_state)

FORGET_BIAS = 1.0


def _activate(preactivation: torch.Tensor, outermost: bool) -> torch.Tensor:
    """Gates i, f, o through σ; g through the identity (outermost level) or tanh, in place."""
    i, f, g, o = preactivation.chunk(4, dim=1)
    for gate in (i, f, o):
        gate.sigmoid_()
    if not outermost:
        g.tanh_()
    return preactivation


class _NestedLSTMRecurrence(torch.autograd.Function):
    """Outputs h_1..h_T and the final memories, given the hoisted W x_t + b of level 0."""

    @staticmethod
    def forward(ctx, depth: int, projected: torch.Tensor, h0: torch.Tensor, *tensors: torch.Tensor):
        # weights: W_hh of level 0, then per inner level [W_ih W_hh] side by side (4M x 2M) and its bias
        memories0, weights = tensors[:depth], _joined_inner_weights(tensors[depth:])
        steps = projected.size(0)
        gates = [projected.new_empty(projected.shape) for _ in range(depth)]   # activated, per level
        memories = [projected.new_empty(steps + 1, *h0.shape) for _ in range(depth)]
        hidden = projected.new_empty(steps + 1, *h0.shape)
        hidden[0] = h0
        for level in range(depth):
            memories[level][0] = memories0[level]
        for t in range(steps):
            _NestedLSTMRecurrence._step(t, projected, hidden, memories, gates, weights)
        ctx.depth = depth
        ctx.save_for_backward(hidden, *memories, *gates, *weights)
        return (hidden[1:], *(m[steps] for m in memories))

    @staticmethod
    def _step(t, projected, hidden, memories, gates, weights):
        depth = len(gates)
        torch.addmm(projected[t], hidden[t], weights[0].t(), out=gates[0][t])
        _activate(gates[0][t], outermost=True)
        for level in range(1, depth):
            i, f, g, _ = gates[level - 1][t].chunk(4, dim=1)
            weight, bias = weights[2 * level - 1: 2 * level + 1]
            inner_inputs = torch.cat([i * g, f * memories[level - 1][t]], dim=1)   # [x̃; h̃]
            torch.addmm(bias, inner_inputs, weight.t(), out=gates[level][t])
            _activate(gates[level][t], outermost=False)
        i, f, g, _ = gates[depth - 1][t].chunk(4, dim=1)
        cell = torch.addcmul(i * g, f, memories[depth - 1][t])
        for level in range(depth - 1, -1, -1):
            memories[level][t + 1] = cell
            cell = gates[level][t].chunk(4, dim=1)[3] * torch.tanh(cell)  # level output = c of level - 1
        hidden[t + 1] = cell

    @staticmethod
    def backward(ctx, grad_hidden, *grad_final_memories):
        depth = ctx.depth
        saved = ctx.saved_tensors
        hidden, memories, gates, weights = (saved[0], saved[1: 1 + depth], saved[1 + depth: 1 + 2 * depth],
                                            saved[1 + 2 * depth:])
        steps = hidden.size(0) - 1
        grad_hidden = grad_or_zeros(grad_hidden, hidden[1:])
        grad_memory = [grad_or_zeros(g, memories[level][steps]).clone()
                       for level, g in enumerate(grad_final_memories)]
        grad_preactivations = [torch.empty_like(g) for g in gates]
        grad_h = torch.zeros_like(hidden[0])
        for t in range(steps - 1, -1, -1):
            grad_h = grad_h + grad_hidden[t]
            grad_h = _NestedLSTMRecurrence._step_backward(t, grad_h, grad_memory, memories, gates,
                                                          weights, grad_preactivations)
        return (None, grad_preactivations[0], grad_h, *grad_memory,
                *_NestedLSTMRecurrence._weight_grads(hidden, memories, gates, grad_preactivations))

    @staticmethod
    def _step_backward(t, grad_h, grad_memory, memories, gates, weights, grad_preactivations):
        """Gradients at step t: fills grad_preactivations[.][t], updates grad_memory to step t - 1."""
        depth = len(gates)
        grad_output_gate = []
        grad_out = grad_h  # gradient w.r.t. the output of the current level, outermost first
        for level in range(depth):
            o = gates[level][t].chunk(4, dim=1)[3]
            tanh_cell = torch.tanh(memories[level][t + 1])
            grad_output_gate.append(grad_out * tanh_cell)
            grad_out = grad_memory[level] + tanh_grad(grad_out * o, tanh_cell)
        i, f, g, _ = gates[depth - 1][t].chunk(4, dim=1)
        grad_i, grad_f, grad_g = grad_out * g, grad_out * memories[depth - 1][t], grad_out * i
        grad_memory[depth - 1] = grad_out * f
        for level in range(depth - 1, -1, -1):
            i, f, g, o = gates[level][t].chunk(4, dim=1)
            grad_g = grad_g if level == 0 else tanh_grad(grad_g, g)
            grad = torch.cat([sigmoid_grad(grad_i, i), sigmoid_grad(grad_f, f), grad_g,
                              sigmoid_grad(grad_output_gate[level], o)], dim=1)
            grad_preactivations[level][t] = grad
            if level == 0:
                return grad @ weights[0]
            grad_inner_input, grad_inner_hidden = (grad @ weights[2 * level - 1]).chunk(2, dim=1)
            i, f, g, _ = gates[level - 1][t].chunk(4, dim=1)
            grad_i, grad_g = grad_inner_input * g, grad_inner_input * i
            grad_f = grad_inner_hidden * memories[level - 1][t]
            grad_memory[level - 1] = grad_inner_hidden * f

    @staticmethod
    def _weight_grads(hidden, memories, gates, grad_preactivations):
        grads = [weight_grad(grad_preactivations[0], hidden[:-1])]
        for level in range(1, len(gates)):
            i, f, g, _ = gates[level - 1].chunk(4, dim=2)
            grad = grad_preactivations[level]
            grads += [*weight_grad(grad, torch.cat([i * g, f * memories[level - 1][:-1]], dim=2)).chunk(2, dim=1),
                      grad.sum(dim=(0, 1))]
        return grads


def _joined_inner_weights(weights: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    """(W_hh^0, then W_ih^d, W_hh^d, b^d per inner level) -> W_hh^0, then [W_ih^d W_hh^d], b^d:
    one product per inner level and step instead of two."""
    joined = [weights[0]]
    for level in range(1, len(weights) // 3 + 1):
        weight_ih, weight_hh, bias = weights[3 * level - 2: 3 * level + 1]
        joined += [torch.cat([weight_ih, weight_hh], dim=1), bias]
    return joined


class NestedLSTMLayer(RecurrentLayer):
    """Nested LSTM of nesting depth D >= 2; state (h, c^0, ..., c^{D-1}), each (B, M)."""

    def __init__(self, input_size: int, hidden_size: int, depth: int = 2):
        """``depth``: levels of nesting, D (the comparison uses 2); depth 1 is an LSTM, use that instead."""
        super().__init__(input_size, hidden_size)
        if depth < 2:
            raise ValueError(f"nested_lstm: depth={depth}, but nesting needs depth >= 2; for depth 1 use "
                             f"the cell 'lstm_single_bias'")
        self.depth = depth
        for level in range(depth):
            level_input = input_size if level == 0 else hidden_size
            self.register_parameter(f"weight_ih_l{level}", nn.Parameter(torch.empty(4 * hidden_size, level_input)))
            self.register_parameter(f"weight_hh_l{level}", nn.Parameter(torch.empty(4 * hidden_size, hidden_size)))
            self.register_parameter(f"bias_l{level}", nn.Parameter(torch.empty(4 * hidden_size)))
        uniform_init_(self, hidden_size)
        with torch.no_grad():
            for level in range(depth):
                getattr(self, f"bias_l{level}")[hidden_size: 2 * hidden_size] = FORGET_BIAS
        self.recurrent_weight_names = tuple(f"weight_hh_l{level}" for level in range(depth))

    @staticmethod
    def parameter_count(input_size: int, hidden_size: int, depth: int = 2) -> int:
        outer = 4 * (input_size * hidden_size + hidden_size * hidden_size + hidden_size)
        return outer + (depth - 1) * 4 * (2 * hidden_size * hidden_size + hidden_size)

    def init_state(self, batch_size: int, device=None, dtype=None) -> tuple[torch.Tensor, ...]:
        h = zero_state(self.weight_hh_l0, batch_size, self.hidden_size, device=device, dtype=dtype)
        return (h, *(torch.zeros_like(h) for _ in range(self.depth)))

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, ...]):
        h, *memories = state
        inner = [getattr(self, f"{name}_l{level}") for level in range(1, self.depth)
                 for name in ("weight_ih", "weight_hh", "bias")]
        projected = F.linear(x, self.weight_ih_l0, self.bias_l0)
        hidden, *memories = _NestedLSTMRecurrence.apply(self.depth, projected, h, *memories,
                                                        self.weight_hh_l0, *inner)
        return hidden, (hidden[-1], *memories)
