"""LSTM and PRU layers: parameter counts vs the PRU paper, equivalence with reference computations,
gradients, state carry across BPTT windows, weight-drop compatibility and option validation."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

from rnnrepro.cells import build_layer
from rnnrepro.cells.counting import (lstm_params, pru_params, pyramid_level_sizes, tied_lm_layer_sizes,
                                     tied_lm_params)
from rnnrepro.cells.lstm import LSTMLayer
from rnnrepro.cells.pru import PRULayer

PTB_VOCAB = 10_000
WT2_VOCAB = 33_278
EMBEDDING = 400


def parameter_count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def shape_only(cell: str, input_size: int, hidden_size: int, **options) -> torch.nn.Module:
    """The real module class with every parameter on the meta device: true shapes, no memory, no init."""
    with torch.device("meta"):
        return build_layer(cell, input_size, hidden_size, **options)


def randomize_(layer: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Replace the (partly zero) initial values so every parameter, biases included, matters."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * 0.3)
    return layer


def random_inputs(layer, seq_len: int, batch: int, seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(seq_len, batch, layer.input_size, generator=generator, dtype=torch.float64)
    h = torch.randn(batch, layer.hidden_size, generator=generator, dtype=torch.float64) * 0.5
    c = torch.randn(batch, layer.hidden_size, generator=generator, dtype=torch.float64) * 0.5
    return x, (h, c)


# --------------------------------------------------------------------------------------------------
# Parameter counts (Tables 1 and 3 of the PRU paper)

TABLE1 = {  # model id: (cell, hidden size, cell options, PTB total, paper PTB M, paper WT-2 M)
    "lstm_m1000": ("lstm", 1000, {}, 19_869_200, 20, 29),
    "lstm_m1200": ("lstm", 1200, {}, 25_792_400, 26, 35),
    "lstm_m1400": ("lstm", 1400, {}, 32_675_600, 33, 42),
    "pru_g1_k2_m1000": ("pru", 1000, {"groups": 1, "levels": 2}, 18_969_200, 19, 28),
    "pru_g2_k2_m1200": ("pru", 1200, {"groups": 2, "levels": 2}, 18_512_400, 19, 28),
    "pru_g4_k2_m1400": ("pru", 1400, {"groups": 4, "levels": 2}, 18_895_600, 19, 28),
}
WT2_EXTRA = 9_334_478  # (33,278 - 10,000) x 400 embedding rows + as many decoder biases


def formula_params(cell: str, input_size: int, hidden_size: int, options: dict) -> int:
    if cell == "lstm":
        return lstm_params(input_size, hidden_size)
    return pru_params(input_size, hidden_size, **options)


@pytest.fixture(scope="module")
def table1_recurrent_params() -> dict[str, int]:
    """Recurrent parameters of each 3-layer tied Table-1 model, counted on instantiated layers."""
    counts = {}
    for model, (cell, hidden, options, *_) in TABLE1.items():
        layer_sizes = tied_lm_layer_sizes(EMBEDDING, hidden, 3)
        counts[model] = sum(parameter_count(shape_only(cell, n, m, **options)) for n, m in layer_sizes)
        assert counts[model] == sum(formula_params(cell, n, m, options) for n, m in layer_sizes)
    return counts


@pytest.mark.parametrize("model", list(TABLE1))
def test_table1_parameter_counts(model, table1_recurrent_params):
    _, _, _, ptb_total, paper_ptb, paper_wt2 = TABLE1[model]
    ptb = tied_lm_params(PTB_VOCAB, EMBEDDING, table1_recurrent_params[model])
    wt2 = tied_lm_params(WT2_VOCAB, EMBEDDING, table1_recurrent_params[model])
    assert ptb == ptb_total
    assert wt2 == ptb_total + WT2_EXTRA
    assert (round(ptb / 1e6), round(wt2 / 1e6)) == (paper_ptb, paper_wt2)


TABLE3 = {  # row: (context transform, input transform, residual, recurrent params, PTB total or None)
    "R1": ("lt", "lt", False, 2_884_800, 8_894_800),
    "R4": ("lt", "pt", True, 2_490_000, 8_500_000),
    "R5": ("pt", "pt", True, 2_095_200, 8_105_200),
    "R6": ("lt", "pt", False, 2_490_000, 8_500_000),
}
PAPER_TABLE3_RU_M = {"R1": 2.9, "R4": 2.5, "R5": 2.1, "R6": 2.5}


@pytest.mark.parametrize("row", list(TABLE3))
def test_table3_rows_that_follow_from_the_code(row):
    context, inp, residual, recurrent, ptb_total = TABLE3[row]
    options = dict(levels=4, groups=4, input_transform=inp, context_transform=context)
    layer = shape_only("pru", 600, 600, residual=residual, **options)
    assert parameter_count(layer) == pru_params(600, 600, **options) == recurrent
    assert tied_lm_params(PTB_VOCAB, 600, recurrent) == ptb_total
    assert round(recurrent / 1e6, 1) == PAPER_TABLE3_RU_M[row]


def test_table3_rows_the_code_does_not_reproduce():
    # Paper: R2 (GLT/GLT) 0.5 M and R3 (GLT/PT) 0.64 M; the released cell gives these (see pru.py).
    r2 = shape_only("pru", 600, 600, levels=4, groups=4, residual=False, input_transform="glt",
                    context_transform="glt")
    r3 = shape_only("pru", 600, 600, levels=4, groups=4)
    assert parameter_count(r2) == 724_800
    assert parameter_count(r3) == 1_410_000


def test_fig5_k2_g4_reduction_follows_the_code_formula():
    assert pru_params(600, 600, levels=2, groups=4) == 1_624_800  # 43.7% fewer than LSTM's 2,884,800


@pytest.mark.parametrize("sizes", [(40, 100), (100, 100), (100, 40), (7, 5)])
def test_pru_with_one_group_and_one_level_has_an_lstms_parameter_count(sizes):
    assert parameter_count(PRULayer(*sizes, levels=1, groups=1)) == parameter_count(LSTMLayer(*sizes))


def test_pyramid_level_sizes_follow_the_code_split():
    assert pyramid_level_sizes(400, 1400, 2) == ([400, 200], [1050, 350])
    assert pyramid_level_sizes(1400, 400, 2) == ([1400, 700], [300, 100])
    assert pyramid_level_sizes(600, 600, 3) == ([600, 300, 150], [375, 150, 75])
    assert pyramid_level_sizes(600, 600, 4) == ([600, 300, 150, 75], [337, 150, 75, 38])


def test_conv_subsampling_adds_one_kernel_per_level():
    layer = PRULayer(60, 60, levels=4, groups=1, subsample="conv")
    assert parameter_count(layer) == pru_params(60, 60, 4, 1, subsample="conv") == pru_params(60, 60, 4, 1) + 3 * 3


def test_initialisation_follows_the_code():
    layer = PRULayer(40, 48, levels=2, groups=4)
    for level in layer.input_transform.levels:  # orthogonal (tall: orthonormal columns), zero bias
        torch.testing.assert_close(level.weight.T @ level.weight, torch.eye(level.weight.shape[1]))
        assert not level.bias.any()
    glt = layer.context_transform  # torch flattens the 3-D weight: one unit-norm vector per group
    torch.testing.assert_close(glt.weight.flatten(1).norm(dim=1), torch.ones(4))
    assert not glt.bias.any()
    lstm = LSTMLayer(40, 48)
    assert all(p.abs().max() <= 48 ** -0.5 for p in lstm.parameters())  # nn.LSTM's U(±1/√M)


# --------------------------------------------------------------------------------------------------
# Equivalences, float64

def lstm_order(weight: torch.Tensor) -> torch.Tensor:
    """Rows in PRU gate order (f, g, i, o) -> nn.LSTM's (i, f, g, o)."""
    f, g, i, o = weight.chunk(4, dim=0)
    return torch.cat([i, f, g, o])


