"""Triton kernels for the element-wise recurrences: whole-sequence scans (LRN, SRU) and fused steps (ATR,
the PRU's LSTM gating, the single-bias GRU, RHN, the Nested LSTM), and split-K step products.

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
highway update), or its derivative, is one kernel per product. Nested LSTM: one kernel per level after its
product (the innermost one also finishes the level above it); backward, one kernel down the levels and
one per inner level's product on the way up.

Split-K products (Nested LSTM, float32): its step products (two per step and direction, K up to 4M) run
through ``split_product``, whose partial sums the next fused kernel adds (see that section for why).

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


# ---------------------------------------------------------------- Nested LSTM (fused steps)
# Per level the gates (B, 4M) hold rows i, f, g, o; an inner level's input (B, 2M) is [x̃; h̃] = [i g; f c].
# A kernel that follows a step product reads it either whole (SPLITS = 1: cuBLAS already added the step's
# other term) or as SPLITS partial sums over K from ``split_product`` (``s_split`` apart) plus the step's
# other term ``add`` (rows ``s_add`` apart; 0 broadcasts a bias). The sum's order is fixed: deterministic.
@triton.jit
def _product_at(pre, s_split, add, s_add, b, col, width, mask, SPLITS: tl.constexpr, HAS_ADD: tl.constexpr):
    """Element (b, col) of a step product of row width ``width``: its partials summed, plus ``add``."""
    offset = b * width + col
    total = tl.load(pre + offset, mask=mask)
    for split in tl.static_range(1, SPLITS):
        total += tl.load(pre + split * s_split + offset, mask=mask)
    if HAS_ADD:
        total += tl.load(add + b * s_add + col, mask=mask)
    return total


@triton.jit
def _nested_outer_step_kernel(pre, s_split, add, s_add, gates, c_prev, inner_input, lanes_total, m,
                              SPLITS: tl.constexpr, HAS_ADD: tl.constexpr, IDENTITY_G: tl.constexpr,
                              BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < lanes_total
    b = lanes // m
    u = lanes % m
    i = tl.sigmoid(_product_at(pre, s_split, add, s_add, b, u, 4 * m, mask, SPLITS, HAS_ADD))
    f = tl.sigmoid(_product_at(pre, s_split, add, s_add, b, u + m, 4 * m, mask, SPLITS, HAS_ADD))
    g = _product_at(pre, s_split, add, s_add, b, u + 2 * m, 4 * m, mask, SPLITS, HAS_ADD)
    if not IDENTITY_G:
        g = _tanh(g)
    o = tl.sigmoid(_product_at(pre, s_split, add, s_add, b, u + 3 * m, 4 * m, mask, SPLITS, HAS_ADD))
    base = b * 4 * m + u
    tl.store(gates + base, i, mask=mask)
    tl.store(gates + base + m, f, mask=mask)
    tl.store(gates + base + 2 * m, g, mask=mask)
    tl.store(gates + base + 3 * m, o, mask=mask)
    tl.store(inner_input + b * 2 * m + u, i * g, mask=mask)                                       # x̃
    tl.store(inner_input + b * 2 * m + m + u, f * tl.load(c_prev + lanes, mask=mask), mask=mask)  # h̃


@triton.jit
def _nested_innermost_step_kernel(pre, s_split, add, s_add, gates, c_prev, c_next, tanh_c, gates_above, c_above,
                                  tanh_above, out_above, lanes_total, m, SPLITS: tl.constexpr,
                                  HAS_ADD: tl.constexpr, BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < lanes_total
    b = lanes // m
    u = lanes % m
    i = tl.sigmoid(_product_at(pre, s_split, add, s_add, b, u, 4 * m, mask, SPLITS, HAS_ADD))
    f = tl.sigmoid(_product_at(pre, s_split, add, s_add, b, u + m, 4 * m, mask, SPLITS, HAS_ADD))
    g = _tanh(_product_at(pre, s_split, add, s_add, b, u + 2 * m, 4 * m, mask, SPLITS, HAS_ADD))
    o = tl.sigmoid(_product_at(pre, s_split, add, s_add, b, u + 3 * m, 4 * m, mask, SPLITS, HAS_ADD))
    base = b * 4 * m + u
    tl.store(gates + base, i, mask=mask)
    tl.store(gates + base + m, f, mask=mask)
    tl.store(gates + base + 2 * m, g, mask=mask)
    tl.store(gates + base + 3 * m, o, mask=mask)
    c = i * g + f * tl.load(c_prev + lanes, mask=mask)
    squashed = _tanh(c)
    tl.store(c_next + lanes, c, mask=mask)
    tl.store(tanh_c + lanes, squashed, mask=mask)
    # the level above: its memory is this level's output, and its own output follows from its o gate
    above = o * squashed
    squashed_above = _tanh(above)
    tl.store(c_above + lanes, above, mask=mask)
    tl.store(tanh_above + lanes, squashed_above, mask=mask)
    tl.store(out_above + lanes, tl.load(gates_above + base + 3 * m, mask=mask) * squashed_above, mask=mask)


@triton.jit
def _nested_output_kernel(gates, c, tanh_c, out, lanes_total, m, BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < lanes_total
    squashed = _tanh(tl.load(c + lanes, mask=mask))
    tl.store(tanh_c + lanes, squashed, mask=mask)
    o = tl.load(gates + (lanes // m) * 4 * m + lanes % m + 3 * m, mask=mask)
    tl.store(out + lanes, o * squashed, mask=mask)


@triton.jit
def _nested_output_backward_kernel(pre, s_split, add, s_add, grad_c, gates, tanh_c, grad_pre, grad_c_total,
                                   lanes_total, m, SPLITS: tl.constexpr, HAS_ADD: tl.constexpr,
                                   BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < lanes_total
    b = lanes // m
    u = lanes % m
    grad_out = _product_at(pre, s_split, add, s_add, b, u, m, mask, SPLITS, HAS_ADD)
    o_at = b * 4 * m + u + 3 * m
    o = tl.load(gates + o_at, mask=mask)
    squashed = tl.load(tanh_c + lanes, mask=mask)
    tl.store(grad_pre + o_at, grad_out * squashed * o * (1.0 - o), mask=mask)
    total = tl.load(grad_c + lanes, mask=mask) + grad_out * o * (1.0 - squashed * squashed)
    tl.store(grad_c_total + lanes, total, mask=mask)


@triton.jit
def _nested_innermost_backward_kernel(pre, s_split, add, s_add, grad_c_above, gates_above, tanh_above, grad_pre_above,
                                      grad_c, gates, tanh_c, c_prev, grad_pre, carry, lanes_total, m,
                                      SPLITS: tl.constexpr, HAS_ADD: tl.constexpr, BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < lanes_total
    b = lanes // m
    u = lanes % m
    base = b * 4 * m + u
    # the level above: the gradient of its output, through its o gate to its memory (this level's output)
    grad_out = _product_at(pre, s_split, add, s_add, b, u, m, mask, SPLITS, HAS_ADD)
    o_above = tl.load(gates_above + base + 3 * m, mask=mask)
    squashed_above = tl.load(tanh_above + lanes, mask=mask)
    tl.store(grad_pre_above + base + 3 * m, grad_out * squashed_above * o_above * (1.0 - o_above), mask=mask)
    grad_above = tl.load(grad_c_above + lanes, mask=mask) + grad_out * o_above * (1.0 - squashed_above * squashed_above)
    # this level: its o gate, then c = f c_prev + i g
    i = tl.load(gates + base, mask=mask)
    f = tl.load(gates + base + m, mask=mask)
    g = tl.load(gates + base + 2 * m, mask=mask)
    o = tl.load(gates + base + 3 * m, mask=mask)
    squashed = tl.load(tanh_c + lanes, mask=mask)
    tl.store(grad_pre + base + 3 * m, grad_above * squashed * o * (1.0 - o), mask=mask)
    dc = tl.load(grad_c + lanes, mask=mask) + grad_above * o * (1.0 - squashed * squashed)
    tl.store(grad_pre + base, dc * g * i * (1.0 - i), mask=mask)
    tl.store(grad_pre + base + m, dc * tl.load(c_prev + lanes, mask=mask) * f * (1.0 - f), mask=mask)
    tl.store(grad_pre + base + 2 * m, dc * i * (1.0 - g * g), mask=mask)
    tl.store(carry + lanes, dc * f, mask=mask)


@triton.jit
def _nested_inner_input_backward_kernel(pre, s_split, gates, c_prev, grad_pre, carry, lanes_total, m,
                                        SPLITS: tl.constexpr, IDENTITY_G: tl.constexpr, BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = lanes < lanes_total
    b = lanes // m
    u = lanes % m
    grad_x = _product_at(pre, s_split, pre, 0, b, u, 2 * m, mask, SPLITS, False)          # dL/dx̃
    grad_h = _product_at(pre, s_split, pre, 0, b, u + m, 2 * m, mask, SPLITS, False)      # dL/dh̃
    base = b * 4 * m + u
    i = tl.load(gates + base, mask=mask)
    f = tl.load(gates + base + m, mask=mask)
    g = tl.load(gates + base + 2 * m, mask=mask)
    through_g = i                      # d(i g)/d pre_g: g is the identity at level 0
    if not IDENTITY_G:
        through_g = i * (1.0 - g * g)  # tanh inside
    tl.store(grad_pre + base, grad_x * g * i * (1.0 - i), mask=mask)
    tl.store(grad_pre + base + m, grad_h * tl.load(c_prev + lanes, mask=mask) * f * (1.0 - f), mask=mask)
    tl.store(grad_pre + base + 2 * m, grad_x * through_g, mask=mask)
    tl.store(carry + lanes, grad_h * f, mask=mask)


class StepInput:
    """A step product as a fused kernel reads it: a tensor that holds it whole (``splits`` = 1), or
    ``splits`` partial sums (splits, B, width) from ``split_product`` plus ``add`` (rows ``s_add`` apart)."""

    __slots__ = ("pre", "s_split", "add", "s_add", "splits")

    def __init__(self, pre: torch.Tensor, splits: int = 1, add: torch.Tensor | None = None, s_add: int = 0):
        assert pre.stride(-1) == 1 and (splits == 1 or pre.is_contiguous())
        self.pre, self.splits = pre, splits
        self.s_split = pre.stride(0) if splits > 1 else 0
        self.add, self.s_add = (pre, 0) if add is None else (add, s_add)

    def arguments(self) -> tuple:
        return self.pre, self.s_split, self.add, self.s_add

    def flags(self) -> dict:
        return dict(SPLITS=self.splits, HAS_ADD=self.add is not self.pre)


def nested_outer_step(product: StepInput, gates, c_prev, inner_input, identity_g: bool) -> None:
    """Gates of an outer level (i, f, σ_c(g), o; σ_c the identity at level 0, tanh inside) into ``gates``
    (B, 4M), and the next level's input [i g; f c_prev] into ``inner_input`` (B, 2M)."""
    lanes, m = c_prev.numel(), c_prev.size(-1)
    _nested_outer_step_kernel[_grid(lanes)](*product.arguments(), gates, c_prev, inner_input, lanes, m,
                                            IDENTITY_G=identity_g, BLOCK=BLOCK, **product.flags())


