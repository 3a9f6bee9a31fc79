"""Gated recurrent unit (Cho et al., 2014) in its two parameterisations.

``gru`` -- torch.nn.GRU, the cuDNN form: the reset gate acts after the recurrent product and every
gate has two biases:

    r_t = σ(W_ir x_t + b_ir + W_hr h_{t-1} + b_hr)
    z_t = σ(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz)
    n_t = tanh(W_in x_t + b_in + r_t ⊙ (W_hn h_{t-1} + b_hn))
    h_t = z_t ⊙ h_{t-1} + (1 - z_t) ⊙ n_t

    parameters: 3M(N + M) + 6M.  Weight drop swaps ``rnn.weight_hh_l0``. On a GPU it runs in cuDNN's
    fused kernel. On a CPU torch has no fused GRU (oneDNN's serves nn.LSTM only) and records its loop of
    ATen operators step by step; here the same loop runs inside an autograd Function with a
    hand-written backward (``_ResetAfterGRURecurrence``): nn.GRU's outputs to the bit, its gradients to
    float32 rounding, 1.1-1.2x faster per training step at the cpu budget's sizes (docs/benchmarks.md).

``gru_single_bias`` -- the form of Cho et al. (2014; arXiv 1406.1078v3) as TensorFlow's GRUCell and
the LRN authors' GRUCell implement it: the reset gate acts on h_{t-1} *before* the recurrent product
and each gate has one bias:

    r_t = σ(W_r x_t + U_r h_{t-1} + b_r)
    u_t = σ(W_u x_t + U_u h_{t-1} + b_u)
    c_t = tanh(W_c x_t + U_c (r_t ⊙ h_{t-1}) + b_c)
    h_t = u_t ⊙ h_{t-1} + (1 - u_t) ⊙ c_t

    parameters: 3(NM + M^2 + M), stored as weight_ih (rows r, u, c; 3M x N), weight_hh (3M x M) and
    bias (3M).

The published Nested-LSTM comparison (Distill's autocomplete study, TensorFlow's GRUCell) and the LRN
paper (its own GRUCell) count exactly this: 2 layers of 600 units on a 600-d embedding give
2 x 3(600·600 + 600·600 + 600) = 4,323,600, where nn.GRU's second bias gives 4,327,200. (The count
alone would also fit a reset-after GRU without b_hn; the authors' code settles it as reset-before.)
It is also the GRU the Lattice Recurrent Unit is derived from (``lru.py`` reuses its recurrence).

``init`` (single-bias form): "uniform" (U(±1/√M) for every parameter) or "xavier", the LRN authors'
LM code: their gate matrix W ((N+M) x 2M, rows r, u here) and candidate matrix U ((N+M) x M, rows c)
each Xavier-uniform over its own shape, biases 0.

No fused kernel computes the reset-before form, so its recurrence is a hand-written autograd Function
(see ``recurrence.py``): W_r, W_u, W_c act on the whole sequence at once, the loop does the two
products with h_{t-1}.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from . import gpu
from .base import RecurrentLayer
from .recurrence import (StepProduct, check_init, grad_or_zeros, previous_states, sigmoid_grad, tanh_grad,
                         uniform_init_, weight_grad, xavier_uniform_, zero_state)


class _ResetBeforeGRURecurrence(torch.autograd.Function):
    """h_1..h_T of the single-bias GRU and its gates r, u (after the sigmoid), given the hoisted input
    projections (T, B, 3M) and h_0. The gates are an output so that the lattice units can reuse them."""

    @staticmethod
    def forward(ctx, projected: torch.Tensor, h0: torch.Tensor, weight_hh: torch.Tensor):
        gates, candidates, hidden = gpu.captured(_forward_loop, (projected, h0, weight_hh))
        ctx.save_for_backward(h0, weight_hh, gates, candidates, hidden)
        ctx.set_materialize_grads(False)  # unused gates: None, not zeros
        return hidden, gates

    @staticmethod
    def backward(ctx, grad_hidden: torch.Tensor, grad_gates: torch.Tensor | None):
        h0, weight_hh, gates, candidates, hidden = ctx.saved_tensors
        grad_hidden = grad_or_zeros(grad_hidden, hidden)
        if grad_gates is None:
            return gpu.captured(_backward_loop, (grad_hidden, h0, weight_hh, gates, candidates, hidden))
        return _backward_loop(grad_hidden, h0, weight_hh, gates, candidates, hidden, grad_gates)


def _forward_loop(projected: torch.Tensor, h0: torch.Tensor, weight_hh: torch.Tensor):
    """Gates r, u (after the sigmoid), candidates and h_1..h_T; on a GPU replayed from a CUDA graph."""
    hidden_size = h0.size(1)
    gate_product = StepProduct(weight_hh[: 2 * hidden_size], h0.size(0))          # h ↦ h U_{r,u}^T
    candidate_product = StepProduct(weight_hh[2 * hidden_size:], h0.size(0))     # r h ↦ (r h) U_c^T
    steps = projected.size(0)
    gates = projected.new_empty(steps, h0.size(0), 2 * hidden_size)  # r, u after the sigmoid
    candidates = projected.new_empty(steps, *h0.shape)
    hidden = torch.empty_like(candidates)
    kernels = gpu.kernels_for(projected, h0, weight_hh)
    if kernels is None:
        _eager_forward_loop(projected, h0, gate_product, candidate_product, gates, candidates, hidden)
        return gates, candidates, hidden
    h = h0.contiguous()   # the kernels read (B, M) rows
    for t in range(steps):   # the products, and one fused kernel after each
        gate_product(h, add=projected[t, :, : 2 * hidden_size], out=gates[t])
        reset_h = kernels.gru_gates(gates[t], h)
        candidate_product(reset_h, add=projected[t, :, 2 * hidden_size:], out=candidates[t])
        kernels.gru_update(candidates[t], gates[t], h, hidden[t])
        h = hidden[t]
    return gates, candidates, hidden


def _eager_forward_loop(projected, h0, gate_product, candidate_product, gates, candidates, hidden) -> None:
    """The eager loop: six operators a step, every step's views taken before it (at the cpu budget's
    sizes a step's time is mostly its operators' count, and Python's indexing costs as much as one)."""
    hidden_size = h0.size(1)
    projected_gates = projected[..., : 2 * hidden_size].unbind(0)
    projected_candidates = projected[..., 2 * hidden_size:].unbind(0)
    resets, updates = gates[..., :hidden_size].unbind(0), gates[..., hidden_size:].unbind(0)
    reset_h = torch.empty_like(h0)
    h = h0
    for t, (gates_t, candidate, hidden_t) in enumerate(zip(gates.unbind(0), candidates.unbind(0), hidden.unbind(0))):
        gate_product(h, add=projected_gates[t], out=gates_t).sigmoid_()
        candidate_product(torch.mul(resets[t], h, out=reset_h), add=projected_candidates[t], out=candidate).tanh_()
        h = torch.lerp(candidate, h, updates[t], out=hidden_t)  # u ⊙ h + (1 - u) ⊙ c


