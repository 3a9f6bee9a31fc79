"""The recurrent-unit library beyond LSTM and PRU (GRU, single-bias LSTM/GRU, Nested LSTM, RHN, Grid LSTM,
the LRU family, LRN, ATR, SRU): parameter counts against each cell's formula and the published ones,
agreement with step-by-step references of the papers' and authors' equations, reductions of the LRU
variants, gradients, state carry across BPTT windows, weight drop, and a short learning test."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from rnnrepro.cells import CELLS, RecurrentLayer, build_layer, cell_class
from rnnrepro.cells import recurrence
from rnnrepro.cells.recurrence import StepProduct
from rnnrepro.models.regularisation import run_with_weight_drop

OPTIONS = {"nested_lstm": {"depth": 2}, "rhn": {"recurrence_depth": 2}, "grid_lstm": {"depth": 2}}
SQUARE_ONLY = {"ps_lru", "rg_lru", "lru"}  # the LRU family: input size must equal hidden size
LIBRARY = ["gru", "gru_single_bias", "lstm_single_bias", "nested_lstm", "rhn", "grid_lstm",
           "ps_lru", "rg_lru", "lru", "lrn", "atr", "sru"]
WITHOUT_RECURRENT_MATRICES = {"lrn", "sru"}


def sizes(cell: str, input_size: int, hidden_size: int) -> tuple[int, int]:
    return (hidden_size, hidden_size) if cell in SQUARE_ONLY else (input_size, hidden_size)


def make_layer(cell: str, input_size: int = 4, hidden_size: int = 5, seed: int = 0, **options) -> RecurrentLayer:
    """A float64 layer whose parameters are all random (so every bias and gain matters)."""
    n, m = sizes(cell, input_size, hidden_size)
    layer = build_layer(cell, n, m, **{**OPTIONS.get(cell, {}), **options}).double()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * 0.5)
    return layer


def as_tuple(state) -> tuple[torch.Tensor, ...]:
    return (state,) if isinstance(state, torch.Tensor) else tuple(state)


def like_state(template, tensors):
    return tensors[0] if isinstance(template, torch.Tensor) else tuple(tensors)


def random_inputs(layer: RecurrentLayer, steps: int = 5, batch: int = 3, seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(steps, batch, layer.input_size, generator=generator, dtype=torch.float64)
    template = layer.init_state(batch)
    state = [torch.randn(s.shape, generator=generator, dtype=s.dtype) * 0.5 for s in as_tuple(template)]
    return x, like_state(template, state)


def leaves(nested) -> list[torch.Tensor]:
    if isinstance(nested, torch.Tensor):
        return [nested]
    return [leaf for item in nested for leaf in leaves(item)]


def assert_close(actual, expected):
    """Outputs and states, as nested tuples / lists of tensors, agree to float64 round-off."""
    for a, e in zip(leaves(actual), leaves(expected), strict=True):
        torch.testing.assert_close(a, e, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------------------------------
# Registry and parameter counts


def test_every_cell_is_registered():
    for cell in LIBRARY:
        assert issubclass(cell_class(cell), RecurrentLayer), cell
    assert set(LIBRARY) <= set(CELLS)


@pytest.mark.parametrize("input_size, hidden_size", [(7, 5), (24, 40)])
@pytest.mark.parametrize("cell", LIBRARY)
def test_parameter_count_matches_formula(cell, input_size, hidden_size):
    n, m = sizes(cell, input_size, hidden_size)
    layer = build_layer(cell, n, m, **OPTIONS.get(cell, {}))
    assert sum(p.numel() for p in layer.parameters()) == cell_class(cell).parameter_count(n, m, **OPTIONS.get(cell, {}))


@pytest.mark.parametrize("cell, options, formula", [
    ("nested_lstm", {"depth": 3}, lambda n, m: 4 * (n * m + m * m + m) + 2 * 4 * (2 * m * m + m)),
    ("rhn", {"recurrence_depth": 3}, lambda n, m: 2 * n * m + 3 * (2 * m * m + 2 * m)),
    ("grid_lstm", {"depth": 3}, lambda n, m: 8 * m * (n + m + 2) + 2 * 16 * m * (m + 1)),
    ("lrn", {"layer_norm": True}, lambda n, m: 3 * n * m + 6 * m),
])
def test_parameter_count_options(cell, options, formula):
    n, m = sizes(cell, 6, 9)
    assert sum(p.numel() for p in build_layer(cell, n, m, **options).parameters()) == formula(n, m)


# The published Nested-LSTM comparison (Distill's autocomplete study, TensorFlow cells): 600 units.
AUTOCOMPLETE_UNITS = 600
# 28 input symbols (<eos>/padding, space, a-z), but the authors' embedding keeps row 0 a constant
# zero vector, so 27 rows are parameters: 16,200 = 27 x 600.
TRAINABLE_EMBEDDING_ROWS = 27
TARGET_CLASSES = 16_386    # 2^14 most frequent words + <eos> + <unknown>: 9,847,986 = 601 x 16,386


def recurrent_count(cell: str, layers: int, **options) -> int:
    units = AUTOCOMPLETE_UNITS  # the embedding is 600-d, so every layer is 600 -> 600
    return sum(sum(p.numel() for p in build_layer(cell, units, units, **options).parameters())
               for _ in range(layers))


def test_autocomplete_published_parameter_counts():
    embedding = nn.Embedding(TRAINABLE_EMBEDDING_ROWS, AUTOCOMPLETE_UNITS)
    dense = nn.Linear(AUTOCOMPLETE_UNITS, TARGET_CLASSES)
    assert embedding.weight.numel() == 16_200
    assert sum(p.numel() for p in dense.parameters()) == 9_847_986
    assert recurrent_count("gru_single_bias", 2) == 4_323_600
    assert recurrent_count("lstm_single_bias", 2) == 5_764_800
    assert recurrent_count("nested_lstm", 1, depth=2) == 5_764_800


def test_autocomplete_counts_need_one_bias_per_gate():
    """torch's own parameterisations (a second bias per gate) miss the published numbers."""
    assert recurrent_count("gru", 2) == 4_323_600 + 2 * 3 * AUTOCOMPLETE_UNITS
    assert recurrent_count("lstm", 2) == 5_764_800 + 2 * 4 * AUTOCOMPLETE_UNITS


