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

Speed. Only W x_t is hoisted out of the loop; every inner product depends on h_{t-1}. So one step
does three M x 4M products where an LSTM does one, forward and backward, and the recurrent weight
gradients are three such products over the whole sequence where an LSTM has one: at equal width a
depth-2 NLSTM is about three LSTM layers' arithmetic (2.5x nn.LSTM's at the AWD shape, where the input
projection, the same for both, dilutes it). The step products go through oneDNN on a CPU
(``StepProduct``); the step's elementwise work is a handful of fused multiplies, because the backward
pass first forms every gate's local derivative over the whole sequence in a few batched operations.
benchmarks/cells.py ``--floor`` times the products alone: at the AWD shape the cell is within ~10 % of
them; at small sizes per-step operator overhead adds about as much again as half the products.

On a GPU (``rnnrepro.cells.gpu``) both loops are replayed from CUDA graphs, and with Triton each level's
element-wise work after its step product is one fused kernel, forward and backward (``_fused_forward_loop``,
``_fused_backward_loop``); in float32 the step products themselves run through a split-K Triton kernel
(``gpu.settings(triton_products=False)``: cuBLAS), because at B = 20 rows cuBLAS walks K (up to 4M in
the backward products) with few thread blocks. They save the same tensors and give the same gradients as
the loops above, which stay the CPU path.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from . import gpu
from .base import RecurrentLayer
from .recurrence import (StepProduct, grad_or_zeros, sigmoid_grad, tanh_grad, uniform_init_, weight_grad,
                         zero_state)

FORGET_BIAS = 1.0


class _NestedLSTMRecurrence(torch.autograd.Function):
    """Outputs h_1..h_T and the final memories, given the hoisted W x_t + b of level 0.

    Gate rows per level: i, f, g, o (as stored). Forward keeps per level the activated gates, the
    memories c^d_0..c^d_T and tanh(c^d_1..T), and per inner level its input [x̃; h̃] (for the weight
    gradient). Backward first forms, over the whole sequence at once, every factor that links a
    pre-activation's gradient to the gradient of what it feeds; the step loop is then left with one
    fused multiply per gate group and the two matrix products.
    """

    @staticmethod
    def forward(ctx, depth: int, projected: torch.Tensor, h0: torch.Tensor, *tensors: torch.Tensor):
        # weights: W_hh of level 0, then per inner level [W_ih W_hh] side by side (4M x 2M) and its bias
        memories0, weights = tensors[:depth], _joined_inner_weights(tensors[depth:])
        saved = gpu.captured(_forward_loop, (projected, h0, *memories0, *weights), (depth,))
        ctx.depth = depth
        ctx.save_for_backward(*saved, *weights)
        hidden, memories = saved[0], saved[1: 1 + depth]
        return (hidden[1:], *(m[-1] for m in memories))

    @staticmethod
    def backward(ctx, grad_hidden, *grad_final_memories):
        depth = ctx.depth
        saved = ctx.saved_tensors
        hidden, memories = saved[0], saved[1: 1 + depth]
        grad_hidden = grad_or_zeros(grad_hidden, hidden[1:]).contiguous()
        grad_memory = [grad_or_zeros(g, memories[level][-1]) for level, g in enumerate(grad_final_memories)]
        return (None, *gpu.captured(_backward_loop, (grad_hidden, *grad_memory, *saved), (depth,)))