def _backward_loop(grad_hidden, h0, weight_hh, gates, candidates, hidden, grad_gates=None):
    """dL/d(projections), dL/dh0, dL/dW_hh through the loop; on a GPU replayed from a CUDA graph.
    ``grad_gates``: dL/d(r, u) from a use of the gates outside the recurrence (the eager loop adds it)."""
    hidden_size = h0.size(1)
    # g ↦ g U: through the gates' and the candidate's recurrent weights
    gate_product = StepProduct(weight_hh[: 2 * hidden_size].t().contiguous(), h0.size(0))
    candidate_product = StepProduct(weight_hh[2 * hidden_size:].t().contiguous(), h0.size(0))
    previous = previous_states(h0, hidden)
    grad_projected = gates.new_empty(gates.size(0), gates.size(1), 3 * hidden_size)
    kernels = gpu.kernels_for(grad_hidden, hidden, weight_hh)
    if kernels is None or grad_gates is not None:
        grad_h = _eager_backward_loop(grad_hidden, h0, gate_product, candidate_product, gates, candidates, previous,
                                      grad_projected, grad_gates)
    else:
        grad_hidden, grad_h = grad_hidden.contiguous(), torch.zeros_like(h0).contiguous()  # (B, M) rows
        for t in range(gates.size(0) - 1, -1, -1):   # the products, and one fused kernel before each
            grad_sum = kernels.gru_candidate_backward(grad_h, grad_hidden[t], gates[t], candidates[t],
                                                      grad_projected[t])
            grad_reset_h = candidate_product(grad_projected[t, :, 2 * hidden_size:])
            carry = kernels.gru_gates_backward(grad_sum, grad_reset_h, gates[t], previous[t], candidates[t],
                                               grad_projected[t])
            grad_h = gate_product(grad_projected[t, :, : 2 * hidden_size], add=carry)
    reset_previous = gates[..., :hidden_size] * previous
    grad_weight_hh = torch.cat([weight_grad(grad_projected[..., : 2 * hidden_size], previous),
                                weight_grad(grad_projected[..., 2 * hidden_size:], reset_previous)])
    return grad_projected, grad_h, grad_weight_hh


