"""Lattice Recurrent Units (Ahuja & Morency, 2017, arXiv 1710.02254): PS-LRU, RG-LRU and LRU.

A lattice unit has two inputs and two distinct outputs: x (from the layer below, the depth flow) and
h (from the previous step, the time flow). The family is built by decoupling the weights of the GRU
(Cho form, see ``gru.py``) along the two directions, one component at a time, and keeping the unit
symmetric under swapping x and h:

    time output   h'  = u   ⊙ h + (1 - u)   ⊙ tanh(W_c x + U_c (r ⊙ h) + b_c)
    depth output  x'  = u_d ⊙ x + (1 - u_d) ⊙ tanh(V_c h + Q_c (q ⊙ x) + d_c)
    gates         [r; u] = σ(W_g x + U_g h + b_g),    [u_d; q] as needed from their own weights

- PS-LRU (projected state decoupled): the depth output has its own projected state (V_c, Q_c, d_c);
  the gates stay shared: q = r, u_d = u.
- RG-LRU (+ reset gate decoupled): q = σ(W_q x + U_q h + b_q) of its own; u_d = u.
- LRU (+ update gate decoupled): u_d = σ(W_ud x + U_ud h + b_ud) of its own as well.

So the time output of every variant *is* a GRU over the depth input: it runs in the single-bias GRU
recurrence of ``gru.py``, and the depth output, which never feeds back in time, is computed for all
steps at once afterwards from x and the shifted time outputs. The gates it shares with the time
output (PS-LRU's r and u, RG-LRU's u) are on a CPU those the recurrence computed, which saves PS-LRU a
third of its products; on a GPU, whose fused backward takes no gradient into them, they are recomputed
in one product. The layer returns the depth outputs as y (they feed the next layer) and carries the
last time output as its state h (B, M). Since x is carried through u_d, the input size must equal the
hidden size (the authors embed straight to it).

Parameters, with g = 2, 3, 4 gates for PS-LRU, RG-LRU, LRU: (g + 2)(2M^2 + M) -- each gate and each
projected state reads [x; h] (2M inputs) with one bias, as the authors' code (nn.Linear(2M, .) on the
concatenation): PS-LRU 8M^2 + 4M, RG-LRU 10M^2 + 5M, LRU 12M^2 + 6M.

Points where we depart from the authors' notation, not their model: (1) the update gates are keep
gates, u = 1 - z (the paper and code weight the new state by z; the GRU of TensorFlow and of the
LRN/Distill code weight the old one, and we share that recurrence) -- the same unit with the sign of
the gate's pre-activation flipped; (2) gate rows are stored split by the direction they read
(weight_ih on x, weight_hh on h) so the x halves are hoisted and weight drop can take the h halves.
Weight drop takes every matrix that multiplies h: weight_hh, depth_candidate_weight_hh and, where
present, depth_gate_weight_hh.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .base import RecurrentLayer
from .gru import reset_before_gru_sequence, reset_before_gru_sequence_and_gates
from .recurrence import previous_states, require_equal_sizes, uniform_init_, zero_state


def plus_product(total: torch.Tensor, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """total + x W^T for all steps (T, B, .) as one torch.addmm, which adds ``total`` to the finished
    product: the same numbers as a separate sum, without its pass over the sequence (which does not
    stay in the cache)."""
    return torch.addmm(total.flatten(0, 1), x.flatten(0, 1), weight.t()).view_as(total)


class _LatticeGRULayer(RecurrentLayer):
    """Shared body of the three variants; a subclass says which gates the depth output owns."""

    #: gates the depth output does not share with the time output (0: PS-LRU, 1: RG-LRU, 2: LRU)
    decoupled_gates = 0
    cell_id = ""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__(input_size, hidden_size)
        require_equal_sizes(self.cell_id, input_size, hidden_size)
        m = hidden_size
        # time direction: the GRU, rows r, u, c
        self.weight_ih = nn.Parameter(torch.empty(3 * m, m))
        self.weight_hh = nn.Parameter(torch.empty(3 * m, m))
        self.bias = nn.Parameter(torch.empty(3 * m))
        # depth direction: its projected state (Q_c on q ⊙ x, V_c on h) and its own gates
        self.depth_candidate_weight_ih = nn.Parameter(torch.empty(m, m))
        self.depth_candidate_weight_hh = nn.Parameter(torch.empty(m, m))
        self.depth_candidate_bias = nn.Parameter(torch.empty(m))
        names = ["weight_hh", "depth_candidate_weight_hh"]
        if self.decoupled_gates:
            self.depth_gate_weight_ih = nn.Parameter(torch.empty(self.decoupled_gates * m, m))
            self.depth_gate_weight_hh = nn.Parameter(torch.empty(self.decoupled_gates * m, m))
            self.depth_gate_bias = nn.Parameter(torch.empty(self.decoupled_gates * m))
            names.append("depth_gate_weight_hh")
        self.recurrent_weight_names = tuple(names)
        uniform_init_(self, hidden_size)

    @classmethod
    def parameter_count(cls, input_size: int, hidden_size: int) -> int:
        gates = 2 + cls.decoupled_gates
        return (gates + 2) * (2 * hidden_size * hidden_size + hidden_size)

    def init_state(self, batch_size: int, device=None, dtype=None) -> torch.Tensor:
        return zero_state(self.weight_hh, batch_size, self.hidden_size, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor, state: torch.Tensor):
        projected = F.linear(x, self.weight_ih, self.bias)
        if x.device.type == "cpu":
            time, time_gates = reset_before_gru_sequence_and_gates(projected, state, self.weight_hh)
        else:   # the GPU's fused backward takes no gradient into the gates: they are recomputed instead
            time, time_gates = reset_before_gru_sequence(projected, state, self.weight_hh), None
        previous = previous_states(state, time)
        keep, reset = self.depth_gates(x, previous, time_gates)
        recurrent = F.linear(previous, self.depth_candidate_weight_hh, self.depth_candidate_bias)
        candidate = torch.tanh(plus_product(recurrent, reset * x, self.depth_candidate_weight_ih))
        return torch.lerp(candidate, x, keep), time[-1]  # u_d ⊙ x + (1 - u_d) ⊙ candidate

    def gru_gates(self, x: torch.Tensor, previous: torch.Tensor, time_gates: torch.Tensor | None,
                  rows: slice) -> torch.Tensor:
        """The time GRU's gate rows (r: 0:M, u: M:2M) for all steps: those the recurrence computed, or
        without them recomputed in one product (on a CPU, a third of PS-LRU's products)."""
        if time_gates is not None:   # all of them as they are: a slice's gradient is a zero-filled copy
            return time_gates if rows.stop - rows.start == time_gates.size(-1) else time_gates[..., rows]
        return torch.sigmoid(F.linear(x, self.weight_ih[rows], self.bias[rows])
                             + F.linear(previous, self.weight_hh[rows]))

    def own_gates(self, x: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(plus_product(F.linear(x, self.depth_gate_weight_ih, self.depth_gate_bias),
                                          previous, self.depth_gate_weight_hh))

    def depth_gates(self, x: torch.Tensor, previous: torch.Tensor,
                    time_gates: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """(u_d, q): the depth output's keep gate and the reset gate applied to x; ``time_gates``: the
        time GRU's r, u from its recurrence (T, B, 2M), or None to recompute those it shares."""
        raise NotImplementedError


class PSLRULayer(_LatticeGRULayer):
    """Projected State LRU: the depth output shares both gates with the time output."""

    cell_id = "ps_lru"
    decoupled_gates = 0

    def depth_gates(self, x, previous, time_gates):
        reset, keep = self.gru_gates(x, previous, time_gates, slice(0, 2 * self.hidden_size)).chunk(2, dim=2)
        return keep, reset


class RGLRULayer(_LatticeGRULayer):
    """Reset Gate LRU: the depth output has its own reset gate q (depth_gate_* rows)."""

    cell_id = "rg_lru"
    decoupled_gates = 1

    def depth_gates(self, x, previous, time_gates):
        keep = self.gru_gates(x, previous, time_gates, slice(self.hidden_size, 2 * self.hidden_size))
        return keep, self.own_gates(x, previous)


class LRULayer(_LatticeGRULayer):
    """LRU: the depth output has its own keep gate u_d and reset gate q (depth_gate_* rows u_d, q)."""

    cell_id = "lru"
    decoupled_gates = 2

    def depth_gates(self, x, previous, time_gates):
        keep, reset = self.own_gates(x, previous).chunk(2, dim=2)
        return keep, reset