# The LRN paper's PTB models (its code: MoS decoder, emsize 280, nhid 960, nhidlast 620, 15 experts,
# tied embedding): only the non-recurrent part is shared; the reported totals are in millions.
LRN_PTB_LAYERS = [(280, 960), (960, 960), (960, 620)]
LRN_PTB_OTHER = 10_000 * 280 + (620 * 15 * 280 + 15 * 280) + 620 * 15 + 10_000


@pytest.mark.parametrize("cell, reported_millions", [("gru_single_bias", 17), ("atr", 9), ("sru", 13), ("lrn", 11)])
def test_lrn_paper_model_sizes(cell, reported_millions):
    recurrent = sum(cell_class(cell).parameter_count(n, m) for n, m in LRN_PTB_LAYERS)
    assert round((recurrent + LRN_PTB_OTHER) / 1e6) == reported_millions


# --------------------------------------------------------------------------------------------------
# Agreement with references: torch's fused layers and the papers' / authors' equations step by step


def test_single_bias_lstm_is_nn_lstm_without_hidden_bias():
    layer = make_layer("lstm_single_bias")
    reference = nn.LSTM(layer.input_size, layer.hidden_size).double()
    with torch.no_grad():
        reference.weight_ih_l0.copy_(layer.weight_ih)
        reference.weight_hh_l0.copy_(layer.weight_hh)
        reference.bias_ih_l0.copy_(layer.bias)
        reference.bias_hh_l0.zero_()
    x, (h, c) = random_inputs(layer)
    expected, (h_n, c_n) = reference(x, (h.unsqueeze(0), c.unsqueeze(0)))
    assert_close(layer(x, (h, c)), (expected, h_n.squeeze(0), c_n.squeeze(0)))


def test_single_bias_gru_is_nn_gru_when_reset_commutes():
    """With a diagonal U_c, U_c (r ⊙ h) = r ⊙ (U_c h): the reset-before and reset-after forms coincide."""
    layer = make_layer("gru_single_bias")
    m = layer.hidden_size
    with torch.no_grad():
        layer.weight_hh[2 * m:] = torch.diag(torch.randn(m, dtype=torch.float64))
    reference = nn.GRU(layer.input_size, m).double()
    with torch.no_grad():
        reference.weight_ih_l0.copy_(layer.weight_ih)   # rows r, z(=u), n(=c) in both
        reference.weight_hh_l0.copy_(layer.weight_hh)
        reference.bias_ih_l0.copy_(layer.bias)
        reference.bias_hh_l0.zero_()
    x, h = random_inputs(layer)
    expected, h_n = reference(x, h.unsqueeze(0))
    assert_close(layer(x, h), (expected, h_n.squeeze(0)))