def nested_innermost_step(product: StepInput, gates, c_prev, c_next, tanh_c, gates_above, c_above, tanh_above,
                          out_above) -> None:
    """The innermost level's gates, memory c_next = f c_prev + i g and tanh(c_next); then the level above:
    its memory c_above = o tanh(c_next), tanh(c_above), and its output o_above tanh(c_above)."""
    lanes, m = c_prev.numel(), c_prev.size(-1)
    _nested_innermost_step_kernel[_grid(lanes)](*product.arguments(), gates, c_prev, c_next, tanh_c, gates_above,
                                                c_above, tanh_above, out_above, lanes, m, BLOCK=BLOCK,
                                                **product.flags())


def nested_output(gates, c, tanh_c, out) -> None:
    """A level's output o tanh(c) into ``out``, and tanh(c) into ``tanh_c``."""
    lanes, m = c.numel(), c.size(-1)
    _nested_output_kernel[_grid(lanes)](gates, c, tanh_c, out, lanes, m, BLOCK=BLOCK)


def nested_output_backward(grad_out: StepInput, grad_c, gates, tanh_c, grad_pre) -> torch.Tensor:
    """Through a level's output o tanh(c): writes dL/d(o's pre-activation) into ``grad_pre`` (B, 4M) and
    returns dL/dc in all (``grad_c``, what the memory's later uses give, plus what the output gives)."""
    lanes, m = grad_c.numel(), grad_c.size(-1)
    total = torch.empty_like(grad_c)
    _nested_output_backward_kernel[_grid(lanes)](*grad_out.arguments(), grad_c, gates, tanh_c, grad_pre, total,
                                                 lanes, m, BLOCK=BLOCK, **grad_out.flags())
    return total


