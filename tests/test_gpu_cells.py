"""GPU fast paths of the cells against their eager (CPU) loops.

Two groups:
- Triton kernels in Triton's interpreter on CPU tensors (needs the optional `triton` package:
  `pip install -r requirements-gpu-tests.txt`; skipped without it). These run in CI's CPU box.
- `@pytest.mark.cuda`: every cell on a GPU against its CPU path, weight drop and state carry across
  BPTT windows, and the captured / fused paths against the eager GPU loop. Skipped without CUDA.

Tolerances: float64 1e-10 (the kernels use the same formulas; only rounding order and the exp-based
tanh differ), float32 2e-5 absolute on outputs and 1e-4 on gradients (O(1) values, T <= 12 steps).
"""

import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    # Triton reads this when a kernel is defined, i.e. on the first import of the kernels module
    os.environ.setdefault("TRITON_INTERPRET", "1")

from rnnrepro import precision  # noqa: E402
from rnnrepro.cells import CELLS, build_layer, detach_state  # noqa: E402
from rnnrepro.cells import gpu  # noqa: E402
from rnnrepro.models.regularisation import run_with_weight_drop  # noqa: E402

needs_triton = pytest.mark.skipif(not gpu.triton_available(),
                                  reason="triton not installed (pip install -r requirements-gpu-tests.txt)")
cuda = pytest.mark.cuda
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")

TOLERANCE = {torch.float64: dict(out=1e-10, grad=1e-10), torch.float32: dict(out=2e-5, grad=1e-4)}

# cell id -> (input size, hidden size, options): small sizes that satisfy each cell's constraints
SHAPES = {
    "lstm": (6, 8, {}),
    "pru": (8, 8, {"groups": 2, "levels": 2}),
    "lstm_single_bias": (6, 8, {}),
    "gru": (6, 8, {}),
    "gru_single_bias": (6, 8, {}),
    "nested_lstm": (6, 8, {"depth": 2}),
    "rhn": (6, 8, {"recurrence_depth": 2}),
    "grid_lstm": (8, 8, {"depth": 2}),
    "ps_lru": (8, 8, {}),
    "rg_lru": (8, 8, {}),
    "lru": (8, 8, {}),
    "lrn": (6, 8, {}),
    "atr": (6, 8, {}),
    "sru": (6, 8, {}),
}
# the cells with Triton kernels, and the variants of their options to cover
KERNEL_CELLS = [
    pytest.param("lrn", {}, id="lrn"), pytest.param("lrn", {"activation": "identity"}, id="lrn-identity"),
    pytest.param("lrn", {"layer_norm": True}, id="lrn-layer_norm"),
    pytest.param("sru", {}, id="sru"), pytest.param("atr", {}, id="atr"),
    pytest.param("gru_single_bias", {}, id="gru_single_bias"), pytest.param("lru", {}, id="lru"),
    pytest.param("rhn", {}, id="rhn"),
    pytest.param("pru", {}, id="pru"),
    pytest.param("pru", {"context_transform": "lt", "input_transform": "lt", "residual": False}, id="pru-lt"),
    # the pyramid options change only the input side, computed before the fused loop
    pytest.param("pru", {"pyramid_groups": 2}, id="pru-grouped-pyramid"),
    pytest.param("pru", {"levels": 3, "pooling_kernels": "paper"}, id="pru-paper-kernels"),
    pytest.param("nested_lstm", {}, id="nested_lstm"),
    # depth 3: a middle level (tanh candidate, its own memory) and an output kernel above the innermost pair
    pytest.param("nested_lstm", {"depth": 3}, id="nested_lstm-depth3"),
]
# widths at which every Nested LSTM step product is cut into several slices of K (checked in the tests:
# the tiny SHAPES fit one slice); 72 is not a multiple of the kernel's K block, so the last slice is ragged
NESTED_SPLIT_SIZES = (10, 72)


def _flatten(state):
    return [state] if isinstance(state, torch.Tensor) else [t for s in state for t in _flatten(s)]


