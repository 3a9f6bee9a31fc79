"""Simple recurrent unit, SRU (Lei, Zhang, Wang, Dai & Artzi, EMNLP 2018), with its highway output.

    x̃_t = W x_t + b,   f_t = σ(W_f x_t + v_f ⊙ c_{t-1} + b_f)
    c_t = f_t ⊙ c_{t-1} + (1 - f_t) ⊙ x̃_t
    r_t = σ(W_r x_t + v_r ⊙ c_{t-1} + b_r)
    h_t = r_t ⊙ c_t + (1 - r_t) ⊙ (W_s x_t + b_s)      (highway connection)

State: c (B, M) -- h_t is not fed back. Parameters: 4NM + 4M + 2M (weight_ih rows f, x̃, r, s;
bias; v_f and v_r).

Where the references differ: Lei et al. (paper and code) carry x_t itself on the highway when N = M
(a projection W_s only when the sizes differ), put no bias on x̃, and by default multiply the
highway input by a variance-preserving constant (the paper's scaling correction). The
SRU of the LRN authors' code, which the LRN paper compares against (our ``lrn`` study), always
projects the highway input and gives each of the four products a bias; with it their PTB LM (280 ->
960 -> 960 -> 620, MoS decoder) has the 13M parameters the paper reports (Lei's form: 12M). We follow
the LRN code.

All four products act on x only, so they are one matrix product over the whole sequence; the loop is
the elementwise c recurrence, and r_t, h_t are computed for all steps at once after it.

``init``: "uniform" (U(±1/√M) for every parameter) or "xavier", the LRN authors' LM code: the N x 4M
matrix Xavier-uniform, biases 0, v_f = v_r = 1.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from . import gpu
from .base import RecurrentLayer
from .recurrence import (check_init, grad_or_zeros, previous_states, sigmoid_grad, uniform_init_, xavier_uniform_,
                         zero_state)


class _SRUMemoryRecurrence(torch.autograd.Function):
    """c_1..c_T given W_f x_t + b_f and x̃_t for all steps (T, B, M each), v_f (M) and c_0."""

    @staticmethod
    def forward(ctx, forget_input: torch.Tensor, candidate: torch.Tensor, forget_weight: torch.Tensor,
                c0: torch.Tensor) -> torch.Tensor:
        kernels = gpu.kernels_for(forget_input, candidate, forget_weight, c0)
        if kernels is not None:  # GPU: the whole loop is one Triton scan
            memory, forget_gates = kernels.sru_forward(forget_input, candidate, forget_weight, c0)
        else:
            memory = candidate.new_empty(candidate.size(0) + 1, *c0.shape)
            forget_gates = torch.empty_like(candidate)
            memory[0] = c0
            for t in range(candidate.size(0)):
                torch.sigmoid(torch.addcmul(forget_input[t], forget_weight, memory[t]), out=forget_gates[t])
                torch.lerp(candidate[t], memory[t], forget_gates[t], out=memory[t + 1])  # f c + (1 - f) x̃
        ctx.save_for_backward(candidate, forget_weight, memory, forget_gates)
        return memory[1:]

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        candidate, forget_weight, memory, forget_gates = ctx.saved_tensors
        grad_output = grad_or_zeros(grad_output, candidate)
        kernels = gpu.kernels_for(grad_output, candidate, memory)
        if kernels is not None:
            return kernels.sru_backward(grad_output, candidate, forget_weight, memory, forget_gates)
        grad_forget, grad_candidate = torch.empty_like(candidate), torch.empty_like(candidate)
        grad_c = torch.zeros_like(memory[0])
        for t in range(candidate.size(0) - 1, -1, -1):
            grad_c = grad_c + grad_output[t]
            grad_forget[t] = sigmoid_grad(grad_c * (memory[t] - candidate[t]), forget_gates[t])
            torch.mul(grad_c, 1 - forget_gates[t], out=grad_candidate[t])
            grad_c = grad_c * forget_gates[t] + grad_forget[t] * forget_weight
        grad_forget_weight = (grad_forget * memory[:-1]).sum(dim=(0, 1))
        return grad_forget, grad_candidate, grad_forget_weight, grad_c


class SRULayer(RecurrentLayer):
    """SRU layer, input (T, B, N) -> output (T, B, M); state c (B, M). No hidden-to-hidden matrices."""

    def __init__(self, input_size: int, hidden_size: int, init: str = "uniform"):
        super().__init__(input_size, hidden_size)
        check_init("sru", init)
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden_size, input_size))
        self.bias = nn.Parameter(torch.empty(4 * hidden_size))
        self.forget_weight = nn.Parameter(torch.empty(hidden_size))   # v_f
        self.reset_weight = nn.Parameter(torch.empty(hidden_size))    # v_r
        uniform_init_(self, hidden_size)
        if init == "xavier":
            xavier_uniform_(self.weight_ih, input_size + 4 * hidden_size)
            nn.init.zeros_(self.bias)
            nn.init.ones_(self.forget_weight)
            nn.init.ones_(self.reset_weight)

    @staticmethod
    def parameter_count(input_size: int, hidden_size: int) -> int:
        return 4 * input_size * hidden_size + 6 * hidden_size

    def init_state(self, batch_size: int, device=None, dtype=None) -> torch.Tensor:
        return zero_state(self.weight_ih, batch_size, self.hidden_size, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor, state: torch.Tensor):
        forget_input, candidate, reset_input, highway = F.linear(x, self.weight_ih, self.bias).chunk(4, dim=2)
        memory = _SRUMemoryRecurrence.apply(forget_input, candidate, self.forget_weight, state)
        previous = previous_states(state, memory)
        reset = torch.sigmoid(torch.addcmul(reset_input, self.reset_weight, previous))
        return torch.lerp(highway, memory, reset), memory[-1]  # r ⊙ c + (1 - r) ⊙ highway
