"""Study `lrn`: the LM's exact parameter counts, the mixture-of-softmaxes head, the cells in the LRN
authors' forms (their equations on their joint matrices, step by step, and one step by hand), their
initialisation, weight drop as released / as intended, the unfolded LRN weights against the closed
form, and the study file (the smoke artifacts: tests/test_smoke_run.py)."""

import math

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
import yaml

from rnnrepro import grid
from rnnrepro.analysis.lrn import final_state_weights, head_name, lrn_gates, unfolded_weights
from rnnrepro.cells import build_layer
from rnnrepro.configuration import REPO_ROOT, load_study
from rnnrepro.models.language_model import Dropouts, LanguageModel
from rnnrepro.models.mixture_of_softmaxes import MixtureOfSoftmaxes
from rnnrepro.models.regularisation import run_with_weight_drop, weight_drop_names
from rnnrepro.train.language_model import build_model

CELLS = ["lstm", "gru", "atr", "sru", "lrn"]
# Exact totals of the authors' MoS language models (github.com/bzhangGo/lrn, lm/code/rnn.py cells with the
# lm/code/model.py head), counted by hand; the paper's Table 6 rounds them (22M, 17M, 9M, 13M, 11M).
PAPER_TOTALS = {
    "ptb": {"lstm": 21_490_460, "gru": 17_474_720, "atr": 9_445_780, "sru": 12_585_140, "lrn": 10_791_920},
    "wt2": {"lstm": 34_897_728, "gru": 29_412_278, "atr": 18_444_328, "sru": 22_633_628, "lrn": 20_209_778},
}
VOCAB = {"ptb": 10_000, "wt2": 33_278}


@pytest.fixture(scope="module")
def study():
    return load_study("lrn")


def run_config(budget: str) -> dict:
    config = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    return {**config, "budget": budget}


def resolved(study: dict, budget: str, dataset: str, model: str) -> dict:
    config = run_config(budget)
    cell = grid.Cell("lrn", grid.data_key(study, config, dataset), model, 100, 1111, budget)
    return grid.resolve_cell(study, config, cell)


# --- parameter counts -------------------------------------------------------------------------------

@pytest.mark.parametrize("dataset", ["ptb", "wt2"])
@pytest.mark.parametrize("model", CELLS)
def test_paper_budget_models_have_the_exact_parameter_counts(study, dataset, model):
    cfg = resolved(study, "paper", dataset, model)
    with torch.device("meta"):  # shapes only: no memory, no initialisation cost
        lm = build_model(cfg, VOCAB[dataset])
    assert sum(p.numel() for p in lm.parameters()) == PAPER_TOTALS[dataset][model]


def test_mixture_head_parameter_arithmetic():
    """The note's MoS head: PTB 9,300 prior + 2,608,200 latent (plus embedding and decoder bias)."""
    assert MixtureOfSoftmaxes.parameter_count(620, 280, 15) == 9_300 + 2_608_200
    assert MixtureOfSoftmaxes.parameter_count(650, 300, 15) == 9_750 + 2_929_500


def test_wt2_models_are_the_authors_wider_ones(study):
    arch = resolved(study, "paper", "wt2", "lrn")["architecture"]
    assert (arch["embedding_size"], arch["hidden_size"], arch["last_hidden_size"]) == (300, 1150, 650)
    arch = resolved(study, "smoke", "ptb", "lrn")["architecture"]
    assert (arch["embedding_size"], arch["hidden_size"], arch["last_hidden_size"]) == (16, 48, 32)


# --- mixture of softmaxes ---------------------------------------------------------------------------

def mos_model(experts: int, vocab: int = 23, seed: int = 0) -> LanguageModel:
    torch.manual_seed(seed)
    dropouts = Dropouts("locked", 0.0, 0.0, 0.0, 0.0, 0.0)
    return LanguageModel(vocab, "lrn", 6, 8, 2, True, {}, dropouts,
                         head={"type": "mixture_of_softmaxes", "experts": experts, "latent_dropout": 0.0},
                         last_hidden_size=7).double().eval()


