"""Gated recurrent unit (Cho et al., 2014) in its two parameterisations.

``gru`` -- torch.nn.GRU, the cuDNN form: the reset gate acts after the recurrent product and every
gate has two biases:

    r_t = σ(W_ir x_t + b_ir + W_hr h_{t-1} + b_hr)
    z_t = σ(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz)
    n_t = tanh(W_in x_t + b_in + r_t ⊙ (W_hn h_{t-1} + b_hn))
    h_t = z_t ⊙ h_{t-1} + (1 - z_t) ⊙ n_t

    parameters: 3M(N + M) + 6M.  Runs in the fused kernel; weight drop swaps ``rnn.weight_hh_l0``.

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
from .recurrence import (StepProduct, check_init, grad_or_zeros, sigmoid_grad, tanh_grad, uniform_init_,
                         weight_grad, xavier_uniform_, zero_state)


class _ResetBeforeGRURecurrence(torch.autograd.Function):
    """h_1..h_T of the single-bias GRU, given the hoisted input projections (T, B, 3M) and h_0."""

    @staticmethod
    def forward(ctx, projected: torch.Tensor, h0: torch.Tensor, weight_hh: torch.Tensor) -> torch.Tensor:
        gates, candidates, hidden = gpu.captured(_forward_loop, (projected, h0, weight_hh))
        ctx.save_for_backward(h0, weight_hh, gates, candidates, hidden)
        return hidden

    @staticmethod
    def backward(ctx, grad_hidden: torch.Tensor):
        h0, weight_hh, gates, candidates, hidden = ctx.saved_tensors
        grad_hidden = grad_or_zeros(grad_hidden, hidden)
        return gpu.captured(_backward_loop, (grad_hidden, h0, weight_hh, gates, candidates, hidden))


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
    h = h0.contiguous() if kernels is not None else h0   # the kernels read (B, M) rows
    for t in range(steps):
        if kernels is not None:   # GPU: the products, and one fused kernel after each
            gate_product(h, add=projected[t, :, : 2 * hidden_size], out=gates[t])
            reset_h = kernels.gru_gates(gates[t], h)
            candidate_product(reset_h, add=projected[t, :, 2 * hidden_size:], out=candidates[t])
            kernels.gru_update(candidates[t], gates[t], h, hidden[t])
            h = hidden[t]
            continue
        gate_product(h, add=projected[t, :, : 2 * hidden_size], out=gates[t]).sigmoid_()
        reset, update = gates[t].chunk(2, dim=1)
        candidate_product(reset * h, add=projected[t, :, 2 * hidden_size:], out=candidates[t]).tanh_()
        h = torch.lerp(candidates[t], h, update, out=hidden[t])  # u ⊙ h + (1 - u) ⊙ c
    return gates, candidates, hidden


def _backward_loop(grad_hidden, h0, weight_hh, gates, candidates, hidden):
    """dL/d(projections), dL/dh0, dL/dW_hh through the loop; on a GPU replayed from a CUDA graph."""
    hidden_size = h0.size(1)
    # g ↦ g U: through the gates' and the candidate's recurrent weights
    gate_product = StepProduct(weight_hh[: 2 * hidden_size].t().contiguous(), h0.size(0))
    candidate_product = StepProduct(weight_hh[2 * hidden_size:].t().contiguous(), h0.size(0))
    previous = torch.cat([h0.unsqueeze(0), hidden[:-1]])
    grad_projected = gates.new_empty(gates.size(0), gates.size(1), 3 * hidden_size)
    grad_h = torch.zeros_like(h0)
    kernels = gpu.kernels_for(grad_hidden, hidden, weight_hh)
    if kernels is not None:
        grad_hidden, grad_h = grad_hidden.contiguous(), grad_h.contiguous()  # the kernels read (B, M) rows
    for t in range(gates.size(0) - 1, -1, -1):
        if kernels is not None:   # GPU: the products, and one fused kernel before each
            grad_sum = kernels.gru_candidate_backward(grad_h, grad_hidden[t], gates[t], candidates[t],
                                                      grad_projected[t])
            grad_reset_h = candidate_product(grad_projected[t, :, 2 * hidden_size:])
            carry = kernels.gru_gates_backward(grad_sum, grad_reset_h, gates[t], previous[t], candidates[t],
                                               grad_projected[t])
            grad_h = gate_product(grad_projected[t, :, : 2 * hidden_size], add=carry)
            continue
        grad_h = grad_h + grad_hidden[t]
        reset, update = gates[t].chunk(2, dim=1)
        grad_candidate = tanh_grad(grad_h * (1 - update), candidates[t])
        grad_reset_h = candidate_product(grad_candidate)
        grad_gates = torch.cat([sigmoid_grad(grad_reset_h * previous[t], reset),
                                sigmoid_grad(grad_h * (previous[t] - candidates[t]), update)], dim=1)
        grad_projected[t] = torch.cat([grad_gates, grad_candidate], dim=1)
        grad_h = gate_product(grad_gates, add=grad_h * update + grad_reset_h * reset)
    reset_previous = gates[..., :hidden_size] * previous
    grad_weight_hh = torch.cat([weight_grad(grad_projected[..., : 2 * hidden_size], previous),
                                weight_grad(grad_projected[..., 2 * hidden_size:], reset_previous)])
    return grad_projected, grad_h, grad_weight_hh


def reset_before_gru_sequence(projected: torch.Tensor, h0: torch.Tensor, weight_hh: torch.Tensor) -> torch.Tensor:
    """Hidden states (T, B, M) of the single-bias GRU; ``projected`` = W x_t + b, rows r, u, c."""
    return _ResetBeforeGRURecurrence.apply(projected, h0, weight_hh)


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