def gates(x, h, weight_ih, weight_hh, bias, count):
    return (F.linear(x, weight_ih, bias) + F.linear(h, weight_hh)).chunk(count, dim=1)


def gru_single_bias_step(layer, x, h):
    m = layer.hidden_size
    w, u, b = layer.weight_ih, layer.weight_hh, layer.bias
    r, z = torch.sigmoid(F.linear(x, w[:2 * m], b[:2 * m]) + F.linear(h, u[:2 * m])).chunk(2, dim=1)
    c = torch.tanh(F.linear(x, w[2 * m:], b[2 * m:]) + F.linear(r * h, u[2 * m:]))
    h = z * h + (1 - z) * c
    return h, h


def nested_lstm_step(layer, x, state):
    """Moniz & Krueger's recursion as the reference implementation writes it (identity σ_c outside)."""
    h, *memories = state
    new_memories = []

    def level(inputs, hidden, d):
        i, f, g, o = gates(inputs, hidden, getattr(layer, f"weight_ih_l{d}"), getattr(layer, f"weight_hh_l{d}"),
                           getattr(layer, f"bias_l{d}"), 4)
        inner_hidden = torch.sigmoid(f) * memories[d]
        inner_input = torch.sigmoid(i) * (g if d == 0 else torch.tanh(g))
        if d == layer.depth - 1:
            cell = inner_hidden + inner_input
        else:
            cell = level(inner_input, inner_hidden, d + 1)
        new_memories.insert(0, cell)
        return torch.sigmoid(o) * torch.tanh(cell)

    h = level(x, h, 0)
    return h, (h, *new_memories)


def lstm_single_bias_step(layer, x, state):
    h, c = state
    i, f, g, o = gates(x, h, layer.weight_ih, layer.weight_hh, layer.bias, 4)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h = torch.sigmoid(o) * torch.tanh(c)
    return h, (h, c)


def rhn_step(layer, x, s):
    m = layer.hidden_size
    for depth in range(layer.recurrence_depth):
        a = F.linear(s, getattr(layer, f"weight_hh_l{depth}"), getattr(layer, f"bias_l{depth}"))
        if depth == 0:
            a = a + F.linear(x, layer.weight_ih)
        h, t = torch.tanh(a[:, :m]), torch.sigmoid(a[:, m:])
        s = h * t + s * (1 - t)
    return s, s


def grid_lstm_step(layer, x, state):
    """Kalchbrenner et al.'s 2-D block: both LSTM transforms read H = [x; h]."""
    hs, ms = state
    depth_memory = torch.zeros_like(hs[:, 0])
    new_h, new_m = [], []
    for row_index, row in enumerate(layer.rows):
        h, m = hs[:, row_index], ms[:, row_index]
        time, depth_params = row.time, (row.depth_weight_ih, row.depth_weight_hh, row.depth_bias_ih)
        it, ft, gt, ot = gates(x, h, time.weight_ih_l0, time.weight_hh_l0, time.bias_ih_l0 + time.bias_hh_l0, 4)
        i, f, g, o = gates(x, h, *depth_params[:2], depth_params[2] + row.depth_bias_hh, 4)
        new_m.append(torch.sigmoid(ft) * m + torch.sigmoid(it) * torch.tanh(gt))
        new_h.append(torch.sigmoid(ot) * torch.tanh(new_m[-1]))
        depth_memory = torch.sigmoid(f) * depth_memory + torch.sigmoid(i) * torch.tanh(g)
        x = torch.sigmoid(o) * torch.tanh(depth_memory)
    return x, (torch.stack(new_h, dim=1), torch.stack(new_m, dim=1))