def nested_innermost_backward(grad_out: StepInput, grad_c_above, gates_above, tanh_above, grad_pre_above, grad_c,
                              gates, tanh_c, c_prev, grad_pre) -> torch.Tensor:
    """The innermost step's backward from dL/d(output of the level above): that level's o row into
    ``grad_pre_above``, every row of this level into ``grad_pre``; returns dL/dc_prev of this level."""
    lanes, m = grad_c.numel(), grad_c.size(-1)
    carry = torch.empty_like(grad_c)
    _nested_innermost_backward_kernel[_grid(lanes)](*grad_out.arguments(), grad_c_above, gates_above, tanh_above,
                                                    grad_pre_above, grad_c, gates, tanh_c, c_prev, grad_pre, carry,
                                                    lanes, m, BLOCK=BLOCK, **grad_out.flags())
    return carry


def nested_inner_input_backward(grad_input: StepInput, gates, c_prev, grad_pre, identity_g: bool) -> torch.Tensor:
    """From dL/d[x̃; h̃] of the level below (B, 2M): rows i, f, g of an outer level into ``grad_pre``;
    returns that level's dL/dc_prev (through h̃ = f c_prev)."""
    lanes, m = c_prev.numel(), c_prev.size(-1)
    carry = torch.empty_like(c_prev)
    _nested_inner_input_backward_kernel[_grid(lanes)](grad_input.pre, grad_input.s_split, gates, c_prev, grad_pre,
                                                      carry, lanes, m, SPLITS=grad_input.splits,
                                                      IDENTITY_G=identity_g, BLOCK=BLOCK)
    return carry


