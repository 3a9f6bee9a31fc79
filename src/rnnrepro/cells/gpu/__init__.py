"""GPU fast paths of the custom cells: fused Triton kernels and CUDA-graph capture of their time loops.

On a GPU the cells' time loops are bound by Python and kernel-launch overhead, not by arithmetic (a
step is a few element-wise operators and at most one small product). Two remedies, each switched by
:func:`settings` and both on by default where they apply:

- ``kernels``: Triton kernels (:mod:`.kernels`) -- a whole-sequence scan for LRN and SRU (one launch
  per layer and direction), fused element-wise steps between the step products for ATR, the PRU's
  LSTM gating, the single-bias GRU (and the LRU family), RHN and the Nested LSTM. Used for CUDA
  float32/float64 tensors when Triton is importable (CUDA builds of torch ship it; CPU builds do not,
  so it is imported lazily).
- ``triton_products`` (with ``kernels``; off by default, measured slower): the Nested LSTM's step
  products, float32 and batches up to 64, through a Triton split-K kernel instead of cuBLAS (whose few
  thread blocks walk all of K at these shapes); off, its fused steps keep cuBLAS's products.
- ``graphs``: :func:`captured` replays a cell's whole time loop (forward or hand-written backward) as
  one CUDA graph, captured once per shape (BPTT lengths vary, so one graph per length). Cells whose
  loop autograd records (PRU) use :func:`graphed`, which captures the loop's forward and autograd's
  backward of it (``torch.cuda.make_graphed_callables``) the same way.

The CPU path is untouched: every cell runs its eager loop there, bit for bit as before. A fast path
computes the same saved activations and gradients as the eager loop, so each cell keeps one
autograd Function and one backward formula; the tests compare the two (tests/test_gpu_cells.py).

For tests only, ``settings(kernels=True, cpu_kernels=True)`` runs the Triton kernels on CPU tensors,
which works in Triton's interpreter (``TRITON_INTERPRET=1`` set before the first use).
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections import OrderedDict
from typing import Callable

import torch

# triton_products is off: on an H200 the split-K products made the Nested LSTM's step slower at the AWD
# shape (3.37x cuDNN's LSTM, against 2.90x for its eager loop in a graph; docs/gpu.md).
_SETTINGS = {"kernels": True, "graphs": True, "triton_products": False, "cpu_kernels": False}

#: most captured loops kept per process (each holds its own static buffers: a few MB at the AWD shape)
GRAPH_CACHE_SIZE = 256


@contextlib.contextmanager
def settings(**changes: bool):
    """Temporarily switch fast paths: ``kernels``, ``graphs``, ``triton_products``, ``cpu_kernels``
    (interpreter tests)."""
    unknown = set(changes) - set(_SETTINGS)
    if unknown:
        raise ValueError(f"unknown GPU fast-path setting(s) {sorted(unknown)}; known: {sorted(_SETTINGS)}")
    saved = dict(_SETTINGS)
    _SETTINGS.update(changes)
    try:
        yield
    finally:
        _SETTINGS.update(saved)


def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


def kernels_for(*tensors: torch.Tensor):
    """The Triton kernel module if the fused kernels should run on these tensors, else None."""
    if not _SETTINGS["kernels"] or not tensors:
        return None
    first = tensors[0]
    if first.dtype not in (torch.float32, torch.float64) or any(t.dtype != first.dtype for t in tensors):
        return None  # e.g. bfloat16 projections under autocast with a float32 state: the eager loop
    if not (first.is_cuda or _SETTINGS["cpu_kernels"]) or any(t.device != first.device for t in tensors):
        return None
    if not triton_available():
        return None
    from . import kernels
    return kernels


def split_products_for(kernels, step_input: torch.Tensor) -> bool:
    """Whether a fused loop (``kernels`` from :func:`kernels_for`) should run its step products through
    Triton's split-K kernel rather than cuBLAS: float32, batches up to ``kernels.SPLIT_MOST_ROWS``."""
    return _SETTINGS["triton_products"] and kernels.split_product_usable(step_input)