def lattice_step(layer, x, h):
    """The authors' LRU cells (chahuja/lru, model.py) in their notation: z weights the new state."""
    m = layer.hidden_size
    r, keep = gates(x, h, layer.weight_ih[:2 * m], layer.weight_hh[:2 * m], layer.bias[:2 * m], 2)
    z_time = 1 - torch.sigmoid(keep)
    if layer.decoupled_gates == 0:
        z_depth, q = z_time, torch.sigmoid(r)
    elif layer.decoupled_gates == 1:
        z_depth = z_time
        q = torch.sigmoid(F.linear(x, layer.depth_gate_weight_ih, layer.depth_gate_bias)
                          + F.linear(h, layer.depth_gate_weight_hh))
    else:
        keep_depth, q = gates(x, h, layer.depth_gate_weight_ih, layer.depth_gate_weight_hh, layer.depth_gate_bias, 2)
        z_depth, q = 1 - torch.sigmoid(keep_depth), torch.sigmoid(q)
    h0_cap = torch.tanh(F.linear(x, layer.weight_ih[2 * m:], layer.bias[2 * m:])
                        + F.linear(torch.sigmoid(r) * h, layer.weight_hh[2 * m:]))
    h1_cap = torch.tanh(F.linear(h, layer.depth_candidate_weight_hh, layer.depth_candidate_bias)
                        + F.linear(q * x, layer.depth_candidate_weight_ih))
    return z_depth * h1_cap + (1 - z_depth) * x, z_time * h0_cap + (1 - z_time) * h


def lrn_step(layer, x, h):
    q, k, v = layer.project(x).chunk(3, dim=1)
    h = torch.sigmoid(k + h) * v + torch.sigmoid(q - h) * h
    h = torch.tanh(h) if layer.activation == "tanh" else h
    return h, h


def atr_step(layer, x, h):
    p = F.linear(x, layer.weight_ih, layer.bias_ih)
    q = F.linear(h, layer.weight_hh, layer.bias_hh)
    h = torch.tanh(torch.sigmoid(p + q) * p + torch.sigmoid(p - q) * h)
    return h, h


def sru_step(layer, x, c):
    forget, candidate, reset, highway = F.linear(x, layer.weight_ih, layer.bias).chunk(4, dim=1)
    f = torch.sigmoid(forget + layer.forget_weight * c)
    r = torch.sigmoid(reset + layer.reset_weight * c)
    c = f * c + (1 - f) * candidate
    return r * c + (1 - r) * highway, c


REFERENCE_STEPS = {
    ("gru_single_bias", ()): gru_single_bias_step,
    ("lstm_single_bias", ()): lstm_single_bias_step,
    ("nested_lstm", (("depth", 2),)): nested_lstm_step,
    ("nested_lstm", (("depth", 3),)): nested_lstm_step,
    ("rhn", (("recurrence_depth", 3),)): rhn_step,
    ("grid_lstm", (("depth", 2),)): grid_lstm_step,
    ("ps_lru", ()): lattice_step,
    ("rg_lru", ()): lattice_step,
    ("lru", ()): lattice_step,
    ("lrn", (("activation", "tanh"),)): lrn_step,
    ("lrn", (("activation", "identity"), ("layer_norm", True))): lrn_step,
    ("atr", ()): atr_step,
    ("sru", ()): sru_step,
}


@pytest.mark.parametrize("cell, options", list(REFERENCE_STEPS), ids=lambda v: str(v))
def test_layer_matches_step_by_step_reference(cell, options):
    layer = make_layer(cell, **dict(options))
    x, state = random_inputs(layer)
    step = REFERENCE_STEPS[cell, options]
    outputs, expected_state = [], state
    with torch.no_grad():
        for t in range(x.size(0)):
            y, expected_state = step(layer, x[t], expected_state)
            outputs.append(y)
        y, new_state = layer(x, state)
    assert_close(y, torch.stack(outputs))
    assert_close(new_state, expected_state)


# --------------------------------------------------------------------------------------------------
# The LRU family: tying the decoupled weights back gives the unit it was derived from


SHARED_LATTICE_PARAMETERS = ("weight_ih", "weight_hh", "bias", "depth_candidate_weight_ih",
                             "depth_candidate_weight_hh", "depth_candidate_bias")


def tie_(target: RecurrentLayer, source: RecurrentLayer, depth_gates: dict[str, torch.Tensor]) -> None:
    """target := source's time GRU and depth projected state, and the depth gates given."""
    with torch.no_grad():
        for name in SHARED_LATTICE_PARAMETERS:
            getattr(target, name).copy_(getattr(source, name))
        for name, value in depth_gates.items():
            getattr(target, name).copy_(value)