def _forward_loop(depth: int, projected: torch.Tensor, h0: torch.Tensor, *tensors: torch.Tensor):
    """hidden, memories, tanh(memories), activated gates and inner inputs of every level (what backward
    needs), given c^d_0 of every level and the joined weights; on a GPU replayed from a CUDA graph, with
    fused Triton steps where ``gpu.kernels_for`` allows."""
    kernels = gpu.kernels_for(projected, h0, *tensors)
    if kernels is not None:
        return _fused_forward_loop(kernels, depth, projected, h0, *tensors)
    memories0, weights = tensors[:depth], tensors[depth:]
    steps, (batch, size) = projected.size(0), h0.shape
    gates = [projected.new_empty(steps, batch, 4 * size) for _ in range(depth)]   # activated
    memories = [projected.new_empty(steps + 1, batch, size) for _ in range(depth)]
    tanh_memories = [projected.new_empty(steps, batch, size) for _ in range(depth)]
    inner_inputs = [None] + [projected.new_empty(steps, batch, 2 * size) for _ in range(1, depth)]
    hidden = projected.new_empty(steps + 1, batch, size)
    hidden[0] = h0
    for level in range(depth):
        memories[level][0] = memories0[level]
    projected = projected.contiguous()
    # x ↦ x W^T per level: W_hh^0 (the hoisted product already holds W x + b), then [W_ih W_hh]^d, b^d
    products = [StepProduct(weights[0], batch)] + [StepProduct(weights[2 * level - 1], batch, weights[2 * level])
                                                  for level in range(1, depth)]
    # every per-step view the loop needs, made once (at small sizes a view costs as much as the arithmetic)
    m = size
    h, x, mem, squashed = _by_step(hidden), _by_step(projected), [_by_step(c) for c in memories], \
        [_by_step(c) for c in tanh_memories]
    gate, i, f, g, o = ([_by_step(a, *cols) for a in gates]
                        for cols in [(), (0, m), (m, 2 * m), (2 * m, 3 * m), (3 * m, 4 * m)])
    i_f = [_by_step(a, 0, 2 * m) for a in gates]
    joined, inner_x, inner_h = ([None, *(_by_step(a, *cols) for a in inner_inputs[1:])]
                                for cols in [(), (0, m), (m, 2 * m)])
    for t in range(steps):
        products[0](h[t], add=x[t], out=gate[0][t])
        i_f[0][t].sigmoid_()                    # i, f;  g: the identity at level 0
        o[0][t].sigmoid_()
        for level in range(1, depth):
            torch.mul(i[level - 1][t], g[level - 1][t], out=inner_x[level][t])            # x̃ = i g
            torch.mul(f[level - 1][t], mem[level - 1][t], out=inner_h[level][t])          # h̃ = f c
            products[level](joined[level][t], out=gate[level][t])
            i_f[level][t].sigmoid_()
            g[level][t].tanh_()
            o[level][t].sigmoid_()
        last = depth - 1
        torch.mul(i[last][t], g[last][t], out=mem[last][t + 1]).addcmul_(f[last][t], mem[last][t])
        for level in range(last, -1, -1):   # each level's output is the memory of the one above
            torch.tanh(mem[level][t + 1], out=squashed[level][t])
            torch.mul(o[level][t], squashed[level][t], out=mem[level - 1][t + 1] if level else h[t + 1])
    return (hidden, *memories, *tanh_memories, *gates, *inner_inputs[1:])


def _backward_loop(depth: int, grad_hidden: torch.Tensor, *tensors: torch.Tensor):
    """Gradients of W x_t + b, h_0, every c^d_0 and every weight, given dL/dh (T, B, M), dL/d(final
    memories) and what forward saved; on a GPU replayed from a CUDA graph, with fused Triton steps where
    ``gpu.kernels_for`` allows."""
    kernels = gpu.kernels_for(grad_hidden, *tensors)
    if kernels is not None:
        return _fused_backward_loop(kernels, depth, grad_hidden, *tensors)
    grad_final_memories, saved = tensors[:depth], list(tensors[depth:])
    hidden = saved.pop(0)
    memories, tanh_memories, gates = (saved[k * depth: (k + 1) * depth] for k in range(3))
    inner_inputs = [None, *saved[3 * depth: 4 * depth - 1]]
    weights = saved[4 * depth - 1:]
    steps, (batch, size) = hidden.size(0) - 1, hidden.shape[1:]
    # g ↦ g W per level (the step's gradient through W_hh^0, then through [W_ih W_hh]^d)
    products = [StepProduct(w.t().contiguous(), batch) for w in (weights[0], *weights[1::2])]
    grad_memory = [g.clone() for g in grad_final_memories]
    factors = [_backward_factors(level, depth, gates[level], memories[level], tanh_memories[level])
               for level in range(depth)]
    grad_pre = [torch.empty_like(g) for g in gates]   # gradients at the pre-activations
    m = size
    grad_in, pre, pre_o, pre_f = _by_step(grad_hidden), *([_by_step(a, *cols) for a in grad_pre]
                                                         for cols in [(), (3 * m, 4 * m), (m, 2 * m)])
    pre_ifg = [_by_step(a[..., : 3 * m].unflatten(-1, (3, m))) for a in grad_pre]   # rows i, f, g
    pre_ig = [_by_step(a.unflatten(-1, (4, m))[:, :, 0::2]) for a in grad_pre]      # rows i, g
    output_gate, through_output, forget, update, inner_input, inner_hidden = (
        [_by_step(getattr(f, name)) if getattr(f, name) is not None else None for f in factors]
        for name in _Factors._fields)
    grad_h = grad_hidden[steps - 1].clone()
    last = depth - 1
    for t in range(steps - 1, -1, -1):
        # down the levels: each output gate, and the gradient of each memory at step t + 1
        grad_out = grad_h
        for level in range(depth):
            torch.mul(grad_out, output_gate[level][t], out=pre_o[level][t])
            grad_out = grad_memory[level].addcmul_(grad_out, through_output[level][t])
        # the innermost memory update c = f c_prev + i g: its i, f, g pre-activations at once
        torch.mul(grad_out.unsqueeze(1), update[last][t], out=pre_ifg[last][t])
        grad_memory[last] = grad_out * forget[last][t]
        # up the levels: [x̃; h̃] of level d are i g and f c of level d - 1
        for level in range(last, 0, -1):
            grad_x, grad_hh = products[level](pre[level][t]).unflatten(-1, (2, m)).unbind(1)
            torch.mul(grad_x.unsqueeze(1), inner_input[level - 1][t], out=pre_ig[level - 1][t])   # i, g
            torch.mul(grad_hh, inner_hidden[level - 1][t], out=pre_f[level - 1][t])              # f
            grad_memory[level - 1] = grad_hh * forget[level - 1][t]
        grad_h = products[0](pre[0][t], add=grad_in[t - 1] if t else None)
    weight_grads = [weight_grad(grad_pre[0], hidden[:-1])]
    for level in range(1, depth):
        weight_grads += [*weight_grad(grad_pre[level], inner_inputs[level]).chunk(2, dim=1),
                         grad_pre[level].sum(dim=(0, 1))]
    return (grad_pre[0], grad_h, *grad_memory, *weight_grads)