def test_mixture_probabilities_sum_to_one_and_cross_entropy_is_their_nll():
    model = mos_model(experts=4)
    tokens = torch.randint(23, (9, 3))
    out = model(tokens, model.init_state(3))
    torch.testing.assert_close(out.logits.exp().sum(-1), torch.ones(9, 3, dtype=torch.float64))
    targets = torch.randint(23, (9, 3))
    nll = -out.logits.gather(-1, targets.unsqueeze(-1)).mean()
    torch.testing.assert_close(F.cross_entropy(out.logits.reshape(-1, 23), targets.reshape(-1)), nll)


def test_one_expert_is_a_single_softmax():
    model = mos_model(experts=1)
    tokens = torch.randint(23, (5, 2))
    out = model(tokens, model.init_state(2))
    context = torch.tanh(model.head.latent(out.last_dropped))       # the only expert's context
    expected = torch.log_softmax(model.decoder(context), dim=-1)
    torch.testing.assert_close(out.logits, expected)


def test_mixture_is_the_prior_weighted_sum_of_softmaxes():
    model = mos_model(experts=3)
    tokens = torch.randint(23, (4, 2))
    out = model(tokens, model.init_state(2))
    g = out.last_dropped
    prior = torch.softmax(model.head.prior(g), -1)
    contexts = torch.tanh(model.head.latent(g)).view(4, 2, 3, 6)
    expected = (prior.unsqueeze(-1) * torch.softmax(model.decoder(contexts), -1)).sum(2).log()
    torch.testing.assert_close(out.logits, expected)


def test_head_options_are_checked():
    dropouts = Dropouts("locked", 0.0, 0.0, 0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="tie_weights"):
        LanguageModel(10, "lrn", 4, 4, 1, False, {}, dropouts,
                      head={"type": "mixture_of_softmaxes", "experts": 2, "latent_dropout": 0.0})
    with pytest.raises(ValueError, match="last_hidden_size=5 must equal embedding_size=4"):
        LanguageModel(10, "lrn", 4, 4, 1, True, {}, dropouts, last_hidden_size=5)
    with pytest.raises(ValueError, match="head type 'adaptive'"):
        LanguageModel(10, "lrn", 4, 4, 1, True, {}, dropouts, head={"type": "adaptive"})


# --- the cells in the LRN authors' forms (lm/code/rnn.py) -------------------------------------------
# Each reference step is written from the authors' equations on their own joint matrices
# (x @ W layout, gate order as theirs); our parameters are copied into that layout.

N, M, B, T = 3, 4, 2, 5


def authors_lstm(layer, x, h, c):
    W = torch.cat([layer.weight_ih, layer.weight_hh], 1).t()            # (N+M) x 4M, our rows i, f, g, o
    i, f, g, o = (torch.cat([x, h], -1) @ W + layer.bias).split(M, -1)
    c = i.sigmoid() * g.tanh() + f.sigmoid() * c
    return o.sigmoid() * c.tanh(), c


def authors_gru(layer, x, h):
    W = torch.cat([layer.weight_ih[:2 * M], layer.weight_hh[:2 * M]], 1).t()   # (N+M) x 2M
    U = torch.cat([layer.weight_ih[2 * M:], layer.weight_hh[2 * M:]], 1).t()   # (N+M) x M
    r, u = (torch.cat([x, h], -1) @ W + layer.bias[:2 * M]).sigmoid().split(M, -1)
    c = torch.cat([x, r * h], -1) @ U + layer.bias[2 * M:]
    return u * h + (1 - u) * c.tanh()


def authors_atr(layer, x, h):
    p = x @ layer.weight_ih.t() + layer.bias_ih
    q = h @ layer.weight_hh.t() + layer.bias_hh
    i, f = (p + q).sigmoid(), (p - q).sigmoid()
    return (i * p + f * h).tanh()


