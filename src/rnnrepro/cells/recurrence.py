"""Pieces shared by the cells that run their own time loop.

Those cells hoist every input-side product out of the loop (one matrix product over the whole
sequence) and run the remaining recurrence as a ``torch.autograd.Function`` with a hand-written
backward pass instead of a Python loop recorded by autograd, for two reasons of CPU speed:

- the forward loop builds no graph, so a step costs only its arithmetic;
- the backward loop carries the gradient through the state only; the gradients of the recurrent
  weights are formed afterwards as one product over all steps (``weight_grad``), instead of one
  product with B rows per step, which is what makes a naive loop several times slower than nn.LSTM.

Every such Function is checked against finite differences (``torch.autograd.gradcheck``, float64)
in the tests, weights included.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def uniform_init_(module: nn.Module, hidden_size: int) -> None:
    """U(-1/sqrt(M), 1/sqrt(M)) for every parameter: the torch.nn recurrent-layer default."""
    bound = 1.0 / math.sqrt(hidden_size)
    for p in module.parameters():
        nn.init.uniform_(p, -bound, bound)


# How a cell's parameters start: "uniform" -- U(±1/√M) for all (torch's recurrent-layer default, the
# library's own); "xavier" -- as the LRN authors' LM code: Xavier-uniform on each of *their* weight
# matrices (so the bound follows their joint [x; h] shapes, see ``xavier_uniform_``), biases 0.
CELL_INITS = ("uniform", "xavier")


def check_init(cell: str, init: str) -> None:
    if init not in CELL_INITS:
        raise ValueError(f"{cell}: init={init!r}; use one of {CELL_INITS}")


def xavier_uniform_(weight: torch.Tensor, fan_sum: int) -> None:
    """U(±√(6 / fan_sum)): Xavier-uniform for a matrix whose rows + columns are ``fan_sum``. Our layers
    store the authors' joint matrices in pieces (an LSTM's (N+M) x 4M ``_W`` as weight_ih and
    weight_hh), so each piece is drawn with the bound of the whole matrix it comes from."""
    bound = math.sqrt(6.0 / fan_sum)
    nn.init.uniform_(weight, -bound, bound)


def zero_state(reference: torch.Tensor, batch_size: int, *trailing: int, device=None, dtype=None) -> torch.Tensor:
    """Zeros of shape (batch_size, *trailing) on the device / dtype given, else those of ``reference``."""
    return torch.zeros(batch_size, *trailing, device=device or reference.device, dtype=dtype or reference.dtype)


def require_equal_sizes(cell: str, input_size: int, hidden_size: int) -> None:
    """The LRU cells carry their depth input through a gate, so it must have the hidden size."""
    if input_size != hidden_size:
        raise ValueError(
            f"{cell}: input_size={input_size} must equal hidden_size={hidden_size}, because the depth "
            f"input is carried through the cell's update gate (the authors' code embeds straight to the "
            f"hidden size); set the embedding size (or the layer below) to the hidden size")


def sigmoid_grad(grad: torch.Tensor, sigmoid_out: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Gradient at the pre-activation of s = sigmoid(a), given dL/ds and s: grad * s * (1 - s), written
    into ``out`` if given. torch's own backward kernel does it in one op, not three: at small sizes a
    loop costs its op count."""
    if out is None:
        return torch.ops.aten.sigmoid_backward(grad, sigmoid_out)
    return torch.ops.aten.sigmoid_backward.grad_input(grad, sigmoid_out, grad_input=out)


def tanh_grad(grad: torch.Tensor, tanh_out: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Gradient at the pre-activation of t = tanh(a), given dL/dt and t: grad * (1 - t^2), in one pass,
    written into ``out`` if given."""
    if out is None:
        return torch.ops.aten.tanh_backward(grad, tanh_out)
    return torch.ops.aten.tanh_backward.grad_input(grad, tanh_out, grad_input=out)


def weight_grad(output_grads: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    """dL/dW of out_t = in_t @ W^T summed over all steps: one product over all T*B rows, formed as
    (in^T @ grad)^T -- the same numbers; on a CPU that operand order is 1.3-1.4x faster than
    grad^T @ in at the AWD shape (an (N x TB) @ (TB x K) product with TB = 1400)."""
    return (inputs.reshape(-1, inputs.size(-1)).t() @ output_grads.reshape(-1, output_grads.size(-1))).t()


#: smallest weight (elements) whose step products go through oneDNN: below it the BLAS call is as fast
#: or faster (32 x 256 rows against a 512 x 256 weight: oneDNN 1.14x slower; 1024 x 256: 0.95x;
#: 2300 x 1150 at 20 rows: 0.65x; measured on the development CPU)
ONEDNN_MIN_WEIGHT = 1 << 18


def _onednn_usable(weight: torch.Tensor) -> bool:
    return (weight.numel() >= ONEDNN_MIN_WEIGHT and weight.device.type == "cpu" and weight.dtype == torch.float32
            and torch.backends.mkldnn.is_available()
            and torch._C._get_mkldnn_enabled() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
            and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"))


class StepProduct:
    """``x @ W^T (+ bias) (+ add)`` for a weight W (K x N) that multiplies every step of a recurrence.

    A step's product has only B rows (the batch, 20-100), a shape at which the BLAS call behind
    ``torch.mm`` runs well below the machine's speed. On a CPU, in float32, for a weight of at least
    ``ONEDNN_MIN_WEIGHT`` elements, W is packed once per call into oneDNN's blocked layout and every
    step's product runs through oneDNN -- the library behind nn.LSTM's own CPU kernel -- via the
    operators torch's compiler uses for the same purpose: 1.2-1.6x faster per product at the AWD shape
    (20 x 1150 against 4600 x 1150 / 4600 x 2300). Everywhere else (small weights, a GPU, float64 as in
    the gradient checks, a torch without those operators, or oneDNN switched off with
    ``torch.backends.mkldnn.flags(enabled=False)``) it is ``torch.addmm``; the tests compare the two.
    """

    def __init__(self, weight: torch.Tensor, batch_size: int, bias: torch.Tensor | None = None):
        self.weight, self.bias = weight, bias
        self.weight_t = weight.t()  # once, not at every step: at small sizes a loop costs its op count
        self.packed = (torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), batch_size)
                       if _onednn_usable(weight) else None)

    def __call__(self, x: torch.Tensor, add: torch.Tensor | None = None, out: torch.Tensor | None = None):
        if self.packed is not None:
            if add is None:
                y = torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")
            else:
                y = torch.ops.mkldnn._linear_pointwise.binary(x, add, self.packed, self.bias, "add")
            return y if out is None else out.copy_(y)
        if self.bias is not None:
            add = self.bias if add is None else add + self.bias
        if add is None:
            return torch.mm(x, self.weight_t, out=out)
        return torch.addmm(add, x, self.weight_t, out=out)


def previous_states(initial: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
    """The state each step started from, (T, B, M): ``initial`` (B, M), then ``states`` (T, B, M) but its last."""
    return torch.cat([initial.unsqueeze(0), states[:-1]])


def grad_or_zeros(grad: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """Autograd passes None for outputs that did not reach the loss."""
    return torch.zeros_like(like) if grad is None else grad