def graphs_for(*tensors: torch.Tensor) -> bool:
    """Whether a loop over these tensors should run as a captured CUDA graph."""
    return (_SETTINGS["graphs"] and bool(tensors) and all(t.is_cuda for t in tensors)
            and not torch.cuda.is_current_stream_capturing())


class _CapturedLoop:
    """One captured call: static input buffers, the graph, and the outputs it writes."""

    def __init__(self, loop: Callable, tensors: tuple[torch.Tensor, ...], constants: tuple):
        self.inputs = tuple(t.detach().clone() for t in tensors)
        # warm up on a side stream (cuBLAS workspaces, Triton compilation) before capturing
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            loop(*constants, *self.inputs)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
            outputs = loop(*constants, *self.inputs)
        self.tuple_output = isinstance(outputs, tuple)
        self.outputs = outputs if self.tuple_output else (outputs,)

    def __call__(self, tensors: tuple[torch.Tensor, ...]):
        for static, value in zip(self.inputs, tensors):
            static.copy_(value)
        self.graph.replay()
        # the next replay overwrites the static outputs; callers keep (and autograd saves) copies
        outputs = tuple(o.clone() for o in self.outputs)
        return outputs if self.tuple_output else outputs[0]


_CACHE: OrderedDict = OrderedDict()


def captured(loop: Callable, tensors: tuple[torch.Tensor, ...], constants: tuple = ()):
    """``loop(*constants, *tensors)``, replayed from a CUDA graph captured on the first call per shape.

    ``loop`` must only launch GPU work (no host synchronisation, no data-dependent Python control
    flow) and return a tensor or a tuple of tensors; ``constants`` are hashable non-tensor arguments.
    The key is the loop, every tensor's shape, strides, dtype and device, the constants and the settings
    in force (a loop captured with the kernels on is not replayed with them off), so each BPTT length
    gets its own graph. Without CUDA tensors (or with ``graphs`` off) it just calls ``loop``.
    """
    if not graphs_for(*tensors):
        return loop(*constants, *tensors)
    key = (loop, constants, tuple(_SETTINGS.items()),
           tuple((tuple(t.shape), t.stride(), t.dtype, t.device) for t in tensors))
    entry = _CACHE.get(key)
    if entry is None:
        entry = _CACHE[key] = _CapturedLoop(loop, tensors, constants)
        while len(_CACHE) > GRAPH_CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    return entry(tensors)


def _clone_grad(grad: torch.Tensor) -> torch.Tensor:
    return grad.clone()


def graphed(loop: Callable, tensors: tuple[torch.Tensor, ...]):
    """``loop(*tensors)`` for a loop whose backward autograd records, forward and backward replayed
    from CUDA graphs captured once per shape (``torch.cuda.make_graphed_callables``).

    ``loop`` must use only ``tensors`` (weights included, so weight drop's dropped copies are inputs
    like any other) and return a tuple of tensors. Without gradients it is :func:`captured`; under
    autocast, or without CUDA tensors, it runs as is.
    """
    if not graphs_for(*tensors) or torch.is_autocast_enabled():
        return loop(*tensors)
    if not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors)):
        with torch.no_grad():
            return captured(loop, tensors)
    key = ("autograd", loop, tuple(_SETTINGS.items()),
           tuple((tuple(t.shape), t.stride(), t.dtype, t.device, t.requires_grad) for t in tensors))
    graphed_loop = _CACHE.get(key)
    if graphed_loop is None:
        sample = tuple(t.detach().clone().requires_grad_(t.requires_grad) for t in tensors)
        graphed_loop = _CACHE[key] = torch.cuda.make_graphed_callables(loop, sample)
        while len(_CACHE) > GRAPH_CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    # The graphs' outputs and input gradients are static buffers that the next replay overwrites:
    # hand out copies (a parameter's .grad would otherwise alias a buffer of the graph).
    inputs = []
    for t in tensors:
        if t.requires_grad:
            t = t.view_as(t)
            t.register_hook(_clone_grad)
        inputs.append(t)
    return tuple(o.clone() for o in graphed_loop(*inputs))


def clear_graphs() -> None:
    """Drop every captured loop (frees their static buffers)."""
    _CACHE.clear()