def _eager_backward_loop(grad_hidden, h0, gate_product, candidate_product, gates, candidates, previous,
                         grad_projected, grad_gates=None) -> torch.Tensor:
    """The eager backward loop; returns dL/dh0. Each gradient is written straight into its slice of
    ``grad_projected`` (no concatenation), and what does not depend on the carried gradient, 1 - u
    and h_{t-1} - c_t, is formed for all steps at once: the same operators on the same numbers as
    a step-by-step formula, so the same results to the bit. A gradient reaching the gates from outside
    (``grad_gates``) is taken through their sigmoid for all steps at once and added at each step."""
    hidden_size = h0.size(1)
    resets, updates = gates[..., :hidden_size].unbind(0), gates[..., hidden_size:].unbind(0)
    complements = (1 - gates[..., hidden_size:]).unbind(0)            # 1 - u
    differences = (previous - candidates).unbind(0)                     # h_{t-1} - c_t
    outside = None if grad_gates is None else sigmoid_grad(grad_gates, gates).unbind(0)
    grad_gate_rows = grad_projected[..., : 2 * hidden_size].unbind(0)
    grad_resets = grad_projected[..., :hidden_size].unbind(0)
    grad_updates = grad_projected[..., hidden_size: 2 * hidden_size].unbind(0)
    grad_candidates = grad_projected[..., 2 * hidden_size:].unbind(0)
    previous, candidates, grad_hidden = previous.unbind(0), candidates.unbind(0), grad_hidden.unbind(0)
    grad_h = torch.zeros_like(h0)
    for t in range(len(resets) - 1, -1, -1):
        grad_h = grad_h + grad_hidden[t]
        grad_candidate = tanh_grad(grad_h * complements[t], candidates[t], out=grad_candidates[t])
        grad_reset_h = candidate_product(grad_candidate)
        sigmoid_grad(grad_reset_h * previous[t], resets[t], out=grad_resets[t])
        sigmoid_grad(grad_h * differences[t], updates[t], out=grad_updates[t])
        if outside is not None:
            grad_gate_rows[t].add_(outside[t])
        grad_h = gate_product(grad_gate_rows[t], add=grad_h * updates[t] + grad_reset_h * resets[t])
    return grad_h


def reset_before_gru_sequence(projected: torch.Tensor, h0: torch.Tensor, weight_hh: torch.Tensor) -> torch.Tensor:
    """Hidden states (T, B, M) of the single-bias GRU; ``projected`` = W x_t + b, rows r, u, c."""
    return _ResetBeforeGRURecurrence.apply(projected, h0, weight_hh)[0]


