"""Triton kernels for the element-wise recurrences: whole-sequence scans (LRN, SRU) and fused steps (ATR,
the PRU's LSTM gating, the single-bias GRU, RHN).

Imported only through :mod:`rnnrepro.cells.gpu` when Triton is installed (it ships with CUDA builds of
torch, not with CPU ones). Each kernel computes exactly the quantities the cell's eager loop computes
(the same saved activations, the same gradients), so the cell's autograd Function keeps one backward
formula and only swaps the loop that evaluates it.

Scans (LRN, SRU): one program owns ``BLOCK`` lanes of the (B, M) state and walks the whole sequence,
forward or backward, with the state held in registers: one kernel launch per layer and direction
instead of ~5 launches per step. The lanes are independent because both recurrences are element-wise.

Fused steps (ATR, PRU, GRU, RHN): a step needs ``U h_{t-1}`` (a cuBLAS product) before its gates, so the sequence
cannot be one element-wise kernel; the product stays a ``torch.addmm`` / ``torch.baddbmm`` and everything
else of the step (ATR: two sigmoids, the twin-gate combination and the tanh; PRU: the LSTM gating, ~10
operators; GRU: the gates and r ⊙ h, then the candidate and the update; RHN: a micro-layer's gates and
highway update), or its derivative, is one kernel per product.

Every input is a (T, B, M)-shaped view whose last dimension is contiguous; views into the packed
projections are passed with their strides, not copied. ``tanh`` is written through ``exp`` because
Triton's interpreter (``TRITON_INTERPRET=1``, used by the CPU tests) has no libdevice.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

#: lanes per program; small, so that a (20 x 1150) state spreads over ~180 programs (an H100 has 132 SMs)
BLOCK = 128


@triton.jit
def _tanh(x):
    return 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)


def _grid(lanes: int):
    return (triton.cdiv(lanes, BLOCK),)


def _step_strides(t: torch.Tensor) -> tuple[int, int]:
    assert t.stride(-1) == 1, "kernels need a contiguous last dimension"
    return t.stride(0), t.stride(1)


# ---------------------------------------------------------------- LRN
@triton.jit
def _lrn_forward_kernel(proj, s_pt, s_pb, h0, hidden, in_gates, fg_gates, T, B, M,
                        TANH: tl.constexpr, BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < B * M
    b = lanes // M
    m = lanes % M
    base = b * s_pb + m
    h = tl.load(h0 + lanes, mask=mask)
    tl.store(hidden + lanes, h, mask=mask)
    for t in range(T):
        row = proj + t * s_pt + base
        q = tl.load(row, mask=mask)
        k = tl.load(row + M, mask=mask)
        v = tl.load(row + 2 * M, mask=mask)
        i = tl.sigmoid(k + h)
        f = tl.sigmoid(q - h)
        h = i * v + f * h
        if TANH:
            h = _tanh(h)
        out = t * B * M + lanes
        tl.store(in_gates + out, i, mask=mask)
        tl.store(fg_gates + out, f, mask=mask)
        tl.store(hidden + out + B * M, h, mask=mask)


@triton.jit
def _lrn_backward_kernel(grad_out, value, s_vt, s_vb, hidden, in_gates, fg_gates, grad_proj, grad_h0, T, B, M,
                         TANH: tl.constexpr, BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < B * M
    b = lanes // M
    m = lanes % M
    base = b * s_vb + m
    grad_base = b * 3 * M + m
    grad_h = tl.zeros([BLOCK], dtype=grad_h0.dtype.element_ty)
    for step in range(T):
        t = T - 1 - step
        at = t * B * M + lanes
        grad_sum = grad_h + tl.load(grad_out + at, mask=mask)
        if TANH:
            h_next = tl.load(hidden + at + B * M, mask=mask)
            grad_sum = grad_sum * (1.0 - h_next * h_next)
        i = tl.load(in_gates + at, mask=mask)
        f = tl.load(fg_gates + at, mask=mask)
        h_prev = tl.load(hidden + at, mask=mask)
        v = tl.load(value + t * s_vt + base, mask=mask)
        grad_k = grad_sum * v * i * (1.0 - i)
        grad_q = grad_sum * h_prev * f * (1.0 - f)
        row = grad_proj + t * B * 3 * M + grad_base
        tl.store(row, grad_q, mask=mask)
        tl.store(row + M, grad_k, mask=mask)
        tl.store(row + 2 * M, grad_sum * i, mask=mask)
        grad_h = grad_sum * f + grad_k - grad_q
    tl.store(grad_h0 + lanes, grad_h, mask=mask)


def lrn_forward(projected: torch.Tensor, h0: torch.Tensor, tanh_output: bool):
    """(hidden (T+1, B, M) with h0 first, input gates, forget gates) of the LRN loop."""
    T, B, M = projected.size(0), h0.size(0), h0.size(1)
    hidden = projected.new_empty(T + 1, B, M)
    in_gates, fg_gates = projected.new_empty(T, B, M), projected.new_empty(T, B, M)
    _lrn_forward_kernel[_grid(B * M)](projected, *_step_strides(projected), h0.contiguous(), hidden, in_gates,
                                      fg_gates, T, B, M, TANH=tanh_output, BLOCK=BLOCK)
    return hidden, in_gates, fg_gates


def lrn_backward(grad_output, value, hidden, in_gates, fg_gates, tanh_output: bool):
    """(dL/d[q; k; v] (T, B, 3M), dL/dh0) of the LRN loop; ``value`` is v_t (T, B, M), a view is fine."""
    T, B, M = in_gates.shape
    grad_proj = value.new_empty(T, B, 3 * M)
    grad_h0 = hidden.new_empty(B, M)
    _lrn_backward_kernel[_grid(B * M)](grad_output.contiguous(), value, *_step_strides(value), hidden,
                                       in_gates, fg_gates, grad_proj, grad_h0, T, B, M, TANH=tanh_output,
                                       BLOCK=BLOCK)
    return grad_proj, grad_h0


# ---------------------------------------------------------------- SRU
@triton.jit
def _sru_forward_kernel(forget_in, candidate, s_pt, s_pb, forget_weight, c0, memory, fg_gates, T, B, M,
                        BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < B * M
    b = lanes // M
    m = lanes % M
    base = b * s_pb + m
    v_f = tl.load(forget_weight + m, mask=mask)
    c = tl.load(c0 + lanes, mask=mask)
    tl.store(memory + lanes, c, mask=mask)
    for t in range(T):
        x_f = tl.load(forget_in + t * s_pt + base, mask=mask)
        x_c = tl.load(candidate + t * s_pt + base, mask=mask)
        f = tl.sigmoid(x_f + v_f * c)
        c = x_c + f * (c - x_c)                        # f c + (1 - f) x̃
        out = t * B * M + lanes
        tl.store(fg_gates + out, f, mask=mask)
        tl.store(memory + out + B * M, c, mask=mask)


@triton.jit
def _sru_backward_kernel(grad_out, candidate, s_pt, s_pb, forget_weight, memory, fg_gates, grad_forget,
                         grad_candidate, grad_weight_lanes, grad_c0, T, B, M, BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < B * M
    b = lanes // M
    m = lanes % M
    base = b * s_pb + m
    v_f = tl.load(forget_weight + m, mask=mask)
    grad_c = tl.zeros([BLOCK], dtype=grad_c0.dtype.element_ty)
    grad_v = tl.zeros([BLOCK], dtype=grad_c0.dtype.element_ty)
    for step in range(T):
        t = T - 1 - step
        at = t * B * M + lanes
        grad_c = grad_c + tl.load(grad_out + at, mask=mask)
        f = tl.load(fg_gates + at, mask=mask)
        c_prev = tl.load(memory + at, mask=mask)
        x_c = tl.load(candidate + t * s_pt + base, mask=mask)
        grad_f = grad_c * (c_prev - x_c) * f * (1.0 - f)
        tl.store(grad_forget + at, grad_f, mask=mask)
        tl.store(grad_candidate + at, grad_c * (1.0 - f), mask=mask)
        grad_v += grad_f * c_prev
        grad_c = grad_c * f + grad_f * v_f
    tl.store(grad_c0 + lanes, grad_c, mask=mask)
    tl.store(grad_weight_lanes + lanes, grad_v, mask=mask)


def sru_forward(forget_input: torch.Tensor, candidate: torch.Tensor, forget_weight: torch.Tensor, c0: torch.Tensor):
    """(memory (T+1, B, M) with c0 first, forget gates) of the SRU loop; the inputs share one layout."""
    assert forget_input.stride() == candidate.stride()
    T, B, M = candidate.shape
    memory = candidate.new_empty(T + 1, B, M)
    fg_gates = candidate.new_empty(T, B, M)
    _sru_forward_kernel[_grid(B * M)](forget_input, candidate, *_step_strides(candidate), forget_weight.contiguous(),
                                      c0.contiguous(), memory, fg_gates, T, B, M, BLOCK=BLOCK)
    return memory, fg_gates


def sru_backward(grad_output, candidate, forget_weight, memory, fg_gates):
    """(dL/d(W_f x + b_f), dL/dx̃, dL/dv_f, dL/dc0) of the SRU loop."""
    T, B, M = fg_gates.shape
    grad_forget, grad_candidate = fg_gates.new_empty(T, B, M), fg_gates.new_empty(T, B, M)
    grad_weight_lanes, grad_c0 = fg_gates.new_empty(B, M), fg_gates.new_empty(B, M)
    _sru_backward_kernel[_grid(B * M)](grad_output.contiguous(), candidate, *_step_strides(candidate),
                                       forget_weight.contiguous(), memory, fg_gates, grad_forget, grad_candidate,
                                       grad_weight_lanes, grad_c0, T, B, M, BLOCK=BLOCK)
    return grad_forget, grad_candidate, grad_weight_lanes.sum(dim=0), grad_c0


# ---------------------------------------------------------------- ATR (fused steps)
@triton.jit
def _atr_step_kernel(p, q, h_prev, in_gate, fg_gate, h_next, lanes_total, BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < lanes_total
    p_t = tl.load(p + lanes, mask=mask)
    q_t = tl.load(q + lanes, mask=mask)
    h = tl.load(h_prev + lanes, mask=mask)
    i = tl.sigmoid(p_t + q_t)
    f = tl.sigmoid(p_t - q_t)
    tl.store(in_gate + lanes, i, mask=mask)
    tl.store(fg_gate + lanes, f, mask=mask)
    tl.store(h_next + lanes, _tanh(i * p_t + f * h), mask=mask)


@triton.jit
def _atr_step_backward_kernel(grad_h, grad_out, h_next, p, h_prev, in_gate, fg_gate, grad_p, grad_q, grad_carry,
                              lanes_total, BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < lanes_total
    hn = tl.load(h_next + lanes, mask=mask)
    grad_sum = (tl.load(grad_h + lanes, mask=mask) + tl.load(grad_out + lanes, mask=mask)) * (1.0 - hn * hn)
    p_t = tl.load(p + lanes, mask=mask)
    i = tl.load(in_gate + lanes, mask=mask)
    f = tl.load(fg_gate + lanes, mask=mask)
    grad_i = grad_sum * p_t * i * (1.0 - i)
    grad_f = grad_sum * tl.load(h_prev + lanes, mask=mask) * f * (1.0 - f)
    tl.store(grad_p + lanes, grad_sum * i + grad_i + grad_f, mask=mask)
    tl.store(grad_q + lanes, grad_i - grad_f, mask=mask)
    tl.store(grad_carry + lanes, grad_sum * f, mask=mask)


def atr_step(p_t, q_t, h_prev, in_gate, fg_gate, h_next) -> None:
    """One ATR step's gates and h_t, written into ``in_gate``, ``fg_gate``, ``h_next`` (all (B, M), contiguous)."""
    lanes = h_prev.numel()
    _atr_step_kernel[_grid(lanes)](p_t, q_t, h_prev, in_gate, fg_gate, h_next, lanes, BLOCK=BLOCK)