def authors_sru(layer, x, c):
    g1, g2, g3, g4 = (x @ layer.weight_ih.t() + layer.bias).split(M, -1)
    f = (g1 + layer.forget_weight * c).sigmoid()
    c_new = f * c + (1 - f) * g2
    r = (g3 + layer.reset_weight * c).sigmoid()      # the previous c, as the authors' code
    return r * c_new + (1 - r) * g4, c_new


def authors_lrn(layer, x, h):
    q, k, v = (x @ layer.weight_ih.t() + layer.bias).split(M, -1)   # ours: q forget, k input (their q, p)
    i, f = (k + h).sigmoid(), (q - h).sigmoid()
    return (i * v + f * h).tanh()


@pytest.mark.parametrize("cell", ["lstm_single_bias", "gru_single_bias", "atr", "sru", "lrn"])
def test_cell_matches_the_authors_equations_step_by_step(cell):
    torch.manual_seed(1)
    layer = build_layer(cell, N, M, init="xavier").double()
    with torch.no_grad():  # non-zero biases (and v for SRU), so every term is exercised
        for name, p in layer.named_parameters():
            if p.dim() == 1:
                p.uniform_(-0.5, 0.5)
    x = torch.randn(T, B, N, dtype=torch.float64)
    state = layer.init_state(B)
    state = tuple(torch.randn_like(s) for s in state) if isinstance(state, tuple) else torch.randn_like(state)
    output, _ = layer(x, state)
    ref = state
    for t in range(T):
        if cell == "lstm_single_bias":
            ref = authors_lstm(layer, x[t], *ref)
            h = ref[0]
        elif cell == "sru":
            h, c = authors_sru(layer, x[t], ref)
            ref = c
        else:
            ref = h = {"gru_single_bias": authors_gru, "atr": authors_atr, "lrn": authors_lrn}[cell](layer, x[t], ref)
        torch.testing.assert_close(output[t], h)


def test_one_step_by_hand():
    """Sizes 1 -> 1, weights set by hand; numbers worked out on paper."""
    x, h0 = torch.tensor([[[2.0]]]), torch.tensor([[0.5]])
    lrn = build_layer("lrn", 1, 1, init="xavier")
    with torch.no_grad():
        lrn.weight_ih.copy_(torch.tensor([[0.0], [0.25], [1.0]]))   # q, k, v
        lrn.bias.copy_(torch.tensor([0.0, 0.0, -1.0]))
    # q = 0, k = 0.5, v = 1; i = σ(0.5 + 0.5) = σ(1), f = σ(0 - 0.5) = σ(-0.5); h = tanh(σ(1) + 0.5 σ(-0.5))
    sig = lambda z: 1 / (1 + math.exp(-z))
    assert lrn(x, h0)[0].item() == pytest.approx(math.tanh(sig(1) * 1 + sig(-0.5) * 0.5), abs=1e-6)
    atr = build_layer("atr", 1, 1, init="xavier")
    with torch.no_grad():
        atr.weight_ih.fill_(0.5), atr.bias_ih.fill_(0.0), atr.weight_hh.fill_(2.0), atr.bias_hh.fill_(-1.0)
    # p = 1, q = 2·0.5 - 1 = 0; i = f = σ(1); h = tanh(σ(1)·1 + σ(1)·0.5)
    assert atr(x, h0)[0].item() == pytest.approx(math.tanh(1.5 * sig(1)), abs=1e-6)
    sru = build_layer("sru", 1, 1, init="xavier")                   # v_f = v_r = 1, biases 0
    with torch.no_grad():
        sru.weight_ih.copy_(torch.tensor([[0.0], [1.0], [0.0], [-0.5]]))
    # g = (0, 2, 0, -1); f = σ(0.5); c = 0.5 f + 2 (1 - f); r = σ(0.5); h = r c + (1 - r)(-1)
    f = sig(0.5)
    c = 0.5 * f + 2 * (1 - f)
    assert sru(x, h0)[0].item() == pytest.approx(f * c - (1 - f), abs=1e-6)