# ---------------------------------------------------------------- split-K step products (float32)
# A recurrence's step product has only B (20-64) rows: cuBLAS then runs few thread blocks, each walking the
# whole K dimension (1150-4600) in turn, far below the GPU's arithmetic or memory speed. Here K is cut into
# SPLITS slices, one program per (column tile, slice), each writing its partial sum; the fused kernel that
# consumes the product adds the partials in a fixed order (so the result does not depend on scheduling).
# The block sizes are an untuned first choice.
SPLIT_BLOCK_N = 64
SPLIT_BLOCK_K = 32
#: programs a split product aims for, per streaming multiprocessor
SPLIT_PROGRAMS_PER_SM = 2
#: most slices of K (each adds a (B, N) partial that the consumer reads)
MOST_SPLITS = 16
#: most rows (the batch) a split product takes; larger batches use cuBLAS
SPLIT_MOST_ROWS = 64


@triton.jit
def _split_product_kernel(x, s_xb, matrix, s_mk, s_mn, partials, B, K, N, blocks_per_split,
                          BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    split = tl.program_id(1)
    rows = tl.arange(0, BLOCK_B)
    acc = tl.zeros([BLOCK_B, BLOCK_N], dtype=tl.float32)
    for block in range(blocks_per_split):
        ks = (split * blocks_per_split + block) * BLOCK_K + tl.arange(0, BLOCK_K)
        a = tl.load(x + rows[:, None] * s_xb + ks[None, :], mask=(rows[:, None] < B) & (ks[None, :] < K), other=0.0)
        w = tl.load(matrix + ks[:, None] * s_mk + cols[None, :] * s_mn, mask=(ks[:, None] < K) & (cols[None, :] < N),
                    other=0.0)
        acc = tl.dot(a, w, acc, input_precision="ieee")
    tl.store(partials + split * B * N + rows[:, None] * N + cols[None, :], acc,
             mask=(rows[:, None] < B) & (cols[None, :] < N))


def split_product_usable(x: torch.Tensor) -> bool:
    """Whether ``split_product`` takes this step input (float32, at most SPLIT_MOST_ROWS rows)."""
    return x.dtype == torch.float32 and x.size(0) <= SPLIT_MOST_ROWS


def _streaming_multiprocessors(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4   # Triton's interpreter on CPU tensors (tests): any count exercises the slicing


def split_count(batch: int, k: int, n: int, device: torch.device) -> tuple[int, int]:
    """(slices of K, K per slice) for a (batch x k) @ (k x n) product."""
    tiles = triton.cdiv(n, SPLIT_BLOCK_N)
    wanted = max(1, min(MOST_SPLITS, round(SPLIT_PROGRAMS_PER_SM * _streaming_multiprocessors(device) / tiles)))
    k_per_split = triton.cdiv(triton.cdiv(k, wanted), SPLIT_BLOCK_K) * SPLIT_BLOCK_K
    return triton.cdiv(k, k_per_split), k_per_split


def split_product(x: torch.Tensor, matrix: torch.Tensor, add: torch.Tensor | None = None) -> StepInput:
    """x (B, K) @ matrix (K, N, any strides: pass W.t() for x W^T) as partial sums over slices of K, for a
    fused kernel to finish; ``add`` (B, N) or (N,) is added there."""
    assert split_product_usable(x) and x.stride(-1) == 1 and matrix.dtype == x.dtype
    (batch, k), n = x.shape, matrix.size(1)
    splits, k_per_split = split_count(batch, k, n, x.device)
    partials = x.new_empty(splits, batch, n)
    grid = (triton.cdiv(n, SPLIT_BLOCK_N), splits)
    _split_product_kernel[grid](x, x.stride(0), matrix, matrix.stride(0), matrix.stride(1), partials, batch, k, n,
                                k_per_split // SPLIT_BLOCK_K, BLOCK_B=max(16, triton.next_power_of_2(batch)),
                                BLOCK_N=SPLIT_BLOCK_N, BLOCK_K=SPLIT_BLOCK_K)
    if add is None:
        return StepInput(partials, splits)
    return StepInput(partials, splits, add, add.stride(0) if add.dim() == 2 else 0)


def sum_product(product: StepInput) -> torch.Tensor:
    """The finished product (B, N) of a StepInput, for where no fused kernel consumes it."""
    total = product.pre.sum(dim=0) if product.pre.dim() == 3 else product.pre
    return total if product.add is product.pre else total + product.add