def atr_step_backward(grad_h, grad_out_t, h_next, p_t, h_prev, in_gate, fg_gate, grad_p_t, grad_q_t) -> torch.Tensor:
    """One ATR backward step: writes dL/dp_t and dL/dq_t; returns dL/dh_{t-1} less its U product."""
    lanes = h_prev.numel()
    grad_carry = torch.empty_like(h_prev)
    _atr_step_backward_kernel[_grid(lanes)](grad_h, grad_out_t, h_next, p_t, h_prev, in_gate, fg_gate, grad_p_t,
                                            grad_q_t, grad_carry, lanes, BLOCK=BLOCK)
    return grad_carry


# ---------------------------------------------------------------- LSTM gating (PRU, fused steps)
@triton.jit
def _lstm_step_kernel(pre, c_prev, gates, c_next, tanh_c, h_next, lanes_total, m, BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < lanes_total
    base = (lanes // m) * 4 * m + lanes % m     # gate rows f, g, i, o of this unit
    f = tl.sigmoid(tl.load(pre + base, mask=mask))
    g = _tanh(tl.load(pre + base + m, mask=mask))
    i = tl.sigmoid(tl.load(pre + base + 2 * m, mask=mask))
    o = tl.sigmoid(tl.load(pre + base + 3 * m, mask=mask))
    c = f * tl.load(c_prev + lanes, mask=mask) + i * g
    squashed = _tanh(c)
    tl.store(gates + base, f, mask=mask)
    tl.store(gates + base + m, g, mask=mask)
    tl.store(gates + base + 2 * m, i, mask=mask)
    tl.store(gates + base + 3 * m, o, mask=mask)
    tl.store(c_next + lanes, c, mask=mask)
    tl.store(tanh_c + lanes, squashed, mask=mask)
    tl.store(h_next + lanes, o * squashed, mask=mask)


@triton.jit
def _lstm_step_backward_kernel(grad_h, grad_y, grad_c, gates, c_prev, tanh_c, grad_pre, grad_c_prev, lanes_total, m,
                               BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < lanes_total
    base = (lanes // m) * 4 * m + lanes % m
    f = tl.load(gates + base, mask=mask)
    g = tl.load(gates + base + m, mask=mask)
    i = tl.load(gates + base + 2 * m, mask=mask)
    o = tl.load(gates + base + 3 * m, mask=mask)
    squashed = tl.load(tanh_c + lanes, mask=mask)
    dh = tl.load(grad_h + lanes, mask=mask) + tl.load(grad_y + lanes, mask=mask)
    dc = tl.load(grad_c + lanes, mask=mask) + dh * o * (1.0 - squashed * squashed)
    tl.store(grad_pre + base, dc * tl.load(c_prev + lanes, mask=mask) * f * (1.0 - f), mask=mask)
    tl.store(grad_pre + base + m, dc * i * (1.0 - g * g), mask=mask)
    tl.store(grad_pre + base + 2 * m, dc * g * i * (1.0 - i), mask=mask)
    tl.store(grad_pre + base + 3 * m, dh * squashed * o * (1.0 - o), mask=mask)
    tl.store(grad_c_prev + lanes, dc * f, mask=mask)


def lstm_step(pre, c_prev, gates, c_next, tanh_c, h_next) -> None:
    """LSTM gating of one step from pre-activations (..., 4m) in gate order (f, g, i, o): writes the
    activated gates, c_t, tanh(c_t) and h_t (all contiguous, states (..., m))."""
    m = c_prev.size(-1)
    lanes = c_prev.numel()
    _lstm_step_kernel[_grid(lanes)](pre, c_prev, gates, c_next, tanh_c, h_next, lanes, m, BLOCK=BLOCK)


def lstm_step_backward(grad_h, grad_y, grad_c, gates, c_prev, tanh_c, grad_pre) -> torch.Tensor:
    """One backward step of the gating: writes dL/d(pre-activations) into ``grad_pre`` and returns
    dL/dc_{t-1}; ``grad_h`` is dL/dh_t through the recurrence, ``grad_y`` through the output."""
    m = c_prev.size(-1)
    lanes = c_prev.numel()
    grad_c_prev = torch.empty_like(c_prev)
    _lstm_step_backward_kernel[_grid(lanes)](grad_h, grad_y, grad_c, gates, c_prev, tanh_c, grad_pre, grad_c_prev,
                                             lanes, m, BLOCK=BLOCK)
    return grad_c_prev


# ---------------------------------------------------------------- single-bias GRU (fused steps)
# gates (B, 2M): rows r, u; projections (B, 3M) of the backward: rows r, u, c. The products stay cuBLAS.
@triton.jit
def _gru_gates_kernel(gates, h, reset_h, lanes_total, M, BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < lanes_total
    base = (lanes // M) * 2 * M + lanes % M
    r = tl.sigmoid(tl.load(gates + base, mask=mask))
    tl.store(gates + base, r, mask=mask)
    tl.store(gates + base + M, tl.sigmoid(tl.load(gates + base + M, mask=mask)), mask=mask)
    tl.store(reset_h + lanes, r * tl.load(h + lanes, mask=mask), mask=mask)


@triton.jit
def _gru_update_kernel(candidates, gates, h, h_next, lanes_total, M, BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < lanes_total
    u = tl.load(gates + (lanes // M) * 2 * M + lanes % M + M, mask=mask)
    c = _tanh(tl.load(candidates + lanes, mask=mask))
    tl.store(candidates + lanes, c, mask=mask)
    tl.store(h_next + lanes, c + u * (tl.load(h + lanes, mask=mask) - c), mask=mask)   # u h + (1 - u) c


@triton.jit
def _gru_candidate_backward_kernel(grad_h, grad_out, gates, candidates, grad_sum, grad_proj, lanes_total, M,
                                   BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < lanes_total
    b = lanes // M
    m = lanes % M
    u = tl.load(gates + b * 2 * M + M + m, mask=mask)
    c = tl.load(candidates + lanes, mask=mask)
    g = tl.load(grad_h + lanes, mask=mask) + tl.load(grad_out + lanes, mask=mask)
    tl.store(grad_sum + lanes, g, mask=mask)
    tl.store(grad_proj + b * 3 * M + 2 * M + m, g * (1.0 - u) * (1.0 - c * c), mask=mask)


@triton.jit
def _gru_gates_backward_kernel(grad_sum, grad_reset_h, gates, previous, candidates, grad_proj, carry, lanes_total, M,
                               BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < lanes_total
    b = lanes // M
    m = lanes % M
    r = tl.load(gates + b * 2 * M + m, mask=mask)
    u = tl.load(gates + b * 2 * M + M + m, mask=mask)
    g = tl.load(grad_sum + lanes, mask=mask)
    grh = tl.load(grad_reset_h + lanes, mask=mask)
    prev = tl.load(previous + lanes, mask=mask)
    c = tl.load(candidates + lanes, mask=mask)
    tl.store(grad_proj + b * 3 * M + m, grh * prev * r * (1.0 - r), mask=mask)
    tl.store(grad_proj + b * 3 * M + M + m, g * (prev - c) * u * (1.0 - u), mask=mask)
    tl.store(carry + lanes, g * u + grh * r, mask=mask)


def gru_gates(gates, h) -> torch.Tensor:
    """Sigmoid of the r, u pre-activations in place in ``gates`` (B, 2M); returns r ⊙ h."""
    lanes, M = h.numel(), h.size(-1)
    reset_h = torch.empty_like(h)
    _gru_gates_kernel[_grid(lanes)](gates, h, reset_h, lanes, M, BLOCK=BLOCK)
    return reset_h


def gru_update(candidates, gates, h, h_next) -> None:
    """tanh of the candidate pre-activations in place; h_next = u ⊙ h + (1 - u) ⊙ c."""
    lanes, M = h.numel(), h.size(-1)
    _gru_update_kernel[_grid(lanes)](candidates, gates, h, h_next, lanes, M, BLOCK=BLOCK)


def gru_candidate_backward(grad_h, grad_out, gates, candidates, grad_proj) -> torch.Tensor:
    """Writes dL/d(candidate pre-activation) into rows 2M: of ``grad_proj`` (B, 3M); returns the
    step's total dL/dh_t (the carried gradient plus the output's)."""
    lanes, M = grad_h.numel(), grad_h.size(-1)
    grad_sum = torch.empty_like(grad_h)
    _gru_candidate_backward_kernel[_grid(lanes)](grad_h, grad_out, gates, candidates, grad_sum, grad_proj, lanes, M,
                                                 BLOCK=BLOCK)
    return grad_sum


def gru_gates_backward(grad_sum, grad_reset_h, gates, previous, candidates, grad_proj) -> torch.Tensor:
    """Writes dL/d(r, u pre-activations) into rows :2M of ``grad_proj``; returns dL/dh_{t-1} less its
    product through U_{r,u}."""
    lanes, M = grad_sum.numel(), grad_sum.size(-1)
    carry = torch.empty_like(grad_sum)
    _gru_gates_backward_kernel[_grid(lanes)](grad_sum, grad_reset_h, gates, previous, candidates, grad_proj, carry,
                                             lanes, M, BLOCK=BLOCK)
    return carry


# ---------------------------------------------------------------- RHN (fused micro-layer steps)
# gates (B, 2M): rows h (tanh), t (sigmoid); the product R s (+ W x) stays cuBLAS.
@triton.jit
def _highway_kernel(gates, s, s_next, lanes_total, M, BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < lanes_total
    base = (lanes // M) * 2 * M + lanes % M
    h = _tanh(tl.load(gates + base, mask=mask))
    transform = tl.sigmoid(tl.load(gates + base + M, mask=mask))
    tl.store(gates + base, h, mask=mask)
    tl.store(gates + base + M, transform, mask=mask)
    s_prev = tl.load(s + lanes, mask=mask)
    tl.store(s_next + lanes, s_prev + transform * (h - s_prev), mask=mask)   # h ⊙ t + s ⊙ (1 - t)


@triton.jit
def _highway_backward_kernel(grad_s, gates, s, grad_pre, carry, lanes_total, M, BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < lanes_total
    base = (lanes // M) * 2 * M + lanes % M
    h = tl.load(gates + base, mask=mask)
    transform = tl.load(gates + base + M, mask=mask)
    g = tl.load(grad_s + lanes, mask=mask)
    tl.store(grad_pre + base, g * transform * (1.0 - h * h), mask=mask)
    tl.store(grad_pre + base + M, g * (h - tl.load(s + lanes, mask=mask)) * transform * (1.0 - transform), mask=mask)
    tl.store(carry + lanes, g * (1.0 - transform), mask=mask)


def highway(gates, s, s_next) -> None:
    """Activates the h, t rows of ``gates`` (B, 2M) in place and writes s_next = h ⊙ t + s ⊙ (1 - t)."""
    lanes, M = s.numel(), s.size(-1)
    _highway_kernel[_grid(lanes)](gates, s, s_next, lanes, M, BLOCK=BLOCK)


def highway_backward(grad_s, gates, s, grad_pre) -> torch.Tensor:
    """Writes dL/d(h, t pre-activations) into ``grad_pre`` (B, 2M); returns dL/ds less its product
    through R."""
    lanes, M = s.numel(), s.size(-1)
    carry = torch.empty_like(s)
    _highway_backward_kernel[_grid(lanes)](grad_s, gates, s, grad_pre, carry, lanes, M, BLOCK=BLOCK)
    return carry