def test_lru_with_update_gates_tied_is_rg_lru():
    rg_lru, lru = make_layer("rg_lru", seed=1), make_layer("lru", seed=2)
    m = lru.hidden_size
    keep = slice(m, 2 * m)  # the time GRU's keep-gate rows
    tie_(lru, rg_lru, {"depth_gate_weight_ih": torch.cat([rg_lru.weight_ih[keep], rg_lru.depth_gate_weight_ih]),
                       "depth_gate_weight_hh": torch.cat([rg_lru.weight_hh[keep], rg_lru.depth_gate_weight_hh]),
                       "depth_gate_bias": torch.cat([rg_lru.bias[keep], rg_lru.depth_gate_bias])})
    x, h = random_inputs(lru)
    assert_close(lru(x, h), rg_lru(x, h))


def test_rg_lru_with_reset_gates_tied_is_ps_lru():
    ps_lru, rg_lru = make_layer("ps_lru", seed=1), make_layer("rg_lru", seed=2)
    m = ps_lru.hidden_size
    tie_(rg_lru, ps_lru, {"depth_gate_weight_ih": ps_lru.weight_ih[:m], "depth_gate_weight_hh": ps_lru.weight_hh[:m],
                          "depth_gate_bias": ps_lru.bias[:m]})
    x, h = random_inputs(ps_lru)
    assert_close(rg_lru(x, h), ps_lru(x, h))


def test_ps_lru_time_flow_is_the_gru():
    ps_lru, gru = make_layer("ps_lru", seed=1), make_layer("gru_single_bias", 5, 5, seed=2)
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias"):
            getattr(gru, name).copy_(getattr(ps_lru, name))
    x, h = random_inputs(ps_lru)
    gru_hidden, _ = gru(x, h)
    for steps in range(1, x.size(0) + 1):  # the carried state is the time output after each prefix
        assert_close(ps_lru(x[:steps], h)[1], gru_hidden[steps - 1])


@pytest.mark.parametrize("cell", ["ps_lru", "rg_lru", "lru"])
def test_lattice_is_symmetric_under_swapping_time_and_depth(cell):
    """With each depth weight tied to its time mirror, swapping the inputs (x, h) swaps the outputs."""
    layer = make_layer(cell)
    m = layer.hidden_size
    with torch.no_grad():
        w, u, b = layer.weight_ih, layer.weight_hh, layer.bias
        layer.depth_candidate_weight_ih.copy_(u[2 * m:])
        layer.depth_candidate_weight_hh.copy_(w[2 * m:])
        layer.depth_candidate_bias.copy_(b[2 * m:])
        if cell == "ps_lru":   # shared gates must themselves be symmetric
            u[:2 * m].copy_(w[:2 * m])
        if cell == "rg_lru":   # q mirrors r; the shared keep gate must be symmetric
            u[m:2 * m].copy_(w[m:2 * m])
            layer.depth_gate_weight_ih.copy_(u[:m])
            layer.depth_gate_weight_hh.copy_(w[:m])
            layer.depth_gate_bias.copy_(b[:m])
        if cell == "lru":      # u_d mirrors u, q mirrors r
            layer.depth_gate_weight_ih.copy_(torch.cat([u[m:2 * m], u[:m]]))
            layer.depth_gate_weight_hh.copy_(torch.cat([w[m:2 * m], w[:m]]))
            layer.depth_gate_bias.copy_(torch.cat([b[m:2 * m], b[:m]]))
    x, h = random_inputs(layer, steps=1)
    depth, time = layer(x, h)
    swapped_depth, swapped_time = layer(h.unsqueeze(0), x[0])
    assert_close((swapped_depth[0], swapped_time), (time, depth[0]))


# --------------------------------------------------------------------------------------------------
# Gradients, state carry, weight drop


@pytest.mark.parametrize(("cell", "options"), [(cell, {}) for cell in LIBRARY] + [("nested_lstm", {"depth": 3})])
def test_gradients_match_finite_differences(cell, options):
    layer = make_layer(cell, 3, 4, **options)
    x, state = random_inputs(layer, steps=4, batch=2)
    names = [name for name, _ in layer.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in layer.parameters()]
    state = [s.requires_grad_() for s in as_tuple(state)]
    template = layer.init_state(2)

    def run(x, *tensors):
        given_state, given_params = tensors[:len(state)], tensors[len(state):]
        y, new_state = functional_call(layer, dict(zip(names, given_params)), (x, like_state(template, given_state)))
        return (y, *as_tuple(new_state))

    assert torch.autograd.gradcheck(run, (x.requires_grad_(), *state, *params))


ONEDNN = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this torch has no oneDNN")