def _run(layer, x, state, windows=(6, 6), weight_drop=0.0, seed=0):
    """Outputs of BPTT windows of the given lengths with the state carried (detached) between them,
    and the gradients of a loss over all of them w.r.t. the input, the first state and every parameter."""
    torch.manual_seed(seed)
    x = x.clone().requires_grad_(True)
    first = tuple(s.clone().requires_grad_(True) for s in _flatten(state))
    state = first[0] if isinstance(state, torch.Tensor) else _restructure(state, list(first))
    outputs, loss = [], 0.0
    for window in x.split(list(windows), dim=0):
        out, state = run_with_weight_drop(layer, window, state, weight_drop, training=weight_drop > 0)
        outputs.append(out)
        loss = loss + (out * torch.linspace(-1, 1, out.size(-1), dtype=out.dtype, device=out.device)).sum()
        loss = loss + sum((s ** 2).sum() for s in _flatten(state))
        state = detach_state(state)
    params = [p for p in layer.parameters()]
    grads = torch.autograd.grad(loss, [x, *first, *params])
    return torch.cat(outputs), grads


def _restructure(template, flat):
    if isinstance(template, torch.Tensor):
        return flat.pop(0)
    return tuple(_restructure(t, flat) for t in template)


def _assert_close(result, expected, dtype):
    tol = TOLERANCE[dtype]
    (out, grads), (out_ref, grads_ref) = result, expected
    torch.testing.assert_close(out.cpu(), out_ref.cpu(), atol=tol["out"], rtol=0)
    for g, g_ref in zip(grads, grads_ref):
        torch.testing.assert_close(g.cpu(), g_ref.cpu(), atol=tol["grad"], rtol=tol["grad"])


def _layer(cell, options, dtype, device="cpu"):
    n, m, base_options = SHAPES[cell]
    torch.manual_seed(1)
    return build_layer(cell, n, m, **{**base_options, **options}).to(dtype=dtype, device=device)


def _inputs(cell, layer, dtype, device="cpu", steps=12, batch=3):
    torch.manual_seed(2)
    x = torch.randn(steps, batch, layer.input_size, dtype=dtype, device=device)
    state = layer.init_state(batch, device=device, dtype=dtype)
    state = tuple(torch.randn_like(s) * 0.5 for s in _flatten(state))
    return x, state[0] if len(state) == 1 else _restructure(layer.init_state(batch, device=device, dtype=dtype),
                                                            list(state))


# ------------------------------------------------------------------ Triton interpreter, CPU
@needs_triton
@pytest.mark.skipif(HAS_CUDA, reason="interpreter tests are for CPU-only machines; on a GPU the cuda tests run")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("cell,options", KERNEL_CELLS)
def test_triton_kernels_match_eager_loop_in_interpreter(cell, options, dtype):
    layer = _layer(cell, options, dtype)
    x, state = _inputs(cell, layer, dtype)
    with gpu.settings(kernels=False):
        expected = _run(layer, x, state)
    with gpu.settings(kernels=True, cpu_kernels=True):
        assert gpu.kernels_for(x) is not None
        result = _run(layer, x, state)
    _assert_close(result, expected, dtype)


@needs_triton
@pytest.mark.skipif(HAS_CUDA, reason="interpreter tests are for CPU-only machines")
def test_triton_kernels_with_weight_drop_on_atr():
    layer = _layer("atr", {}, torch.float64)
    x, state = _inputs("atr", layer, torch.float64)
    with gpu.settings(kernels=False):
        expected = _run(layer, x, state, weight_drop=0.5, seed=3)
    with gpu.settings(kernels=True, cpu_kernels=True):
        result = _run(layer, x, state, weight_drop=0.5, seed=3)
    _assert_close(result, expected, torch.float64)


def _nested_split_layer(depth, dtype, device="cpu"):
    torch.manual_seed(1)
    return build_layer("nested_lstm", *NESTED_SPLIT_SIZES, depth=depth).to(dtype=dtype, device=device)


def _assert_split_products_slice_k(batch, hidden, device):
    from rnnrepro.cells.gpu import kernels
    m = hidden
    # (K, N) of each step product: forward x W_hh^0 and [x̃; h̃] W^1, backward g W_hh^0 and g W^1
    for k, n in [(m, 4 * m), (2 * m, 4 * m), (4 * m, m), (4 * m, 2 * m)]:
        assert kernels.split_count(batch, k, n, torch.device(device))[0] > 1, (k, n)


@needs_triton
@pytest.mark.skipif(HAS_CUDA, reason="interpreter tests are for CPU-only machines")
@pytest.mark.parametrize("triton_products", [True, False], ids=["split-k products", "mm products"])
@pytest.mark.parametrize("depth", [2, 3])
def test_nested_lstm_fused_steps_with_split_products_in_interpreter(depth, triton_products):
    """The fused Nested LSTM loops at a width where the split-K products really split, with the state
    carried over two windows, against the eager loop; float32 (the split products take float32 only)."""
    dtype = torch.float32
    layer = _nested_split_layer(depth, dtype)
    torch.manual_seed(2)
    x = torch.randn(6, 3, layer.input_size, dtype=dtype)
    state = tuple(torch.randn_like(s) * 0.5 for s in layer.init_state(3, dtype=dtype))
    with gpu.settings(kernels=False):
        expected = _run(layer, x, state, windows=(4, 2))
    with gpu.settings(kernels=True, cpu_kernels=True, triton_products=triton_products):
        _assert_split_products_slice_k(3, layer.hidden_size, "cpu")
        result = _run(layer, x, state, windows=(4, 2))
    _assert_close(result, expected, dtype)