def _fused_forward_loop(kernels, depth: int, projected: torch.Tensor, h0: torch.Tensor, *tensors: torch.Tensor):
    """``_forward_loop`` with each level's element-wise work after its step product in one Triton kernel:
    per step one product and one kernel per level (the innermost kernel also finishes the level above it;
    levels above that, at depth >= 3, take one more small kernel each). The products are cuBLAS's, or with
    ``gpu.split_products_for`` Triton's split-K kernel, whose partial sums the next kernel adds up."""
    memories0, weights = tensors[:depth], tensors[depth:]
    steps, (batch, size) = projected.size(0), h0.shape
    gates = [projected.new_empty(steps, batch, 4 * size) for _ in range(depth)]   # activated
    memories = [projected.new_empty(steps + 1, batch, size) for _ in range(depth)]
    tanh_memories = [projected.new_empty(steps, batch, size) for _ in range(depth)]
    inner_inputs = [None] + [projected.new_empty(steps, batch, 2 * size) for _ in range(1, depth)]
    hidden = projected.new_empty(steps + 1, batch, size)
    hidden[0] = h0
    for level in range(depth):
        memories[level][0] = memories0[level]
    projected = projected.contiguous()
    split = gpu.split_products_for(kernels, h0)
    # x ↦ x W^T (+ the step's other term: W x_t + b at level 0, b^d inside) per level
    matrices = [weights[0].t()] + [weights[2 * level - 1].t() for level in range(1, depth)]
    adds = [None] + [weights[2 * level] for level in range(1, depth)]
    products = None if split else [StepProduct(weights[0], batch)] + [
        StepProduct(weights[2 * level - 1], batch, weights[2 * level]) for level in range(1, depth)]
    h, x = _by_step(hidden), _by_step(projected)
    mem, squashed, gate = ([_by_step(a) for a in group] for group in (memories, tanh_memories, gates))
    joined = [None, *(_by_step(a) for a in inner_inputs[1:])]
    last = depth - 1

    def product(level: int, t: int, step_input: torch.Tensor):
        add = x[t] if level == 0 else adds[level]
        if split:
            return kernels.split_product(step_input, matrices[level], add)
        if level == 0:
            products[0](step_input, add=add, out=gate[0][t])
        else:
            products[level](step_input, out=gate[level][t])
        return kernels.StepInput(gate[level][t])

    for t in range(steps):
        step_input = h[t]
        for level in range(last):
            kernels.nested_outer_step(product(level, t, step_input), gate[level][t], mem[level][t],
                                      joined[level + 1][t], identity_g=level == 0)
            step_input = joined[level + 1][t]
        kernels.nested_innermost_step(product(last, t, step_input), gate[last][t], mem[last][t], mem[last][t + 1],
                                      squashed[last][t], gate[last - 1][t], mem[last - 1][t + 1],
                                      squashed[last - 1][t], mem[last - 2][t + 1] if last >= 2 else h[t + 1])
        for level in range(last - 2, -1, -1):   # depth >= 3: the outputs of the levels further up
            kernels.nested_output(gate[level][t], mem[level][t + 1], squashed[level][t],
                                  mem[level - 1][t + 1] if level else h[t + 1])
    return (hidden, *memories, *tanh_memories, *gates, *inner_inputs[1:])