@pytest.fixture
def onednn_for_every_size(monkeypatch):
    """The oneDNN path for the tests' small weights too (it normally starts at ONEDNN_MIN_WEIGHT)."""
    monkeypatch.setattr(recurrence, "ONEDNN_MIN_WEIGHT", 0)


def test_small_weights_keep_the_blas_product():
    assert StepProduct(torch.zeros(512, 256), 32).packed is None
    assert StepProduct(torch.zeros(1024, 256), 32).packed is not None or not torch.backends.mkldnn.is_available()


@ONEDNN
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("with_add", [False, True])
def test_onednn_step_product_is_the_blas_product(with_bias, with_add, onednn_for_every_size):
    generator = torch.Generator().manual_seed(0)
    weight, x, add, bias = (torch.randn(*shape, generator=generator) for shape in [(40, 24), (5, 24), (5, 40), (40,)])
    product = StepProduct(weight, 5, bias if with_bias else None)
    assert product.packed is not None, "float32 on a CPU must take the oneDNN path"
    expected = x @ weight.t() + (bias if with_bias else 0) + (add if with_add else 0)
    out = torch.empty(5, 40)
    result = product(x, add=add if with_add else None, out=out)
    assert result is out
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


@ONEDNN
@pytest.mark.filterwarnings("ignore:TF32 acceleration")  # torch.backends.mkldnn.flags() says so on any CPU
@pytest.mark.parametrize(("cell", "options"), [(cell, {}) for cell in LIBRARY] + [("nested_lstm", {"depth": 3})])
def test_onednn_path_matches_the_blas_path(cell, options, onednn_for_every_size):
    """float32 forward and backward with the step products in oneDNN (StepProduct) equal those with
    torch.addmm (oneDNN switched off), for every cell."""
    def forward_backward(onednn: bool):
        torch.manual_seed(0)
        n, m = sizes(cell, 16, 24)
        layer = build_layer(cell, n, m, **{**OPTIONS.get(cell, {}), **options})
        x = torch.randn(6, 5, n, requires_grad=True)
        with torch.backends.mkldnn.flags(enabled=onednn):
            assert (StepProduct(torch.zeros(3, 3), 5).packed is not None) == onednn
            y, state = layer(x, layer.init_state(5))
            (y.square().sum() + sum(s.sum() for s in as_tuple(state))).backward()
        return [y, *as_tuple(state), x.grad, *(p.grad for p in layer.parameters())]

    for fast, plain in zip(forward_backward(True), forward_backward(False)):
        torch.testing.assert_close(fast, plain, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cell", LIBRARY)
def test_two_stacked_layers_carry_state_across_bptt_windows(cell):
    first, second = make_layer(cell, 4, 5, seed=0), make_layer(cell, 5, 5, seed=1)
    x, _ = random_inputs(first, steps=8)
    states = [first.init_state(3), second.init_state(3)]

    def run(x, states):
        y, s1 = first(x, states[0])
        y, s2 = second(y, states[1])
        return y, [s1, s2]

    whole, whole_states = run(x, states)
    head, head_states = run(x[:4], states)
    tail, tail_states = run(x[4:], head_states)
    assert_close(torch.cat([head, tail]), whole)
    for carried, expected in zip(tail_states, whole_states):
        assert_close(carried, expected)


@pytest.mark.parametrize("cell", LIBRARY)
def test_weight_drop_reaches_the_recurrent_weights(cell):
    layer = make_layer(cell)
    names = layer.recurrent_weight_names
    assert bool(names) == (cell not in WITHOUT_RECURRENT_MATRICES)
    params = dict(layer.named_parameters())
    assert set(names) <= set(params)
    x, state = random_inputs(layer)
    if names:  # forward reads the swapped tensors: zeros swapped in == zeros written in
        zeroed = copy.deepcopy(layer)
        with torch.no_grad():
            for name in names:
                dict(zeroed.named_parameters())[name].zero_()
        swapped = functional_call(layer, {name: torch.zeros_like(params[name]) for name in names}, (x, state))
        assert_close(swapped, zeroed(x, state))
    torch.manual_seed(0)
    y, _ = run_with_weight_drop(layer, x, state, p=0.5, training=True)
    y.sum().backward()
    for name in names:
        assert params[name].grad is not None and params[name].grad.abs().sum() > 0, name


# The CPU formulations of cells/gru.py and cells/lru.py: nn.GRU's form as a hand-written Function,
# and the PS-LRU / RG-LRU gates taken from their time GRU's recurrence, against autograd through the
# step-by-step equations, in float32 as they train: outputs and every gradient to float32 rounding.

FASTER_ON_CPU = ["gru", "gru_single_bias", "ps_lru", "rg_lru", "lru"]


def reference_sequence(cell: str, layer: RecurrentLayer, x: torch.Tensor, h: torch.Tensor):
    """The layer's outputs and last state through its reference: nn.GRU itself for ``gru``, else the
    step-by-step equations (REFERENCE_STEPS), each step recorded by autograd."""
    if cell == "gru":
        y, h_n = layer.rnn(x, h.unsqueeze(0))
        return y, h_n.squeeze(0)
    outputs = []
    for t in range(x.size(0)):
        y, h = REFERENCE_STEPS[cell, ()](layer, x[t], h)
        outputs.append(y)
    return torch.stack(outputs), h


@pytest.mark.parametrize("cell", FASTER_ON_CPU)
def test_float32_outputs_and_gradients_match_the_reference(cell):
    layer = make_layer(cell, 6, 8).float()
    x, h = (t.float() for t in random_inputs(layer, steps=7, batch=5))
    generator = torch.Generator().manual_seed(2)
    grad_y, grad_h = torch.randn(7, 5, 8, generator=generator), torch.randn(5, 8, generator=generator)
    inputs = [x.requires_grad_(), h.requires_grad_(), *layer.parameters()]

    def outputs_and_gradients(y, h_n):
        return [y, h_n, *torch.autograd.grad((y * grad_y).sum() + (h_n * grad_h).sum(), inputs)]

    for actual, expected in zip(outputs_and_gradients(*layer(x, h)),
                                outputs_and_gradients(*reference_sequence(cell, layer, x, h)), strict=True):
        torch.testing.assert_close(actual, expected)


def test_gru_outputs_are_nn_grus_to_the_bit():
    """The CPU recurrence takes nn.GRU's operators in its order (the backward sums in another order)."""
    torch.manual_seed(0)
    layer = build_layer("gru", 24, 40)
    x, h = torch.randn(9, 6, 24), torch.randn(6, 40)
    y, h_n = layer(x, h)
    expected, expected_h_n = layer.rnn(x, h.unsqueeze(0))
    assert torch.equal(y, expected) and torch.equal(h_n, expected_h_n.squeeze(0))


@pytest.mark.parametrize("cell, options, message", [
    ("lru", {}, "input_size=4 must equal hidden_size=5"),
    ("grid_lstm", {"depth": 0}, "depth=0"),
    ("nested_lstm", {"depth": 1}, "depth=1"),
    ("rhn", {"recurrence_depth": 0}, "recurrence_depth=0"),
    ("lrn", {"activation": "relu"}, "activation='relu'"),
])
def test_invalid_options_are_named(cell, options, message):
    with pytest.raises(ValueError, match=message):
        build_layer(cell, 4, 5, **options)


# --------------------------------------------------------------------------------------------------
# Learning: recall the token seen k steps ago


VOCAB, DELAY, STEPS, BATCH, UNITS, UPDATES = 8, 2, 16, 32, 32, 150


@pytest.fixture
def one_thread():
    """Tiny products gain nothing from threads, and on a busy machine their synchronisation dominates."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("cell", LIBRARY)
def test_learns_to_recall_a_token_seen_k_steps_ago(cell, one_thread):
    torch.manual_seed(0)
    embedding = nn.Embedding(VOCAB, UNITS)
    layer = build_layer(cell, UNITS, UNITS, **OPTIONS.get(cell, {}))
    readout = nn.Linear(UNITS, VOCAB)
    parameters = [*embedding.parameters(), *layer.parameters(), *readout.parameters()]
    optimizer = torch.optim.Adam(parameters, lr=0.03)
    generator = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(UPDATES):
        tokens = torch.randint(VOCAB, (STEPS, BATCH), generator=generator)
        targets = torch.full_like(tokens, -100)
        targets[DELAY:] = tokens[:-DELAY]   # the first DELAY steps have nothing to recall
        y, _ = layer(embedding(tokens), layer.init_state(BATCH))
        loss = F.cross_entropy(readout(y).flatten(0, 1), targets.flatten(), ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    chance = math.log(VOCAB)
    assert sum(losses[-10:]) / 10 < 0.5 * chance