def reset_before_gru_sequence_and_gates(projected: torch.Tensor, h0: torch.Tensor,
                                        weight_hh: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Hidden states (T, B, M) and gates r, u after the sigmoid (T, B, 2M) of the single-bias GRU."""
    return _ResetBeforeGRURecurrence.apply(projected, h0, weight_hh)


class _ResetAfterGRURecurrence(torch.autograd.Function):
    """h_1..h_T of nn.GRU's form, given the input projections W_i x_t + b_i (T, B, 3M), h_0, W_h, b_h.

    The forward takes the operators of torch's own CPU loop in their order (aten/src/ATen/native/RNN.cpp,
    GRUCell with the input projections precomputed), so the hidden states are nn.GRU's to the bit. The
    backward is written by hand: autograd's backward of that loop spends most of its time in one small
    weight-gradient product per step and per-node overhead; here the loop carries dL/dh only, and
    dL/dW_h and dL/db_h are formed after it over all steps at once (the same sums in another order,
    so equal to float32 rounding, not to the bit)."""

    @staticmethod
    def forward(ctx, projected, h0, weight_hh, bias_hh):
        hidden_size = h0.size(1)
        steps = projected.size(0)
        # W_h h_{t-1} + b_h per step, rows r, z, n; rows r, z then hold the gates after the sigmoid
        recurrent = projected.new_empty(steps, h0.size(0), 3 * hidden_size)
        candidates = projected.new_empty(steps, *h0.shape)
        hidden = torch.empty_like(candidates)
        weight_t = weight_hh.t()
        projected_gates = projected[..., : 2 * hidden_size].unbind(0)
        projected_candidates = projected[..., 2 * hidden_size:].unbind(0)
        rows, gates = recurrent.unbind(0), recurrent[..., : 2 * hidden_size].unbind(0)
        resets = recurrent[..., :hidden_size].unbind(0)
        updates = recurrent[..., hidden_size: 2 * hidden_size].unbind(0)
        recurrent_candidates = recurrent[..., 2 * hidden_size:].unbind(0)
        candidate_steps, hidden_steps = candidates.unbind(0), hidden.unbind(0)
        h = h0
        for t in range(steps):
            torch.addmm(bias_hh, h, weight_t, out=rows[t])
            gates[t].add_(projected_gates[t])
            resets[t].sigmoid_()   # r and z apart, as torch does: its kernels split rows of M elements
            updates[t].sigmoid_()  # between vector and scalar code, and tanh, sigmoid differ in the last bit
            candidate = torch.mul(recurrent_candidates[t], resets[t], out=candidate_steps[t])
            candidate.add_(projected_candidates[t]).tanh_()
            h = torch.sub(h, candidate, out=hidden_steps[t]).mul_(updates[t]).add_(candidate)  # n + z ⊙ (h - n)
        ctx.save_for_backward(h0, weight_hh, recurrent, candidates, hidden)
        return hidden

    @staticmethod
    def backward(ctx, grad_hidden):
        h0, weight_hh, recurrent, candidates, hidden = ctx.saved_tensors
        grad_hidden = grad_or_zeros(grad_hidden, hidden).unbind(0)
        hidden_size = h0.size(1)
        steps = recurrent.size(0)
        previous = previous_states(h0, hidden)
        resets = recurrent[..., :hidden_size].unbind(0)
        updates = recurrent[..., hidden_size: 2 * hidden_size].unbind(0)
        recurrent_candidates = recurrent[..., 2 * hidden_size:].unbind(0)
        complements = (1 - recurrent[..., hidden_size: 2 * hidden_size]).unbind(0)   # 1 - z
        differences = (previous - candidates).unbind(0)                              # h_{t-1} - n_t
        # per step: dL/d(r, z, W_hn h + b_hn) -- the gradient at W_h h + b_h -- then dL/d(W_in x + b_in)
        grad_rows = recurrent.new_empty(steps, h0.size(0), 4 * hidden_size)
        grad_recurrent = grad_rows[..., : 3 * hidden_size].unbind(0)
        grad_resets = grad_rows[..., :hidden_size].unbind(0)
        grad_updates = grad_rows[..., hidden_size: 2 * hidden_size].unbind(0)
        grad_recurrent_candidates = grad_rows[..., 2 * hidden_size: 3 * hidden_size].unbind(0)
        grad_candidates = grad_rows[..., 3 * hidden_size:].unbind(0)
        candidates = candidates.unbind(0)
        grad_h = torch.zeros_like(h0)
        for t in range(steps - 1, -1, -1):
            grad_h = grad_h + grad_hidden[t]
            grad_candidate = tanh_grad(grad_h * complements[t], candidates[t], out=grad_candidates[t])
            torch.mul(grad_candidate, resets[t], out=grad_recurrent_candidates[t])
            sigmoid_grad(grad_candidate * recurrent_candidates[t], resets[t], out=grad_resets[t])
            sigmoid_grad(grad_h * differences[t], updates[t], out=grad_updates[t])
            grad_h = torch.addmm(grad_h * updates[t], grad_recurrent[t], weight_hh)
        grad_projected = torch.cat([grad_rows[..., : 2 * hidden_size], grad_rows[..., 3 * hidden_size:]], dim=2)
        grad_recurrent = grad_rows[..., : 3 * hidden_size]
        return grad_projected, grad_h, weight_grad(grad_recurrent, previous), grad_recurrent.sum((0, 1))


def reset_after_gru_sequence(projected: torch.Tensor, h0: torch.Tensor, weight_hh: torch.Tensor,
                             bias_hh: torch.Tensor) -> torch.Tensor:
    """Hidden states (T, B, M) of nn.GRU; ``projected`` = W_i x + b_i, rows r, z, n."""
    return _ResetAfterGRURecurrence.apply(projected, h0, weight_hh, bias_hh)


class GRULayer(RecurrentLayer):
    """nn.GRU (two biases, reset after the product); state h (B, M)."""

    recurrent_weight_names = ("rnn.weight_hh_l0",)

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__(input_size, hidden_size)
        self.rnn = nn.GRU(input_size, hidden_size)

    @staticmethod
    def parameter_count(input_size: int, hidden_size: int) -> int:
        return 3 * hidden_size * (input_size + hidden_size) + 6 * hidden_size

    def init_state(self, batch_size: int, device=None, dtype=None) -> torch.Tensor:
        return zero_state(self.rnn.weight_hh_l0, batch_size, self.hidden_size, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor, state: torch.Tensor):
        if x.device.type == "cpu" and not torch.is_autocast_enabled("cpu"):
            # nn.GRU's own numbers with a faster backward (_ResetAfterGRURecurrence); under bfloat16
            # autocast nn.GRU, whose loop autograd records, takes the mixed precisions
            projected = F.linear(x, self.rnn.weight_ih_l0, self.rnn.bias_ih_l0)
            hidden = reset_after_gru_sequence(projected, state, self.rnn.weight_hh_l0, self.rnn.bias_hh_l0)
            return hidden, hidden[-1]
        y, h = self.rnn(x, state.unsqueeze(0))  # nn.GRU wants (layers, B, M)
        return y, h.squeeze(0)


class SingleBiasGRULayer(RecurrentLayer):
    """Single-bias GRU with the reset gate before the recurrent product; state h (B, M)."""

    recurrent_weight_names = ("weight_hh",)

    def __init__(self, input_size: int, hidden_size: int, init: str = "uniform"):
        super().__init__(input_size, hidden_size)
        check_init("gru_single_bias", init)
        self.weight_ih = nn.Parameter(torch.empty(3 * hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(3 * hidden_size, hidden_size))
        self.bias = nn.Parameter(torch.empty(3 * hidden_size))
        uniform_init_(self, hidden_size)
        if init == "xavier":
            gates, candidate = slice(0, 2 * hidden_size), slice(2 * hidden_size, 3 * hidden_size)
            with torch.no_grad():
                for weight in (self.weight_ih, self.weight_hh):
                    xavier_uniform_(weight[gates], input_size + hidden_size + 2 * hidden_size)
                    xavier_uniform_(weight[candidate], input_size + hidden_size + hidden_size)
            nn.init.zeros_(self.bias)

    @staticmethod
    def parameter_count(input_size: int, hidden_size: int) -> int:
        return 3 * (input_size * hidden_size + hidden_size * hidden_size + hidden_size)

    def init_state(self, batch_size: int, device=None, dtype=None) -> torch.Tensor:
        return zero_state(self.weight_hh, batch_size, self.hidden_size, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor, state: torch.Tensor):
        hidden = reset_before_gru_sequence(F.linear(x, self.weight_ih, self.bias), state, self.weight_hh)
        return hidden, hidden[-1]