@needs_triton
@pytest.mark.skipif(HAS_CUDA, reason="interpreter tests are for CPU-only machines")
def test_split_product_matches_mm_in_interpreter():
    """x W^T through a transposed view and g W through the weight itself, each with its step's other
    term (a (B, N) tensor, a bias, nothing), against torch: partials summed as the fused kernels do."""
    with gpu.settings(kernels=True, cpu_kernels=True):
        kernels = gpu.kernels_for(torch.zeros(1))
        assert kernels is not None
    torch.manual_seed(0)
    x, weight = torch.randn(5, 100), torch.randn(70, 100)
    grad = torch.randn(5, 70)
    cases = [(x, weight.t(), torch.randn(5, 70)), (x, weight.t(), torch.randn(70)), (grad, weight, None)]
    for step_input, matrix, add in cases:
        product = kernels.split_product(step_input, matrix, add)
        assert product.splits > 1
        expected = step_input @ matrix if add is None else add + step_input @ matrix
        torch.testing.assert_close(kernels.sum_product(product), expected, atol=1e-5, rtol=1e-5)


def test_kernels_are_not_used_on_cpu_by_default():
    """The CPU path stays the eager loop (bit-identical to before) unless a test forces the kernels."""
    assert gpu.kernels_for(torch.zeros(2)) is None
    assert not gpu.graphs_for(torch.zeros(2))


def test_unknown_fast_path_setting_is_refused():
    with pytest.raises(ValueError, match="'fused'.*known"):
        with gpu.settings(fused=True):
            pass


# ------------------------------------------------------------------ CUDA
@cuda
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("cell", sorted(CELLS))
def test_cuda_matches_cpu(cell, dtype):
    """Every cell's GPU path (fast paths on, as in training) against its CPU path, two windows."""
    precision.apply("fp32")  # cuDNN's RNN defaults to TF32 on Ampere+: compare full FP32 products
    layer = _layer(cell, {}, dtype)
    x, state = _inputs(cell, layer, dtype)
    expected = _run(layer, x, state)
    layer_gpu = _layer(cell, {}, dtype, "cuda")
    layer_gpu.load_state_dict(layer.state_dict())
    to_gpu = (lambda s: s.cuda()) if isinstance(state, torch.Tensor) else (lambda s: tuple(t.cuda() for t in s))
    _assert_close(_run(layer_gpu, x.cuda(), to_gpu(state)), expected, dtype)


@cuda
@needs_cuda
@pytest.mark.parametrize("cell", sorted(c for c in CELLS if build_layer(c, *SHAPES[c][:2], **SHAPES[c][2])
                                        .recurrent_weight_names))
@pytest.mark.parametrize("fast_paths", [{}, {"kernels": False}], ids=["kernels+graphs", "graphs only"])
def test_cuda_fast_paths_match_eager_gpu_loop_with_weight_drop(cell, fast_paths):
    """Captured / fused loops against the eager GPU loop: the same dropout masks (same seed), state
    carried over three windows of different lengths, each shape replayed twice."""
    dtype = torch.float32
    precision.apply("fp32")
    layer = _layer(cell, {}, dtype, "cuda")
    x, state = _inputs(cell, layer, dtype, "cuda", steps=15)
    for _ in range(2):
        with gpu.settings(kernels=False, graphs=False):
            expected = _run(layer, x, state, windows=(4, 5, 6), weight_drop=0.5, seed=4)
        with gpu.settings(**fast_paths):
            result = _run(layer, x, state, windows=(4, 5, 6), weight_drop=0.5, seed=4)
        _assert_close(result, expected, dtype)


@cuda
@needs_cuda
@needs_triton
@pytest.mark.parametrize("cell,options", KERNEL_CELLS)
def test_cuda_triton_kernels_match_eager_gpu_loop(cell, options):
    layer = _layer(cell, options, torch.float64, "cuda")
    x, state = _inputs(cell, layer, torch.float64, "cuda", steps=70, batch=4)
    with gpu.settings(kernels=False, graphs=False):
        expected = _run(layer, x, state, windows=(35, 35))
    assert gpu.kernels_for(x) is not None
    _assert_close(_run(layer, x, state, windows=(35, 35)), expected, torch.float64)


