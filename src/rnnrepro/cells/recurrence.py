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


def sigmoid_grad(grad: torch.Tensor, sigmoid_out: torch.Tensor) -> torch.Tensor:
    """Gradient at the pre-activation of s = sigmoid(a), given dL/ds and s: grad * s * (1 - s).
    torch's own backward kernel does it in one op, not three: at small sizes a loop costs its op count."""
    return torch.ops.aten.sigmoid_backward(grad, sigmoid_out)


def tanh_grad(grad: torch.Tensor, tanh_out: torch.Tensor) -> torch.Tensor:
    """Gradient at the pre-activation of t = tanh(a), given dL/dt and t: grad * (1 - t^2), in one pass."""
    return torch.ops.aten.tanh_backward(grad, tanh_out)


def weight_grad(output_grads: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    """dL/dW of out_t = in_t @ W^T summed over all steps: one (K x T*B) @ (T*B x M) product."""
    return output_grads.reshape(-1, output_grads.size(-1)).t() @ inputs.reshape(-1, inputs.size(-1))


def grad_or_zeros(grad: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """Autograd passes None for outputs that did not reach the loss."""
    return torch.zeros_like(like) if grad is None else grad
