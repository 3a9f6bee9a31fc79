"""Pyramidal Recurrent Unit (PRU; Mehta, Koncel-Kedziorski, Rastegari & Hajishirzi, EMNLP 2018).

An LSTM whose two linear maps are replaced: the input x_t goes through a *pyramidal transformation*
(PT) and the previous hidden state h_{t-1} through a *grouped linear transformation* (GLT). In the
paper's notation (§3, Eqs. 5-6), with F_I the transformation of the input and F_G that of the context:

    f_t = σ(F_I^f(x_t, K) + F_G^f(h_{t-1}, g))
    i_t = σ(F_I^i(x_t, K) + F_G^i(h_{t-1}, g))
    ĉ_t = tanh(F_I^c(x_t, K) + F_G^c(h_{t-1}, g))
    o_t = σ(F_I^o(x_t, K) + F_G^o(h_{t-1}, g))                                      (5)
    c_t = f_t ⊙ c_{t-1} + i_t ⊙ ĉ_t,        h_t = o_t ⊙ tanh(c_t)                    (6)

    PT:  x_t^1 = x_t,  x_t^k = Subsample(x_t^{k-1}) (stride 2),
         F_I^v(x_t, K) = [W_v^1 x_t^1, ..., W_v^K x_t^K] (+ x_t, the residual)
    GLT: h_{t-1} = [h^1, ..., h^g] (g contiguous groups of M/g),
         F_G^v(h_{t-1}, g) = [h^1 W_v^{h,1}, ..., h^g W_v^{h,g}]   (block-diagonal)

Implementation follows the authors' code (sacmehta/PRU: PRU.py, PRUTransforms.py): pre-activations in
gate order (f, g, i, o), each PT level is ``Linear(n_i, 4 d_i)`` with bias whose output is split into
four contiguous gate chunks and concatenated level-major, the GLT
has ``W`` of shape (g, M/g, 4M/g) and a bias (g, 4M/g), each group's output split into the four gates
and concatenated group-major. Two biases per gate unit (input side + context side), like nn.LSTM.

Where the code departs from the paper, we follow the code:

1. Output split per level: the paper gives each level M/K units; the code gives d_0 = M/2 + M/2^K and
   d_i = M/2^(i+1) (i >= 1). Table 1's parameter counts only match the code's split.
2. Pooling kernel: the paper says kernel 3, stride 2; the code uses 2K-1, ..., 5, 3 from level 1 to
   K-1 (identical for K = 2), padding (κ-1)/2, zero padding counted in the mean (count_include_pad).
   "max" pooling uses the same schedule, so avg and max differ only in the pooling operator. Option
   ``pooling_kernels``: "code" (default; every table of the study uses it) or "paper" (3 at every
   level). It changes no parameter count.
3. Residual: x_t is added to all four gate pre-activations, and only when N == M (the paper: "when the
   dimensions match"). So PRU with g = K = 1 is exactly an LSTM only with ``residual=False``; the
   parameter count is an LSTM's either way.
4. The code asserts N and M divisible by 2^K, which makes the paper's K = 4 ablations at 600 dims
   impossible; we lift it and use the code's ceil sizes n_i = ceil(N/2^i) (600, K=4: n = 600, 300,
   150, 75; d = 337, 150, 75, 38). (The paper's level size N/(2^k-1) is a typo for N/2^(k-1).)

Initialisation as the code: every PT level and dense ("lt") weight orthogonal, the 3-D GLT weight
orthogonal *as torch flattens it* (rows = groups, so each group's block is one unit-norm vector:
recurrent weights start 10-37x smaller than nn.LSTM's), all biases zero.

Parameter count (``counting.pru_params``): PT(N, M, K) + GLT(M, g) with
PT = Σ_i (n_i + 1)·4d_i and GLT = 4M²/g + 4M. E.g. the 3-layer tied PTB model g=4, K=2, M=1400 has
18,895,600 parameters (paper: 19 M).

Ablations (Table 3: ``input_transform`` / ``context_transform`` in {"lt", "glt", "pt"}; Table 4:
``subsample``). "lt" is one dense map (4NM + 4M), "glt" the grouped map with ``groups`` (on the input
side: W (g, N/g, 4M/g)), "pt" the pyramid with ``levels``. The residual belongs to the pyramidal input
transformation (as in the code), so ``residual=True`` requires ``input_transform="pt"``; a "pt"
context gets no residual of h_{t-1}. Table 3 rows (1 layer, E = H = 600, tied, K = g = 4), written
context/input: R1 LT/LT, R2 GLT/GLT, R3 GLT/PT, R4 LT/PT, R5 PT/PT, R6 LT/PT without residual.
R1, R4, R5, R6 follow from the code's formula (RU 2,884,800 / 2,490,000 / 2,095,200 / 2,490,000;
PTB totals 8.89 / 8.50 / 8.11 / 8.50 M; paper 2.9 / 2.5 / 2.1 / 2.5 M, 8.8 / 8.5 / 8.1 / 8.5 M).
R2 and R3 do not (code: RU 724,800 and 1,410,000, PTB totals 6.73 and 7.42 M; paper 0.5 and 0.64 M,
6.5 and 6.6 M).

Grouped pyramid (option ``pyramid_groups`` = G, default 1 = the released code): every level of a "pt"
transformation is also split into G groups, input group j (of n_i) feeding only unit group j (of d_i)
of each gate, groups contiguous and near-equal where G does not divide (600 at K = 4 has n_3 = 75,
d_0 = 337): the level costs sum_j n_ij 4 d_ij + 4 d_i, about its weights / G. With G = g it fits the
paper's counts for the PRU rows, checked by exact counting (tests/test_pru_ablations.py):
- R3 (GLT/PT, K = g = 4): RU 626,104 (paper 0.64 M; released 1,410,000), totals 6,636,104 PTB and
  20,626,182 WT-2 (paper 6.6 / 20.6; released 7.42 / 21.41 M); R3 against R4 74.9 % fewer (paper
  "≈ 75 %"; released 43.4 %).
- Figure 5, saving against the one-layer LSTM's 2,884,800: K = 2, g = 4 76.4 % (paper "77 %";
  released 43.7 %); K = 1..4 at g = 4: 74.9 / 76.4 / 77.6 / 78.3 %, at g = 2: 49.9 / 53.0 / 55.4 /
  56.8 %; g = 1 is the released cell (13.7 % at K = 4, the paper's "≈ 15 %").
- It does not fit the rows without a grouped context: with G = 4, R4 and R6 would have 1,706,104 and
  R5 527,408 (paper 2.5 / 2.1 M, which the released pyramid gives). So the paper's counts fit a PRU
  whose pyramid is grouped with the context's g, while its LT-context rows kept an ungrouped pyramid.
- R2 (GLT/GLT) fits neither: 724,800 either way (no pyramid; paper 0.5 M, WT-2 total 20.46 M, i.e.
  0.46 M of recurrent parameters, which needs g ≈ 6 on both sides: g = 6 gives 484,800).
Sub-sampling options (Table 4): "avg" (default), "max", "skip" (every other element), "conv": a learned
1-channel stride-2 convolution, kernel 3, padding 1, no bias, weights ~ N(0, 1/3) (the paper says only
"initialised from a normal distribution"), tanh on its output. Sharing is unspecified in the paper:
we give every pyramid level its own kernel (3 parameters per level after the first).

Speed: the input-side transformation does not depend on the recurrence, so it is computed for the
whole sequence at once (with the context bias folded in); the time loop then does one batched matmul
over the groups and the fused gate arithmetic per step. Mathematically identical to the code's
per-step loop. On a GPU (rnnrepro.cells.gpu) the gating of a step is one Triton kernel, forward and
backward, and both loops are replayed from CUDA graphs; the CPU path is unchanged. The pyramid options
(``pyramid_groups``, ``pooling_kernels``, ``subsample``) act only on the whole-sequence input side, so
a linear context keeps the fused loop with any of them; a "pt" context always runs the eager loop.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from . import gpu
from .base import RecurrentLayer
from .counting import CONV_SUBSAMPLE_KERNEL, POOLING_KERNELS, group_sizes, pooling_kernel_sizes, pyramid_level_sizes
from .recurrence import grad_or_zeros

TRANSFORMS = ("lt", "glt", "pt")
SUBSAMPLES = ("avg", "max", "skip", "conv")


class GateLinear(nn.Linear):
    """Dense map to the four gate pre-activations: (..., n) -> (..., 4, units), gates (f, g, i, o)."""

    def __init__(self, in_features: int, units: int):
        super().__init__(in_features, 4 * units)
        self.units = units

    def reset_parameters(self) -> None:
        nn.init.orthogonal_(self.weight)
        nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x).unflatten(-1, (4, self.units))


class GroupedLinear(nn.Module):
    """GLT: g independent maps of contiguous feature groups, (..., n) -> (..., 4, units).

    Output unit j·(units/g) + u of every gate depends only on input group j (block-diagonal).
    """

    def __init__(self, in_features: int, units: int, groups: int):
        super().__init__()
        self.groups = groups
        self.units = units
        self.weight = nn.Parameter(torch.empty(groups, in_features // groups, 4 * units // groups))
        self.bias = nn.Parameter(torch.empty(groups, 4 * units // groups))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.orthogonal_(self.weight)  # flattened to (groups, rest): one unit-norm vector per group
        nn.init.zeros_(self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.weight.shape[0] * self.weight.shape[1]}, units={self.units}, groups={self.groups}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        leading = x.shape[:-1]
        grouped = x.reshape(-1, self.groups, x.shape[-1] // self.groups).transpose(0, 1)
        out = torch.baddbmm(self.bias.unsqueeze(1), grouped, self.weight)  # (g, rows, 4 units/g)
        out = out.unflatten(-1, (4, self.units // self.groups)).permute(1, 2, 0, 3)
        return out.reshape(*leading, 4, self.units)


class GroupedGateLinear(nn.Module):
    """A pyramid level split into groups: input group j (contiguous, ``group_sizes``) feeds only unit
    group j of every gate, (..., n) -> (..., 4, units). Sizes need not divide: the groups are near-equal."""

    def __init__(self, in_features: int, units: int, groups: int):
        super().__init__()
        self.input_sizes = group_sizes(in_features, groups)
        self.parts = nn.ModuleList(GateLinear(n, d) for n, d in zip(self.input_sizes, group_sizes(units, groups)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pieces = x.split(self.input_sizes, dim=-1)
        return torch.cat([part(piece) for part, piece in zip(self.parts, pieces)], dim=-1)  # group-major units


class PyramidalTransform(nn.Module):
    """PT: K levels of cumulative stride-2 sub-sampling, one GateLinear per level (a GroupedGateLinear
    with ``groups`` > 1), (..., n) -> (..., 4, m)."""

    def __init__(self, in_features: int, units: int, levels: int, subsample: str, groups: int = 1,
                 pooling_kernels: str = "code"):
        super().__init__()
        level_inputs, level_units = pyramid_level_sizes(in_features, units, levels)
        self.groups = groups
        self.levels = nn.ModuleList(GateLinear(n, d) if groups == 1 else GroupedGateLinear(n, d, groups)
                                    for n, d in zip(level_inputs, level_units))
        self.subsample = subsample
        self.kernel_sizes = pooling_kernel_sizes(levels, pooling_kernels)
        if subsample == "conv":
            self.subsamplers = nn.ModuleList(
                nn.Conv1d(1, 1, CONV_SUBSAMPLE_KERNEL, stride=2, padding=CONV_SUBSAMPLE_KERNEL // 2, bias=False)
                for _ in range(levels - 1))
            for conv in self.subsamplers:
                nn.init.normal_(conv.weight, std=CONV_SUBSAMPLE_KERNEL ** -0.5)

    def extra_repr(self) -> str:
        groups = f", groups={self.groups}" if self.groups > 1 else ""
        if self.subsample in ("avg", "max"):
            return f"subsample={self.subsample!r}, pooling_kernels={self.kernel_sizes}{groups}"
        return f"subsample={self.subsample!r}{groups}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        level_input = x
        outputs = [self.levels[0](x)]
        for level in range(1, len(self.levels)):
            level_input = self._halve(level_input, level)
            outputs.append(self.levels[level](level_input))
        return torch.cat(outputs, dim=-1)  # level-major along the units of each gate

    def _halve(self, x: torch.Tensor, level: int) -> torch.Tensor:
        """Sub-sample the feature axis by 2 (length n -> ceil(n/2)) to make `level` from level - 1."""
        if self.subsample == "skip":
            return x[..., ::2]
        leading = x.shape[:-1]
        signal = x.reshape(-1, 1, x.shape[-1])  # features as a 1-channel signal, as the code pools
        kernel = self.kernel_sizes[level - 1]
        if self.subsample == "avg":
            out = F.avg_pool1d(signal, kernel, stride=2, padding=kernel // 2)
        elif self.subsample == "max":
            out = F.max_pool1d(signal, kernel, stride=2, padding=kernel // 2)
        else:
            out = torch.tanh(self.subsamplers[level - 1](signal))
        return out.reshape(*leading, out.shape[-1])


def lstm_gating(pre: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """LSTM state update from pre-activations (..., 4m) in gate order (f, g, i, o); c is (..., m)."""
    units = c.shape[-1]
    gates = torch.sigmoid(pre)  # one kernel for all gates; the g slice is unused
    forget, _, inp, out = gates.chunk(4, dim=-1)
    candidate = torch.tanh(pre.narrow(-1, units, units))
    c = torch.addcmul(forget * c, inp, candidate)
    return out * torch.tanh(c), c


class PRULayer(RecurrentLayer):
    """One PRU layer (see the module docstring for equations, code-vs-paper choices and counts).

    Args:
        levels: K, pyramid levels of a "pt" transformation (K = 1 is one dense map).
        groups: g, groups of a "glt" transformation; must divide the sizes it splits.
        subsample: how a pyramid level halves the previous one: "avg", "max", "skip" or "conv".
        residual: add x_t to every gate pre-activation when input_size == hidden_size (the code's
            behaviour; silently inactive when the sizes differ, e.g. the first and last LM layers).
            Only defined for input_transform="pt".
        input_transform: transformation of x_t: "pt" (paper), "lt" or "glt" (Table 3).
        context_transform: transformation of h_{t-1}: "glt" (paper), "lt" or "pt" (Table 3).
        pyramid_groups: G, groups each level of a "pt" transformation is split into (1: the released
            code; G = g: the grouped pyramid whose counts fit the paper's Table 3 R3 and Figure 5).
        pooling_kernels: "code" (2K-1, ..., 5, 3: the released code) or "paper" (3 at every level, the
            paper's text); for "avg" and "max" sub-sampling only.

    State: (h, c), each (B, hidden_size).
    """

    def __init__(self, input_size: int, hidden_size: int, levels: int, groups: int, subsample: str = "avg",
                 residual: bool = True, input_transform: str = "pt", context_transform: str = "glt",
                 pyramid_groups: int = 1, pooling_kernels: str = "code"):
        super().__init__(input_size, hidden_size)
        _check_options(input_size, hidden_size, levels, groups, subsample, residual, input_transform,
                       context_transform, pyramid_groups, pooling_kernels)
        self.levels = levels
        self.groups = groups
        self.subsample = subsample
        self.residual = residual
        self.input_transform_kind = input_transform
        self.context_transform_kind = context_transform
        self.pyramid_groups = pyramid_groups
        self.pooling_kernels = pooling_kernels
        pyramid = dict(levels=levels, groups=groups, subsample=subsample, pyramid_groups=pyramid_groups,
                       pooling_kernels=pooling_kernels)
        self.input_transform = _gate_transform(input_transform, input_size, hidden_size, **pyramid)
        self.context_transform = _gate_transform(context_transform, hidden_size, hidden_size, **pyramid)
        self.residual_active = residual and input_size == hidden_size
        # The loop keeps h and c split into the context's groups: (G, B, M/G).
        self.context_groups = groups if context_transform == "glt" else 1
        if context_transform == "pt":
            self.recurrent_weight_names = tuple(
                f"context_transform.{name}" for name, _ in self.context_transform.levels.named_parameters(prefix="levels")
                if name.endswith(".weight"))
        else:
            self.recurrent_weight_names = ("context_transform.weight",)

    def extra_repr(self) -> str:
        return (f"{self.input_size}, {self.hidden_size}, levels={self.levels}, groups={self.groups}, "
                f"subsample={self.subsample!r}, residual={self.residual}, "
                f"input_transform={self.input_transform_kind!r}, context_transform={self.context_transform_kind!r}, "
                f"pyramid_groups={self.pyramid_groups}, pooling_kernels={self.pooling_kernels!r}")

    def init_state(self, batch_size: int, device=None, dtype=None) -> tuple[torch.Tensor, torch.Tensor]:
        weight = next(self.parameters())
        zeros = torch.zeros(batch_size, self.hidden_size, device=device or weight.device,
                            dtype=dtype or weight.dtype)
        return zeros, zeros.clone()

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
        h, c = state
        groups = self.context_groups
        x_pre = self._input_preactivations(x)  # (T, G, B, 4M/G)
        h, c = _split_groups(h, groups), _split_groups(c, groups)
        if self.context_transform_kind == "pt":
            y, h, c = _pyramid_context_loop(x_pre, h, c, self.context_transform)
        elif gpu.kernels_for(x_pre, h, c) is not None:  # GPU with Triton: fused gating, captured loops
            y, c = _FusedLinearContextRecurrence.apply(x_pre, h, c, self._context_weight())
            h = y[-1]
        else:  # on a GPU without Triton, replayed from CUDA graphs (forward and backward) per length
            y, h, c = gpu.graphed(_linear_context_loop, (x_pre, h, c, self._context_weight()))
        return _merge_groups(y), (_merge_groups(h), _merge_groups(c))

    def _input_preactivations(self, x: torch.Tensor) -> torch.Tensor:
        """Input side of every gate for the whole sequence, laid out (T, G, B, 4M/G) for the loop."""
        pre = self.input_transform(x)  # (T, B, 4, M)
        if self.residual_active:
            pre = pre + x.unsqueeze(-2)
        seq_len, batch = x.shape[:2]
        groups = self.context_groups
        pre = pre.unflatten(-1, (groups, self.hidden_size // groups)).permute(0, 3, 1, 2, 4)
        pre = pre.reshape(seq_len, groups, batch, 4 * self.hidden_size // groups)
        if self.context_transform_kind != "pt":
            # A linear context's bias is constant over time: add it once here instead of every step.
            pre = pre + self.context_transform.bias.reshape(groups, 1, -1)
        return pre

    def _context_weight(self) -> torch.Tensor:
        """The linear context's weight as (G, M/G, 4M/G), read now (weight drop swaps it per call)."""
        weight = self.context_transform.weight
        if self.context_transform_kind == "lt":
            weight = weight.t().unsqueeze(0)  # (1, M, 4M): the dense map as a single group
        return weight


def _linear_context_loop(x_pre: torch.Tensor, h: torch.Tensor, c: torch.Tensor, weight: torch.Tensor):
    """The time loop with a linear ("glt" / "lt") context: h and c (G, B, M/G), x_pre (T, G, B, 4M/G),
    weight (G, M/G, 4M/G); returns every h (T, G, B, M/G) and the last h, c."""
    outputs = []
    for x_t in x_pre.unbind(0):
        h, c = lstm_gating(torch.baddbmm(x_t, h, weight), c)
        outputs.append(h)
    return torch.stack(outputs), h, c


class _FusedLinearContextRecurrence(torch.autograd.Function):
    """The linear-context loop of ``_linear_context_loop`` with a hand-written backward, for the GPU:
    per step one ``baddbmm`` and one fused Triton gating kernel (forward and backward), each loop
    replayed from a CUDA graph; the weight gradient is one batched product over all steps. Returns
    every h (T, G, B, M/G) and the last c."""

    @staticmethod
    def forward(ctx, x_pre: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, weight: torch.Tensor):
        hidden, cells, tanh_cells, gates = gpu.captured(_fused_forward_loop, (x_pre, h0, c0, weight))
        ctx.save_for_backward(hidden, cells, tanh_cells, gates, weight)
        return hidden[1:], cells[-1]

    @staticmethod
    def backward(ctx, grad_hidden: torch.Tensor, grad_last_cell: torch.Tensor):
        hidden, cells, tanh_cells, gates, weight = ctx.saved_tensors
        grad_hidden = grad_or_zeros(grad_hidden, hidden[1:]).contiguous()
        grad_last_cell = grad_or_zeros(grad_last_cell, cells[-1]).contiguous()
        grad_pre, grad_h0, grad_c0 = gpu.captured(
            _fused_backward_loop, (grad_hidden, grad_last_cell, cells, tanh_cells, gates, weight))
        previous = hidden[:-1].transpose(0, 1).flatten(1, 2)          # (G, T*B, M/G)
        grad_weight = torch.bmm(previous.transpose(1, 2), grad_pre.transpose(0, 1).flatten(1, 2))
        return grad_pre, grad_h0, grad_c0, grad_weight


def _fused_forward_loop(x_pre: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, weight: torch.Tensor):
    from .gpu import kernels  # Triton: only reached where gpu.kernels_for found it
    x_pre = x_pre.contiguous()
    steps = x_pre.size(0)
    hidden, cells = x_pre.new_empty(steps + 1, *h0.shape), x_pre.new_empty(steps + 1, *c0.shape)
    tanh_cells, gates = x_pre.new_empty(steps, *c0.shape), torch.empty_like(x_pre)
    hidden[0], cells[0] = h0, c0
    for t in range(steps):
        pre = torch.baddbmm(x_pre[t], hidden[t], weight)
        kernels.lstm_step(pre, cells[t], gates[t], cells[t + 1], tanh_cells[t], hidden[t + 1])
    return hidden, cells, tanh_cells, gates


def _fused_backward_loop(grad_hidden, grad_last_cell, cells, tanh_cells, gates, weight):
    from .gpu import kernels
    grad_pre = torch.empty_like(gates)
    weight_t = weight.transpose(1, 2)                                  # g ↦ g W^T per group
    grad_h, grad_c = torch.zeros_like(grad_last_cell), grad_last_cell
    for t in range(gates.size(0) - 1, -1, -1):
        grad_c = kernels.lstm_step_backward(grad_h, grad_hidden[t], grad_c, gates[t], cells[t], tanh_cells[t],
                                            grad_pre[t])
        grad_h = torch.bmm(grad_pre[t], weight_t)
    return grad_pre, grad_h, grad_c


def _pyramid_context_loop(x_pre: torch.Tensor, h: torch.Tensor, c: torch.Tensor, pyramid: nn.Module):
    """The time loop with a pyramidal ("pt") context (Table 3, R5), one group."""
    outputs = []
    for x_t in x_pre.unbind(0):
        h, c = lstm_gating(x_t + pyramid(h).flatten(-2), c)
        outputs.append(h)
    return torch.stack(outputs), h, c


def _split_groups(t: torch.Tensor, groups: int) -> torch.Tensor:
    """(B, M) -> (G, B, M/G): contiguous feature groups on a leading axis."""
    return t.reshape(t.shape[0], groups, -1).transpose(0, 1)


def _merge_groups(t: torch.Tensor) -> torch.Tensor:
    """(..., G, B, M/G) -> (..., B, M), inverse of _split_groups."""
    t = t.transpose(-3, -2)
    return t.reshape(*t.shape[:-2], -1)


def _gate_transform(kind: str, in_features: int, units: int, levels: int, groups: int, subsample: str,
                    pyramid_groups: int, pooling_kernels: str) -> nn.Module:
    if kind == "lt":
        return GateLinear(in_features, units)
    if kind == "glt":
        return GroupedLinear(in_features, units, groups)
    return PyramidalTransform(in_features, units, levels, subsample, pyramid_groups, pooling_kernels)


def _check_options(input_size: int, hidden_size: int, levels: int, groups: int, subsample: str, residual: bool,
                   input_transform: str, context_transform: str, pyramid_groups: int, pooling_kernels: str) -> None:
    for name, kind in (("input_transform", input_transform), ("context_transform", context_transform)):
        if kind not in TRANSFORMS:
            raise ValueError(f"unknown {name}={kind!r}; use one of {', '.join(map(repr, TRANSFORMS))}")
    if subsample not in SUBSAMPLES:
        raise ValueError(f"unknown subsample={subsample!r}; use one of {', '.join(map(repr, SUBSAMPLES))}")
    if levels < 1:
        raise ValueError(f"levels={levels}: the pyramidal transformation needs at least one level")
    if groups < 1:
        raise ValueError(f"groups={groups}: the grouped linear transformation needs at least one group")
    if pooling_kernels not in POOLING_KERNELS:
        raise ValueError(f"unknown pooling_kernels={pooling_kernels!r}; use one of "
                         f"{', '.join(map(repr, POOLING_KERNELS))}")
    if pooling_kernels != "code" and subsample not in ("avg", "max"):
        raise ValueError(f"pooling_kernels={pooling_kernels!r} sets the kernels of 'avg' and 'max' pooling; "
                         f"subsample={subsample!r} pools nothing, so leave pooling_kernels at 'code'")
    pyramids = [(n, m) for kind, n, m in ((input_transform, input_size, hidden_size),
                                          (context_transform, hidden_size, hidden_size)) if kind == "pt"]
    if pyramid_groups < 1:
        raise ValueError(f"pyramid_groups={pyramid_groups}: a pyramid level needs at least one group")
    if pyramid_groups > 1 and not pyramids:
        raise ValueError(f"pyramid_groups={pyramid_groups} splits the levels of a 'pt' transformation, and "
                         f"neither input_transform nor context_transform is 'pt'; leave pyramid_groups at 1")
    for n, m in pyramids:
        inputs, units = pyramid_level_sizes(n, m, levels)
        if min(inputs + units) < pyramid_groups:
            raise ValueError(f"pyramid_groups={pyramid_groups} is more than a pyramid level has features "
                             f"(level inputs {inputs}, units per gate {units} for {n} -> {m}, levels={levels}); "
                             f"use fewer pyramid_groups or levels")
    if residual and input_transform != "pt":
        raise ValueError(f"residual=True is defined for input_transform='pt' only (the code adds x inside the "
                         f"pyramidal transformation); set residual=False for input_transform={input_transform!r}")
    if hidden_size % groups and "glt" in (input_transform, context_transform):
        raise ValueError(f"groups={groups} must divide hidden_size={hidden_size} for a 'glt' transformation")
    if input_size % groups and input_transform == "glt":
        raise ValueError(f"groups={groups} must divide input_size={input_size} for input_transform='glt'")