@cuda
@needs_cuda
def test_captured_loop_replays_per_shape():
    """One graph per shape; a replay with new inputs gives the eager result, not the captured one."""
    gpu.clear_graphs()

    def loop(a, w):
        out = torch.empty_like(a)
        h = torch.zeros_like(a[0])
        for t in range(a.size(0)):
            h = torch.tanh(a[t] + h @ w)
            out[t] = h
        return out

    w = torch.randn(5, 5, device="cuda") * 0.3
    for steps in (4, 6, 4):
        a = torch.randn(steps, 3, 5, device="cuda")
        torch.testing.assert_close(gpu.captured(loop, (a, w)), loop(a, w))
    assert len(gpu._CACHE) == 2


@cuda
@needs_cuda
@pytest.mark.parametrize("cell", sorted(CELLS))
def test_cuda_fast_paths_without_gradients_match_eager(cell):
    """Evaluation (no_grad): forward-only captured graphs, consecutive windows with the state carried."""
    precision.apply("fp32")
    layer = _layer(cell, {}, torch.float32, "cuda")
    x, state = _inputs(cell, layer, torch.float32, "cuda", steps=12)

    def evaluate():
        outputs, carried = [], state
        with torch.no_grad():
            for window in x.split([6, 6]):
                out, carried = layer(window, carried)
                outputs.append(out)
        return torch.cat(outputs)

    with gpu.settings(kernels=False, graphs=False):
        expected = evaluate()
    for _ in range(2):
        torch.testing.assert_close(evaluate(), expected, atol=2e-5, rtol=0)


@cuda
@needs_cuda
@needs_triton
def test_cuda_nested_lstm_split_product_matches_mm_at_the_awd_shape():
    """The split-K step products of a depth-2 Nested LSTM at the AWD shape (batch 20, width 1150),
    forward (x W^T plus the step's other term) and backward (g W), against torch.mm in IEEE FP32."""
    precision.apply("fp32")
    from rnnrepro.cells.gpu import kernels
    torch.manual_seed(0)
    batch, m = 20, 1150
    for k, n, transposed in [(m, 4 * m, True), (2 * m, 4 * m, True), (4 * m, m, False), (4 * m, 2 * m, False)]:
        weight = torch.randn(*((n, k) if transposed else (k, n)), device="cuda") / k ** 0.5
        matrix = weight.t() if transposed else weight
        x, add = torch.randn(batch, k, device="cuda"), torch.randn(batch, n, device="cuda")
        product = kernels.split_product(x, matrix, add)
        assert product.splits > 1
        torch.testing.assert_close(kernels.sum_product(product), torch.addmm(add, x, matrix), atol=1e-4, rtol=1e-4)


@cuda
@needs_cuda
@needs_triton
@pytest.mark.parametrize("depth", [2, 3])
@pytest.mark.parametrize("fast_paths", [{"triton_products": True}, {"triton_products": False},
                                        {"triton_products": True, "graphs": False}],
                         ids=["split-k products+graphs", "cublas products+graphs", "split-k products, no graphs"])
def test_cuda_nested_lstm_fused_steps_match_eager_gpu_loop(depth, fast_paths):
    """The fused Nested LSTM (Triton steps; split-K or cuBLAS products; captured or not) against its eager
    GPU loop at a width where the split-K products really split: weight drop (same masks), the state
    carried over three windows, each shape run twice (capture, then replay)."""
    dtype = torch.float32
    precision.apply("fp32")
    layer = _nested_split_layer(depth, dtype, "cuda")
    batch = 20
    _assert_split_products_slice_k(batch, layer.hidden_size, "cuda")
    torch.manual_seed(2)
    x = torch.randn(15, batch, layer.input_size, dtype=dtype, device="cuda")
    state = tuple(torch.randn_like(s) * 0.5 for s in layer.init_state(batch, device="cuda", dtype=dtype))
    for _ in range(2):
        with gpu.settings(kernels=False, graphs=False):
            expected = _run(layer, x, state, windows=(4, 5, 6), weight_drop=0.5, seed=4)
        with gpu.settings(**fast_paths):
            assert gpu.kernels_for(x) is not None
            result = _run(layer, x, state, windows=(4, 5, 6), weight_drop=0.5, seed=4)
        _assert_close(result, expected, dtype)