@pytest.mark.parametrize("sizes", [(5, 7), (6, 6)])
def test_pru_with_one_group_one_level_and_no_residual_is_an_lstm(sizes):
    pru = randomize_(PRULayer(*sizes, levels=1, groups=1, residual=False).double())
    lstm = LSTMLayer(*sizes).double()
    projection = pru.input_transform.levels[0]
    context = pru.context_transform
    with torch.no_grad():
        lstm.rnn.weight_ih_l0.copy_(lstm_order(projection.weight))
        lstm.rnn.bias_ih_l0.copy_(lstm_order(projection.bias))
        lstm.rnn.weight_hh_l0.copy_(lstm_order(context.weight[0].t()))
        lstm.rnn.bias_hh_l0.copy_(lstm_order(context.bias[0]))
    x, state = random_inputs(pru, seq_len=6, batch=3)
    y_pru, (h_pru, c_pru) = pru(x, state)
    y_lstm, (h_lstm, c_lstm) = lstm(x, state)
    torch.testing.assert_close(y_pru, y_lstm, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(h_pru, h_lstm, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(c_pru, c_lstm, rtol=1e-12, atol=1e-12)


# pooling kernels for levels 1..K-1, written out: the authors' code's schedule and the paper's text's
POOLING_KERNELS = {"code": {2: [3], 3: [5, 3], 4: [7, 5, 3]}, "paper": {2: [3], 3: [3, 3], 4: [3, 3, 3]}}


def reference_subsample(kind: str, x: torch.Tensor, kernel: int) -> torch.Tensor:
    """x: (B, 1, n), the code's 1-channel view of a vector."""
    if kind == "avg":
        return F.avg_pool1d(x, kernel, stride=2, padding=(kernel - 1) // 2)
    if kind == "max":
        return F.max_pool1d(x, kernel, stride=2, padding=(kernel - 1) // 2)
    return x[..., ::2]


def reference_level(linear: torch.nn.Module, level_input: torch.Tensor) -> list[torch.Tensor]:
    """One pyramid level's four gate chunks (f, g, i, o). A grouped level: the input cut into as many
    contiguous near-equal parts as the level has (torch.tensor_split), part j feeding unit group j of
    every gate."""
    parts = getattr(linear, "parts", [linear])
    pieces = torch.tensor_split(level_input, len(parts), dim=1)
    per_part = [torch.chunk(F.linear(piece, part.weight, part.bias), 4, dim=1) for part, piece in zip(parts, pieces)]
    return [torch.cat([chunks[gate] for chunks in per_part], dim=1) for gate in range(4)]


def reference_pru(layer: PRULayer, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor):
    """The authors' per-step PRU (PRU.py + PRUTransforms.py) written out, one time step at a time."""
    pyramid, glt = layer.input_transform.levels, layer.context_transform
    batch, hidden, groups = x.shape[1], layer.hidden_size, glt.groups
    kernels = POOLING_KERNELS[layer.pooling_kernels][len(pyramid)]
    outputs = []
    for x_t in x:
        level_input = x_t.unsqueeze(1)
        gates = None
        for level, linear in enumerate(pyramid):
            if level > 0:
                level_input = reference_subsample(layer.subsample, level_input, kernels[level - 1])
            chunks = reference_level(linear, level_input.squeeze(1))
            gates = chunks if gates is None else [torch.cat([a, b], 1) for a, b in zip(gates, chunks)]
        if layer.residual and x_t.shape[1] == hidden:
            gates = [gate + x_t for gate in gates]
        grouped_h = torch.cat(torch.split(h.unsqueeze(0), hidden // groups, dim=2), 0)  # (g, B, M/g)
        out = torch.bmm(grouped_h, glt.weight).transpose(0, 1) + glt.bias  # (B, g, 4M/g)
        context = [part.reshape(batch, -1) for part in torch.split(out, hidden // groups, dim=2)]
        f, g, i, o = [a + b for a, b in zip(gates, context)]
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        outputs.append(h)
    return torch.stack(outputs), h, c


@pytest.mark.parametrize("subsample", ["avg", "max", "skip"])
@pytest.mark.parametrize("levels", [2, 3])
@pytest.mark.parametrize("sizes", [(14, 14), (9, 14)])  # residual active / inactive; odd level lengths
def test_hoisted_pru_equals_the_per_step_reference(sizes, levels, subsample):
    layer = randomize_(PRULayer(*sizes, levels=levels, groups=2, subsample=subsample).double())
    x, (h, c) = random_inputs(layer, seq_len=7, batch=3)
    y, (h_last, c_last) = layer(x, (h, c))
    y_ref, h_ref, c_ref = reference_pru(layer, x, h, c)
    torch.testing.assert_close(y, y_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(h_last, h_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(c_last, c_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("options", [
    dict(levels=3, pyramid_groups=2),                       # levels of 15 / 7 / 4 inputs: some cut unevenly
    dict(levels=2, pyramid_groups=3, subsample="max"),
    dict(levels=3, pooling_kernels="paper"),                # kernel 3 at every level, not 5, 3
    dict(levels=4, pooling_kernels="paper", subsample="max"),
])
@pytest.mark.parametrize("sizes", [(14, 14), (15, 14)])
def test_pyramid_options_equal_the_per_step_reference(sizes, options):
    layer = randomize_(PRULayer(*sizes, groups=2, **options).double())
    x, (h, c) = random_inputs(layer, seq_len=6, batch=3)
    y, (h_last, c_last) = layer(x, (h, c))
    y_ref, h_ref, c_ref = reference_pru(layer, x, h, c)
    torch.testing.assert_close(y, y_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(h_last, h_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(c_last, c_ref, rtol=1e-12, atol=1e-12)


def test_paper_pooling_kernels_differ_from_the_codes_beyond_two_levels():
    code = randomize_(PRULayer(16, 16, levels=3, groups=2).double())
    paper = copy.deepcopy(code)
    paper.input_transform.kernel_sizes = POOLING_KERNELS["paper"][3]
    assert code.input_transform.kernel_sizes == [5, 3]
    assert PRULayer(16, 16, levels=3, groups=2, pooling_kernels="paper").input_transform.kernel_sizes == [3, 3]
    x, state = random_inputs(code, seq_len=2, batch=2)
    assert not torch.allclose(code(x, state)[0], paper(x, state)[0])
    # no parameter count changes with the schedule
    assert parameter_count(PRULayer(16, 16, levels=3, groups=2, pooling_kernels="paper")) == parameter_count(code)


@pytest.mark.parametrize("sizes, options", [
    ((600, 600), dict(levels=4, groups=4, pyramid_groups=4)),             # R3 grouped: 75, 337, 38 cut unevenly
    ((600, 600), dict(levels=4, groups=4, pyramid_groups=4, context_transform="pt")),
    ((400, 1400), dict(levels=2, groups=4, pyramid_groups=4)),
    ((37, 22), dict(levels=3, groups=2, pyramid_groups=3, subsample="conv")),
])
def test_grouped_pyramid_counts_follow_the_formula(sizes, options):
    assert parameter_count(shape_only("pru", *sizes, **options)) == pru_params(*sizes, **options)


def test_grouped_pyramid_levels_are_block_diagonal_and_initialised_like_the_code():
    layer = PRULayer(10, 12, levels=2, groups=2, pyramid_groups=3)
    level = layer.input_transform.levels[0]  # n = 10 -> parts 4, 3, 3; d = 9 -> 3, 3, 3 units per gate
    assert [(p.weight.shape, p.bias.shape) for p in level.parts] == [((12, 4), (12,)), ((12, 3), (12,)),
                                                                       ((12, 3), (12,))]
    for part in level.parts:
        torch.testing.assert_close(part.weight @ part.weight.T, torch.eye(part.weight.shape[0])) \
            if part.weight.shape[0] <= part.weight.shape[1] else \
            torch.testing.assert_close(part.weight.T @ part.weight, torch.eye(part.weight.shape[1]))
        assert not part.bias.any()
    x = torch.zeros(1, 10)
    x[0, 5] = 1.0  # an input of the second group reaches only the second group's units of each gate
    out = level(x) - level(torch.zeros(1, 10))
    assert out[0, :, 3:6].abs().sum() > 0 and not out[0, :, :3].any() and not out[0, :, 6:].any()
    assert "groups=3" in repr(layer.input_transform)


def test_conv_subsampling_shapes_and_gradients():
    layer = PRULayer(13, 16, levels=3, groups=2, subsample="conv").double()
    x, state = random_inputs(layer, seq_len=4, batch=2)
    y, (h, c) = layer(x, state)
    assert y.shape == (4, 2, 16) and h.shape == c.shape == (2, 16)
    y.sum().backward()
    for conv in layer.input_transform.subsamplers:
        assert conv.weight.grad is not None and conv.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("options", [
    dict(input_transform="pt", context_transform="pt"),
    dict(input_transform="lt", context_transform="lt", residual=False),
    dict(input_transform="glt", context_transform="glt", residual=False),
])
def test_table3_variants_equal_their_dense_per_step_computation(options):
    """Every transformation is a per-step map of one vector; running it step by step must agree."""
    layer = randomize_(PRULayer(8, 8, levels=2, groups=2, **options).double())
    x, (h, c) = random_inputs(layer, seq_len=5, batch=2)
    y, _ = layer(x, (h, c))
    outputs = []
    for x_t in x:
        pre = layer.input_transform(x_t) + layer.context_transform(h)  # (B, 4, M), gates (f, g, i, o)
        if layer.residual_active:
            pre = pre + x_t.unsqueeze(1)
        f, g, i, o = pre.unbind(1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        outputs.append(h)
    torch.testing.assert_close(y, torch.stack(outputs), rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------------------
# Gradients, state carry, weight drop

def make_layer(cell: str):
    if cell == "lstm":
        return LSTMLayer(3, 4).double()
    return randomize_(PRULayer(4, 4, levels=2, groups=2).double())


@pytest.mark.parametrize("cell", ["lstm", "pru"])
def test_gradcheck(cell):
    layer = make_layer(cell)
    x, (h, c) = random_inputs(layer, seq_len=3, batch=2)
    name = layer.recurrent_weight_names[0]
    weight = layer.get_parameter(name).detach().clone()
    inputs = [t.requires_grad_() for t in (x, h, c, weight)]

    def run(x, h, c, weight):
        y, (h, c) = functional_call(layer, {name: weight}, (x, (h, c)))
        return y, h, c

    assert torch.autograd.gradcheck(run, inputs)


@pytest.mark.parametrize("cell", ["lstm", "pru"])
def test_state_carry_equals_one_long_call(cell):
    layer = make_layer(cell)
    x, state = random_inputs(layer, seq_len=8, batch=3)
    y_full, (h_full, c_full) = layer(x, state)
    y_first, carried = layer(x[:5], state)
    y_second, (h_end, c_end) = layer(x[5:], carried)
    torch.testing.assert_close(torch.cat([y_first, y_second]), y_full, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(h_end, h_full, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(c_end, c_full, rtol=1e-12, atol=1e-12)


def test_init_state_is_zero_and_follows_the_layer():
    for layer in (LSTMLayer(3, 4).double(), PRULayer(3, 4, levels=2, groups=2)):
        h, c = layer.init_state(5)
        weight = next(layer.parameters())
        assert h.shape == c.shape == (5, 4) and h.dtype == weight.dtype
        assert not h.any() and not c.any()
        assert layer.init_state(2, dtype=torch.float16)[0].dtype == torch.float16


WEIGHT_DROP_LAYERS = {
    "lstm": lambda: LSTMLayer(5, 6),
    "pru": lambda: PRULayer(6, 6, levels=2, groups=2),
    "pru_lt_context": lambda: PRULayer(6, 6, levels=2, groups=2, context_transform="lt"),
    "pru_pt_context": lambda: PRULayer(6, 6, levels=2, groups=2, context_transform="pt"),
    "pru_pt_context_grouped": lambda: PRULayer(8, 8, levels=2, groups=2, context_transform="pt", pyramid_groups=2),
}


@pytest.mark.parametrize("kind", list(WEIGHT_DROP_LAYERS))
def test_weight_drop_through_functional_call(kind):
    layer = randomize_(WEIGHT_DROP_LAYERS[kind]().double())
    x, state = random_inputs(layer, seq_len=4, batch=2)
    params = dict(layer.named_parameters())
    generator = torch.Generator().manual_seed(3)
    masks = {name: (torch.rand(params[name].shape, generator=generator) > 0.5).double()
             for name in layer.recurrent_weight_names}
    dropped = {name: params[name] * mask / 0.5 for name, mask in masks.items()}
    y, _ = functional_call(layer, dropped, (x, state))

    expected_layer = copy.deepcopy(layer)
    with torch.no_grad():
        for name, weight in dropped.items():
            expected_layer.get_parameter(name).copy_(weight)
    torch.testing.assert_close(y, expected_layer(x, state)[0], rtol=1e-12, atol=1e-12)
    assert not torch.equal(y, layer(x, state)[0])  # the swap is undone and the real weights are back

    y.pow(2).sum().backward()
    for name, mask in masks.items():
        grad = params[name].grad
        assert grad is not None and grad.abs().sum() > 0
        assert not grad[mask == 0].any()  # gradients reach the original only through kept entries


@pytest.mark.parametrize("kind", list(WEIGHT_DROP_LAYERS))
def test_recurrent_weight_names_are_all_the_weights_on_h(kind):
    layer = randomize_(WEIGHT_DROP_LAYERS[kind]().double())
    x, (h, c) = random_inputs(layer, seq_len=1, batch=2)
    h.requires_grad_()
    zeroed = {name: torch.zeros_like(layer.get_parameter(name)) for name in layer.recurrent_weight_names}
    y, _ = functional_call(layer, zeroed, (x, (h, c)))
    (grad,) = torch.autograd.grad(y.sum(), h)
    assert not grad.any()
    (grad,) = torch.autograd.grad(layer(x, (h, c))[0].sum(), h)
    assert grad.any()


def test_lstm_forward_raises_no_warnings(recwarn):
    layer = LSTMLayer(5, 6)
    x = torch.randn(4, 2, 5)
    layer(x, layer.init_state(2))
    run = dict(layer.named_parameters())
    functional_call(layer, {"rnn.weight_hh_l0": F.dropout(run["rnn.weight_hh_l0"], 0.5)}, (x, layer.init_state(2)))
    assert not recwarn.list


# --------------------------------------------------------------------------------------------------
# Option validation

@pytest.mark.parametrize("options, option_name", [
    (dict(groups=3), "groups"),                       # 10 % 3 != 0
    (dict(groups=0), "groups"),
    (dict(subsample="median"), "subsample"),
    (dict(input_transform="conv"), "input_transform"),
    (dict(context_transform="dense"), "context_transform"),
    (dict(input_transform="lt"), "residual"),          # the residual lives in the pyramidal transformation
    (dict(levels=0), "levels"),
    (dict(levels=10), "levels"),                       # 10 units cannot feed ten levels
    (dict(pyramid_groups=0), "pyramid_groups"),
    (dict(pyramid_groups=3, levels=3), "pyramid_groups"),  # level 2 has 2 units per gate for 3 groups
    (dict(pyramid_groups=2, input_transform="glt", residual=False), "pyramid_groups"),  # no pyramid to split
    (dict(pooling_kernels="median"), "pooling_kernels"),
    (dict(pooling_kernels="paper", subsample="skip"), "pooling_kernels"),
])
def test_bad_options_raise_value_errors_naming_the_option(options, option_name):
    settings = dict(levels=2, groups=2) | options
    with pytest.raises(ValueError, match=option_name):
        PRULayer(10, 10, **settings)


def test_glt_input_checks_the_input_size():
    with pytest.raises(ValueError, match="input_size"):
        PRULayer(9, 10, levels=2, groups=2, input_transform="glt", residual=False)