def test_xavier_init_is_the_authors_bounds_and_zero_biases():
    torch.manual_seed(0)
    lstm = build_layer("lstm_single_bias", 280, 960, init="xavier")
    bound = math.sqrt(6 / (280 + 960 + 4 * 960))              # their (N+M) x 4M matrix
    for weight in (lstm.weight_ih, lstm.weight_hh):
        assert bound * 0.98 < weight.abs().max().item() <= bound
    assert lstm.bias.abs().max().item() == 0                   # no forget-bias offset in their code
    gru = build_layer("gru_single_bias", 280, 960, init="xavier")
    assert gru.weight_ih[2 * 960:].abs().max().item() <= math.sqrt(6 / (280 + 960 + 960))
    assert gru.weight_ih[:2 * 960].abs().max().item() <= math.sqrt(6 / (280 + 960 + 2 * 960))
    sru = build_layer("sru", 280, 960, init="xavier")
    assert sru.forget_weight.eq(1).all() and sru.reset_weight.eq(1).all() and sru.bias.eq(0).all()
    atr = build_layer("atr", 280, 960, init="xavier")
    assert atr.weight_hh.abs().max().item() <= math.sqrt(6 / (2 * 960)) and atr.bias_hh.eq(0).all()
    with pytest.raises(ValueError, match="init='orthogonal'"):
        build_layer("lrn", 3, 4, init="orthogonal")


def test_init_option_does_not_change_counts_or_sizing():
    from rnnrepro.sizing import layer_params
    layer = build_layer("gru_single_bias", 3, 4, init="xavier")
    assert layer_params("gru_single_bias", 3, 4, {"init": "xavier"}) == sum(p.numel() for p in layer.parameters())


# --- weight drop: as released vs as intended ----------------------------------------------------------

def test_weight_drop_as_intended_reaches_lrn_and_sru_input_projections():
    assert weight_drop_names(build_layer("lrn", 3, 4), "recurrent") == ()        # as released: nothing
    assert weight_drop_names(build_layer("lrn", 3, 4), "all_matrices") == ("weight_ih",)
    assert weight_drop_names(build_layer("sru", 3, 4), "all_matrices") == ("weight_ih",)
    assert set(weight_drop_names(build_layer("lstm_single_bias", 3, 4), "all_matrices")) == {"weight_ih", "weight_hh"}
    assert set(weight_drop_names(build_layer("atr", 3, 4), "all_matrices")) == {"weight_ih", "weight_hh"}
    torch.manual_seed(0)
    layer = build_layer("lrn", 3, 4)
    x, h = torch.randn(5, 2, 3), torch.zeros(2, 4)
    plain = layer(x, h)[0]
    torch.testing.assert_close(run_with_weight_drop(layer, x, h, 0.5, True, "recurrent")[0], plain)
    dropped = run_with_weight_drop(layer, x, h, 0.5, True, "all_matrices")[0]
    assert not torch.allclose(dropped, plain)
    dropped.sum().backward()
    assert layer.weight_ih.grad.abs().sum() > 0


# --- the unfolded LRN -------------------------------------------------------------------------------

def test_unfolded_weights_equal_the_closed_form_for_an_identity_lrn():
    torch.manual_seed(3)
    layer = build_layer("lrn", N, M, activation="identity").double()
    x = torch.randn(T, B, N, dtype=torch.float64)
    hidden, _ = layer(x, layer.init_state(B))
    gates = lrn_gates(layer, x)
    torch.testing.assert_close(gates["h"], hidden)
    w = unfolded_weights(gates["i"], gates["f"])                    # (k, t, B, M)
    for t in range(T):
        torch.testing.assert_close((w[:, t] * gates["v"]).sum(0), hidden[t])
    # the weight of each token in the last state, by the direct product i_k Π_{l>k} f_l
    last = final_state_weights(gates["i"], gates["f"])
    for k in range(T):
        torch.testing.assert_close(last[k], gates["i"][k] * torch.prod(gates["f"][k + 1:], dim=0))
    torch.testing.assert_close(last, w[:, -1])
    assert w[3, 1].abs().max() == 0                                 # no weight from the future