def _fused_backward_loop(kernels, depth: int, grad_hidden: torch.Tensor, *tensors: torch.Tensor):
    """``_backward_loop`` with fused Triton steps: down the levels, one kernel per level above the innermost
    two and one for those two (every o gate, the innermost memory update); up the levels, per inner level
    its product and one kernel (the i, f, g rows of the level above); then the product through W_hh^0."""
    grad_final_memories, saved = tensors[:depth], list(tensors[depth:])
    hidden = saved.pop(0)
    memories, tanh_memories, gates = (saved[k * depth: (k + 1) * depth] for k in range(3))
    inner_inputs = [None, *saved[3 * depth: 4 * depth - 1]]
    weights = saved[4 * depth - 1:]
    steps, (batch, size) = hidden.size(0) - 1, hidden.shape[1:]
    split = gpu.split_products_for(kernels, grad_hidden[0])
    # g ↦ g W per level (W_hh^0, then [W_ih W_hh]^d)
    matrices = [weights[0], *weights[1::2]]
    products = None if split else [StepProduct(w.t().contiguous(), batch) for w in matrices]
    grad_memory = [g.contiguous() for g in grad_final_memories]   # e.g. sum()'s expanded gradient
    grad_pre = [torch.empty_like(g) for g in gates]   # gradients at the pre-activations
    grad_in, pre = _by_step(grad_hidden), [_by_step(a) for a in grad_pre]
    mem, squashed, gate = ([_by_step(a) for a in group] for group in (memories, tanh_memories, gates))
    last = depth - 1

    def product(level: int, step_grad: torch.Tensor, add: torch.Tensor | None = None):
        if split:
            return kernels.split_product(step_grad, matrices[level], add)
        return kernels.StepInput(products[level](step_grad, add=add))

    grad_h = kernels.StepInput(grad_hidden[steps - 1])
    for t in range(steps - 1, -1, -1):
        # down the levels: each output gate, and the gradient of each memory at step t + 1
        grad_out = grad_h
        for level in range(last - 1):
            grad_out = kernels.StepInput(kernels.nested_output_backward(grad_out, grad_memory[level], gate[level][t],
                                                                        squashed[level][t], pre[level][t]))
        grad_memory[last] = kernels.nested_innermost_backward(
            grad_out, grad_memory[last - 1], gate[last - 1][t], squashed[last - 1][t], pre[last - 1][t],
            grad_memory[last], gate[last][t], squashed[last][t], mem[last][t], pre[last][t])
        # up the levels: [x̃; h̃] of level d are i g and f c of level d - 1
        for level in range(last, 0, -1):
            grad_memory[level - 1] = kernels.nested_inner_input_backward(
                product(level, pre[level][t]), gate[level - 1][t], mem[level - 1][t], pre[level - 1][t],
                identity_g=level == 1)
        grad_h = product(0, pre[0][t], grad_in[t - 1] if t else None)
    weight_grads = [weight_grad(grad_pre[0], hidden[:-1])]
    for level in range(1, depth):
        weight_grads += [*weight_grad(grad_pre[level], inner_inputs[level]).chunk(2, dim=1),
                         grad_pre[level].sum(dim=(0, 1))]
    return (grad_pre[0], kernels.sum_product(grad_h), *grad_memory, *weight_grads)


class _Factors(NamedTuple):
    output_gate: torch.Tensor     # d pre_o / d out = tanh(c) σ'(o)
    through_output: torch.Tensor  # d c / d out = o tanh'(c)
    forget: torch.Tensor          # f: d c_prev (or h̃'s memory) / d c (or h̃)
    update: torch.Tensor | None   # innermost: rows i, f, g of d c / d pre = (g σ'(i), c_prev σ'(f), i g')
    inner_input: torch.Tensor | None   # outer levels: rows i, g from d x̃
    inner_hidden: torch.Tensor | None  # outer levels: row f from d h̃


def _backward_factors(level: int, depth: int, gates: torch.Tensor, memories: torch.Tensor,
                      tanh_memories: torch.Tensor) -> _Factors:
    """The factors of one level over the whole sequence (each (T, B, M), or stacked rows)."""
    i, f, g, o = gates.chunk(4, dim=2)
    # d(i g)/d pre_g: g is the identity at level 0, tanh inside
    through_g = i if level == 0 else tanh_grad(i, g)
    factors = dict(output_gate=sigmoid_grad(tanh_memories, o), through_output=tanh_grad(o, tanh_memories),
                   forget=f, update=None, inner_input=None, inner_hidden=None)
    if level == depth - 1:   # c = f c_prev + i g: rows i, f, g
        factors["update"] = torch.stack([sigmoid_grad(g, i), sigmoid_grad(memories[:-1], f), through_g], dim=2)
    else:                    # x̃ = i g (rows i, g) and h̃ = f c_prev (row f) feed the level below
        factors["inner_input"] = torch.stack([sigmoid_grad(g, i), through_g], dim=2)
        factors["inner_hidden"] = sigmoid_grad(memories[:-1], f)
    return _Factors(**factors)


def _by_step(tensor: torch.Tensor, start: int | None = None, stop: int | None = None) -> tuple[torch.Tensor, ...]:
    """tensor[t, ..., start:stop] for every step t: the loop's views, made in one call."""
    return (tensor if start is None else tensor[..., start:stop]).unbind(0)


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