def test_tanh_lrn_is_not_the_sum():
    """With g = tanh the gate products are a pattern, not a decomposition (the notebook says so)."""
    torch.manual_seed(3)
    layer = build_layer("lrn", N, M).double()
    x = 3 * torch.randn(T, B, N, dtype=torch.float64)
    gates = lrn_gates(layer, x)
    w = unfolded_weights(gates["i"], gates["f"])
    assert not torch.allclose((w[:, -1] * gates["v"]).sum(0), gates["h"][-1])


# --- the study file -------------------------------------------------------------------------------------

def test_table_rows_are_as_released_and_extra_rows_as_intended(study):
    for model in ["lstm_ft", "gru_ft", "atr_ft", "sru_ft", "lrn_ft"]:
        assert resolved(study, "paper", "ptb", model)["recipe"]["weight_drop"] == 0
    recipe = resolved(study, "paper", "wt2", "lrn_wdi_ft")["recipe"]
    assert (recipe["weight_drop"], recipe["weight_drop_targets"], recipe["lr"]) == (0.5, "all_matrices", 20.0)


def test_the_table_names_the_head_each_budget_trains(study):
    heads = {budget: head_name(resolved(study, budget, "ptb", "lrn_ft")["architecture"].get("head"))
             for budget in ("cpu", "paper")}
    assert heads == {"cpu": "softmax", "paper": "mixture of 15 softmaxes"}


def test_smoke_grid_is_small(study):
    config = run_config("smoke")
    cells = {c for a in study["artifacts"] for c in grid.artifact_cells(study, config, a)}
    parents = {grid.parent_cell(study, c) for c in cells} - {None}
    assert len(cells | parents) == 4        # lrn, lrn_ft, lrn_identity, and the calibration model mos


def test_claims_hold_on_the_papers_own_numbers(study):
    """Tables holding the paper's numbers as ours: every claim must hold (else it misreads the paper)."""
    from rnnrepro.analysis.claims import HELD, NOT_TESTABLE, evaluate_study
    lm_rows = []
    for dataset, models in study["paper"]["lm"].items():
        for model, values in models.items():
            for stage in ("base", "finetune", "dynamic"):
                ppl = values[f"{stage}_test_ppl"]
                lm_rows.append({"dataset": dataset, "model": model, "stage": stage, "test_ppl": ppl,
                                "paper_test_ppl": ppl, "params_m": values["params_m"],
                                "paper_params_m": values["params_m"]})
    snli = study["paper"]["speed"]["snli"]
    speed_rows = [{"model": m, "lm_ratio": v["time_s"] / snli["lstm"]["time_s"],
                   "layer_ratio": v["time_s"] / snli["lstm"]["time_s"],
                   "paper_snli_ratio": v["time_s"] / snli["lstm"]["time_s"]} for m, v in snli.items()]
    params_rows = [{"dataset": dataset, "model": model, "params_m": values["params_m"],
                    "paper_params_m": values["params_m"]}
                   for dataset, models in study["paper"]["params"].items() for model, values in models.items()]
    tables = {"lrn_lm": pd.DataFrame(lm_rows), "lrn_speed": pd.DataFrame(speed_rows),
              "lrn_params": pd.DataFrame(params_rows)}
    # the paper's claims only: the calibration claims check our trainer against a training log
    paper_claims = [c for c in study["claims"] if c["table"] != "lrn_calibration"]
    verdicts = evaluate_study({**study, "claims": paper_claims}, run_config("paper"), tables)
    assert len(verdicts) == 1 + 2 + 2 + 10 + 10 + 1 + 2
    # the paper's LRN and ATR times are 0.5 % apart: as one measurement of ours, within its noise
    speed = {"lrn_fastest_lm", "lrn_fastest_layer"}
    assert [v["claim"] for v in verdicts if v["verdict"] != HELD and v["claim"] not in speed] == []
    for verdict in (v for v in verdicts if v["claim"] in speed):
        assert verdict["verdict"] == NOT_TESTABLE and verdict["paper_check"] == HELD
        assert verdict["reason"].startswith("within the measurement's noise (±10%, one measurement each): lrn 0.7977 "
                                            "against atr 0.8015")
