"""Evaluations of trained models (rnnrepro.evaluation): dynamic evaluation, next-token entropy,
gradient saliency, their CLI and rule, and the PRU notebooks that read them (on fixtures)."""

import json
import math
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from conftest import copy_project, run_here, snakemake
from rnnrepro.analysis import lrn, pru
from rnnrepro.analysis.autocomplete import example_predictions
from rnnrepro.analysis.run_notebook import run as run_notebook
from rnnrepro.cells import detach_state
from rnnrepro import grid
from rnnrepro.configuration import REPO_ROOT, ConfigError, load_run_config, load_study, load_yaml
from rnnrepro.data.corpus import Corpus
from rnnrepro.evaluation import dynamic, entropy, saliency
from rnnrepro.evaluation.dynamic import DynamicEvaluator, DynamicSettings, gradient_statistics, static_loss
from rnnrepro.evaluation.plan import artifact_evaluation_files, check_evaluations, evaluation_spec
from rnnrepro.models.language_model import LMOutput
from rnnrepro.train.checkpoint import DamagedCheckpoint
from rnnrepro.train.language_model import build_model

VOCAB = 12


def tiny_config(cell="lstm", layers=1, tie=False, hidden=16, embedding=8, cell_options=None) -> dict:
    return {
        "architecture": {"cell": cell, "embedding_size": embedding, "hidden_size": hidden, "layers": layers,
                         "tie_weights": tie, "cell_options": cell_options or {}},
        "recipe": {"dropout_kind": "elementwise", "dropout_embedding": 0.0, "dropout_input": 0.0,
                   "dropout_hidden": 0.0, "dropout_output": 0.0, "weight_drop": 0.0},
    }


def tiny_model(seed=0, **kwargs):
    torch.manual_seed(seed)
    return build_model(tiny_config(**kwargs), VOCAB).eval()


def stream(seed, n) -> torch.Tensor:
    return torch.randint(0, VOCAB, (n,), generator=torch.Generator().manual_seed(seed))


def repeated_text(length=10, times=40) -> torch.Tensor:
    return stream(1, length).repeat(times)


def weights(model) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


# ---- dynamic evaluation ------------------------------------------------------------------------

def test_perplexity_falls_on_a_repeated_text():
    model = tiny_model()
    stats = gradient_statistics(model, stream(2, 2000), batch_size=4, segment_length=5)
    text = repeated_text()
    before = static_loss(model, text)
    after = DynamicEvaluator(model, stats, DynamicSettings(lr=1e-3, decay=1e-3, epsilon=1e-5, segment_length=5)).evaluate(text)
    # A 10-token loop seen 40 times: the untrained model scores about ln 12 = 2.48 nats per token
    # throughout; adapted as it reads, it learns the loop (about 1.5 nats on average over the stream).
    assert before > 2.3
    assert after < before - 0.5


def test_zero_lr_and_zero_decay_is_the_static_evaluation_and_leaves_the_weights():
    model = tiny_model(layers=2, tie=True, embedding=16)
    theta0 = weights(model)
    stats = gradient_statistics(model, stream(2, 600), batch_size=3, segment_length=7)
    text = stream(3, 203)
    got = DynamicEvaluator(model, stats, DynamicSettings(0.0, 0.0, 1e-5, segment_length=5)).evaluate(text)
    # Independent reference: the whole stream in one forward pass, batch 1, every target after the first.
    with torch.no_grad():
        logits = model(text[:-1].reshape(-1, 1), model.init_state(1)).logits
    reference = F.cross_entropy(logits.reshape(-1, VOCAB), text[1:]).item()
    assert got == pytest.approx(reference, abs=1e-6)
    assert static_loss(model, text, window=13) == pytest.approx(reference, abs=1e-6)
    assert all(torch.equal(a, b) for a, b in zip(theta0, weights(model)))


def test_every_stream_starts_and_ends_at_the_trained_weights():
    model = tiny_model()
    theta0 = weights(model)
    stats = gradient_statistics(model, stream(2, 600), batch_size=3, segment_length=5)
    evaluator = DynamicEvaluator(model, stats, DynamicSettings(1e-2, 1e-3, 1e-5, 5))
    first = evaluator.evaluate(repeated_text())
    assert all(torch.equal(a, b) for a, b in zip(theta0, weights(model)))
    assert evaluator.evaluate(repeated_text()) == pytest.approx(first, abs=1e-9)


def test_decay_pulls_the_weights_back_toward_theta0():
    model = tiny_model()
    stats = gradient_statistics(model, stream(2, 600), batch_size=3, segment_length=5)
    decay = 0.2  # 1/λ = 5: below the largest rates of this model, so the clip is exercised
    evaluator = DynamicEvaluator(model, stats, DynamicSettings(lr=0.0, decay=decay, epsilon=1e-5, segment_length=5))
    theta0 = weights(model)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p))
    moved = weights(model)
    x, y = stream(4, 6)[:-1].reshape(-1, 1), stream(4, 6)[1:].reshape(-1, 1)
    for _ in range(3):
        loss = F.cross_entropy(model(x, model.init_state(1)).logits.reshape(-1, VOCAB), y.reshape(-1))
        evaluator.adapt(loss)
    # With lr 0 an update is θ ← θ + λ r (θ0 − θ), r = min(MS / mean MS, 1/λ): every element's distance
    # to θ0 shrinks by exactly (1 − λ r) per update, whatever the gradient.
    clipped = 0
    for p, p0, p_moved, rate in zip(model.parameters(), theta0, moved, stats.decay_rates):
        factor = 1 - decay * rate.clamp(max=1 / decay)
        torch.testing.assert_close(p.detach() - p0, factor ** 3 * (p_moved - p0))
        clipped += int((rate > 1 / decay).sum())
    assert clipped > 0  # some rates exceed 1/λ: those elements are back at θ0 after one update


def test_gradient_statistics_are_the_root_mean_square_of_segment_gradients():
    model = tiny_model()
    train = stream(5, 41)  # batch 2: 20 rows, segments of 9 -> rows 0-9, 9-18 (the script leaves out 18-19)
    stats = gradient_statistics(model, train, batch_size=2, segment_length=9)
    assert stats.segments == stats.split_segments == 2
    assert stats.tensors == len(list(model.parameters()))  # nn.LSTM: stored as the reference code stores it
    source = train[:40].view(2, 20).t()
    state, squares = model.init_state(2), [torch.zeros_like(p) for p in model.parameters()]
    for start in (0, 9):
        stop = min(start + 9, 19)
        out = model(source[start:stop], state)
        loss = F.cross_entropy(out.logits.reshape(-1, VOCAB), source[start + 1 : stop + 1].reshape(-1))
        model.zero_grad()
        loss.backward()
        squares = [s + p.grad ** 2 for s, p in zip(squares, model.parameters())]
        state = [detach_state(layer) for layer in out.state]
    ms = [torch.sqrt(s / 2) for s in squares]
    mean = torch.stack([m.mean() for m in ms]).mean()
    for got, want, rate in zip(stats.ms, ms, stats.decay_rates):
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(rate, want / mean)


class LogProbabilityHead(torch.nn.Module):
    """A language model whose logits are already log-probabilities (as a mixture-of-softmaxes head's)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def init_state(self, batch_size):
        return self.model.init_state(batch_size)

    def forward(self, tokens, state):
        out = self.model(tokens, state)
        return LMOutput(torch.log_softmax(out.logits, -1), out.state, out.last_raw, out.last_dropped)


def test_heads_returning_log_probabilities_give_the_same_losses():
    plain = tiny_model()
    wrapped = LogProbabilityHead(plain)
    train, text = stream(2, 600), repeated_text(times=4)
    settings = DynamicSettings(1e-2, 2e-3, 1e-5, 5)
    results = []
    for model in (plain, wrapped):
        stats = gradient_statistics(model, train, 3, 5)
        results.append((static_loss(model, text), DynamicEvaluator(model, stats, settings).evaluate(text)))
    assert results[0] == pytest.approx(results[1], abs=1e-5)


def test_tuning_picks_the_best_grid_point_and_reports_every_one():
    model = tiny_model()
    stats = gradient_statistics(model, stream(2, 600), 3, 5)
    points = [dynamic.GridPoint(lr, decay, DynamicSettings(lr, decay, 1e-5, 5))
              for decay in (1e-3, 1e-2) for lr in (0.0, 1e-3)]
    chosen, grid = dynamic.tune(model, stats, repeated_text(), points)
    assert [(row["decay"], row["lr"]) for row in grid] == [(1e-3, 0.0), (1e-3, 1e-3), (1e-2, 0.0), (1e-2, 1e-3)]
    best = min(grid, key=lambda row: row["tune_loss"])
    assert (chosen.lr, chosen.decay) == (best["lr"], best["decay"]) and chosen.lr == 1e-3
    assert grid[0]["tune_loss"] == pytest.approx(grid[2]["tune_loss"])  # lr 0: static, whatever λ


def test_a_grid_point_that_diverges_is_shown_without_a_perplexity_and_never_chosen(monkeypatch):
    """A point whose tuning loss is past exp's range (a diverged update, seen at the smoke budget) or not
    finite gets no perplexity and is not chosen; every point diverging is an error naming the grid."""
    losses = {1e-4: 5.0, 1e-3: 812.5, 1e-2: float("nan")}
    monkeypatch.setattr(dynamic.DynamicEvaluator, "evaluate", lambda self, tokens, what="": losses[self.settings.lr])
    model = tiny_model()
    stats = gradient_statistics(model, stream(2, 600), 3, 5)
    points = [dynamic.GridPoint(lr, 2e-3, DynamicSettings(lr, 2e-3, 1e-5, 5)) for lr in losses]
    chosen, grid = dynamic.tune(model, stats, repeated_text(), points)
    assert chosen.lr == 1e-4
    assert [(row["tune_loss"], row["tune_ppl"]) for row in grid] == [(5.0, pytest.approx(math.exp(5.0))), (812.5, None),
                                                                     (None, None)]
    with pytest.raises(ValueError, match="diverged at every grid point"):
        dynamic.tune(model, stats, repeated_text(), points[1:])


# -- the old scaling, against a transcription of the script the LRN authors ran ---------------------

def mos_config(cell: str) -> dict:
    """A tiny model in the LRN study's form: 2 layers, the last of its own width, a tied MoS head."""
    config = tiny_config(cell=cell, layers=2, tie=True, hidden=8, embedding=6)
    config["architecture"].update(head={"type": "mixture_of_softmaxes", "experts": 2, "latent_dropout": 0.0},
                                  last_hidden_size=7)
    return config


def mos_model(cell: str, seed: int = 0):
    torch.manual_seed(seed)
    return build_model(mos_config(cell), VOCAB).double().eval()


def authors_tensors(model, ms: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """MS laid out as the tensors of the LRN authors' model (bzhangGo/lrn lm/code/model.py + rnn.py, read
    there): per layer the LSTMCell's _W = [x; h] -> 4M and _b; the GRUCell's _W = [x; h] -> (r, u),
    _W_b, _U = [x; r*h] -> c, _U_b; the LRNCell's _W and _W_b; and the embedding, MoS prior, latent
    weight and bias and decoder bias, one tensor each. ``ms`` is keyed by our parameter names."""
    tensors, done = [], set()
    for i, layer in enumerate(model.layers):
        name = type(layer).__name__
        if name not in ("SingleBiasLSTMLayer", "SingleBiasGRULayer"):
            continue  # the LRNCell's _W and _W_b are our weight_ih and bias
        ours = [f"layers.{i}.{n}" for n in ("weight_ih", "weight_hh", "bias")]
        w_ih, w_hh, b = (ms[n] for n in ours)
        if name == "SingleBiasLSTMLayer":
            tensors += [torch.cat([w_ih, w_hh], dim=1).t(), b]
        else:
            m = layer.hidden_size
            tensors += [torch.cat([w_ih[: 2 * m], w_hh[: 2 * m]], dim=1).t(), b[: 2 * m],
                        torch.cat([w_ih[2 * m:], w_hh[2 * m:]], dim=1).t(), b[2 * m:]]
        done.update(ours)
    return tensors + [v for k, v in ms.items() if k not in done]


def authors_dynamic_eval(model, train: torch.Tensor, test: torch.Tensor, lr: float, lamb: float, epsilon: float,
                         bptt: int, batch_size: int) -> float:
    """bzhangGo/lrn lm/code/dynamiceval.py (Krause's first version, no --ms), transcribed: gradient
    statistics on the training stream, then the test stream at batch 1; returns the perplexity."""
    names = [n for n, _ in model.named_parameters()]
    params = list(model.parameters())

    def get_batch(source, i):
        seq_len = min(bptt, len(source) - 1 - i)
        return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)

    def loss_of(data, targets, hidden):
        out = model(data, hidden)  # the MoS head returns log-probabilities, as their model
        return F.nll_loss(out.logits.reshape(-1, out.logits.size(-1)), targets), out.state

    train_data = train[: len(train) // batch_size * batch_size].view(batch_size, -1).t()
    squares = [torch.zeros_like(p) for p in params]
    hidden, batch, i = model.init_state(batch_size), 0, 0
    while i < train_data.size(0) - 1 - 1:
        data, targets = get_batch(train_data, i)
        hidden = [detach_state(h) for h in hidden]
        model.zero_grad()
        loss, hidden = loss_of(data, targets, hidden)
        loss.backward()
        squares = [s + p.grad * p.grad for s, p in zip(squares, params)]
        batch += 1
        i += bptt
    ms = [torch.sqrt(s) for s in squares]
    gsum = sum(torch.mean(t) for t in authors_tensors(model, dict(zip(names, ms))))
    decrate = [(m / gsum).clamp(max=1 / lamb) for m in ms]
    data0 = [p.detach().clone() for p in params]

    eval_data = test.reshape(-1, 1)
    total_loss, batch, i, last = 0.0, 0.0, 0, False
    hidden, seq_len = model.init_state(1), bptt
    while i < eval_data.size(0) - 1 - 1:
        if i + seq_len >= eval_data.size(0):
            if last:
                break
            seq_len = eval_data.size(0) - i - 1
            last = True
        data, targets = get_batch(eval_data, i)
        hidden = [detach_state(h) for h in hidden]
        model.zero_grad()
        loss, hidden = loss_of(data, targets, hidden)
        loss.backward()
        with torch.no_grad():
            for p, d, p0, m in zip(params, decrate, data0, ms):
                p += lamb * d * (p0 - p) - lr * p.grad / (m + epsilon)
        total_loss += (seq_len / bptt) * loss.item()
        batch += seq_len / bptt
        i += seq_len
    with torch.no_grad():
        for p, p0 in zip(params, data0):
            p.copy_(p0)
    return math.exp(total_loss / batch)


def old_scaling_spec(lr: float, decay: float, epsilon: float, **changes) -> dict:
    return {"scaling": "old", "splits": ["test"], "segment_length": 5, "tuned_segment_length": 5,
            "stats_batch_size": 4, "stats_max_segments": None, "lr": [lr], "decay": [decay], "epsilon": epsilon,
            "tune_tokens": None, **changes}


@pytest.mark.parametrize("cell, tensors", [("lstm_single_bias", 2 * 2 + 5), ("gru_single_bias", 2 * 4 + 5),
                                           ("lrn", 2 * 2 + 5)])
def test_old_scaling_is_the_authors_update_on_their_tensors(cell, tensors):
    # Settings large enough for the decay term to matter (old scale): η 0.01, λ 0.2 (clip at 1/λ = 5).
    lr, lamb, epsilon = 0.01, 0.2, 1e-3
    # 61 rows of 4 streams; a text seen 9 times (adaptation helps), 88 tokens: (88 - 1) % 5 = 2, no lone target
    train, test = stream(11, 4 * 61), repeated_text(length=10, times=9)[:88]
    corpus = Corpus(vocab=[f"w{i}" for i in range(VOCAB)], tokenizer="word", train=train, valid=test[:0], test=test)
    model = mos_model(cell)
    theirs = authors_dynamic_eval(model, train, test, lr, lamb, epsilon, bptt=5, batch_size=4)
    ours = dynamic.run(model, corpus, old_scaling_spec(lr, lamb, epsilon))
    assert ours["published_tensors"] == tensors and ours["stats_split_segments"] == ours["stats_segments"] == 12
    assert ours["dynamic_test_ppl"] == pytest.approx(theirs, rel=1e-9)
    assert ours["dynamic_test_ppl"] < 0.9 * ours["static_test_ppl"]  # the adaptation does something
    # the applied (current-scale) settings: λ / T, η / √S, ε / √S
    assert (ours["decay"], ours["lr"], ours["epsilon"]) == pytest.approx((lamb / tensors, lr / 12 ** 0.5,
                                                                          epsilon / 12 ** 0.5))
    # dividing λ by our own tensor count (14-style: 3 a layer for the LSTM and GRU) would not be their update
    ours_count = len(list(model.parameters()))
    if ours_count != tensors:
        naive = dynamic.DynamicEvaluator(model, gradient_statistics(model, train, 4, 5),
                                         DynamicSettings(lr / 12 ** 0.5, lamb / ours_count, epsilon / 12 ** 0.5, 5))
        assert math.exp(naive.evaluate(test)) != pytest.approx(theirs, rel=1e-3)


def test_published_tensors_of_the_lrn_studys_models():
    # The authors' MoS LM: 5 tensors beside the layers (embedding, prior, latent weight and bias, decoder
    # bias) + per layer LSTM 2, GRU 4, ATR 4, SRU 4, LRN 2 -> 11, 17, 17, 17, 11; ours hold 14 for LSTM and GRU.
    study = load_study("lrn")
    config = load_run_config({**load_yaml(REPO_ROOT / "config/config.yaml"), "budget": "smoke"})
    expected = {"lstm": (11, 14), "gru": (17, 14), "atr": (17, 17), "sru": (17, 17), "lrn": (11, 11)}
    for model_id, (published, ours) in expected.items():
        cfg = grid.resolve_cell(study, config, grid.Cell("lrn", "synth_ptb", model_id, 100, 1, "smoke"))
        model = build_model(cfg, 50)
        tensors = dynamic.published_tensors(model)
        assert (len(tensors), len(list(model.parameters()))) == (published, ours), model_id
        # every element of every parameter in exactly one published tensor
        covered = [torch.zeros_like(p, dtype=torch.int) for p in model.parameters()]
        for pieces in tensors:
            for index, rows in pieces:
                covered[index][slice(None) if rows is None else rows] += 1
        assert all((c == 1).all() for c in covered), model_id


def test_settings_are_scaled_to_the_segment_length_they_run_at():
    stats = dynamic.GradientStatistics(ms=[], decay_rates=[], segments=100, split_segments=400, tensors=11)
    spec = {"scaling": "current", "segment_length": 20, "tuned_segment_length": 5, "epsilon": 2e-5}
    assert dynamic.applied_settings(spec, stats, 5e-5, 2e-3) == DynamicSettings(2e-4, 8e-3, 2e-5, 20)
    old = {**spec, "scaling": "old", "epsilon": 0.001}
    applied = dynamic.applied_settings(old, stats, 0.002, 0.075)
    assert (applied.lr, applied.decay, applied.epsilon) == pytest.approx((0.002 / 20 * 4, 0.075 / 11 * 4, 0.001 / 20))
    with pytest.raises(ValueError, match="scaling 'new'"):
        dynamic.applied_settings({**spec, "scaling": "new"}, stats, 1e-5, 1e-3)


class CudnnProbe(LogProbabilityHead):
    """Records, at every forward pass, whether the model is in training mode and cuDNN is on."""

    def __init__(self, model):
        super().__init__(model)
        self.seen = set()

    def forward(self, tokens, state):
        self.seen.add((self.model.training, torch.backends.cudnn.enabled))
        return super().forward(tokens, state)


def test_gradient_passes_run_in_eval_mode_with_cudnn_off():
    # cuDNN has no backward through an RNN in eval mode (a GPU-only failure); the passes that take
    # gradients switch it off, the others leave it as it is.
    probe = CudnnProbe(tiny_model())
    stats = gradient_statistics(probe, stream(2, 100), 2, 5)
    DynamicEvaluator(probe, stats, DynamicSettings(1e-3, 1e-3, 1e-5, 5)).evaluate(stream(3, 20))
    probe.embedding = probe.model.embedding
    saliency.saliency(probe, torch.tensor([1, 2, 3]), target=4)
    assert probe.seen == {(False, False)}
    assert torch.backends.cudnn.enabled
    probe.seen.clear()
    static_loss(probe, stream(3, 20))
    assert probe.seen == {(False, True)}


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="segment_length"):
        DynamicSettings(1e-3, 1e-3, 1e-5, 0)


# ---- entropy ------------------------------------------------------------------------------------

def constant_prediction_model(log_probabilities: torch.Tensor, **kwargs):
    """A model whose next-token distribution is the same after every context: decoder weight 0, bias log p."""
    model = tiny_model(**kwargs)
    with torch.no_grad():
        model.decoder.weight.zero_()
        model.decoder.bias.copy_(log_probabilities)
    return model


def test_entropies_of_a_hand_checked_model():
    p = torch.tensor([0.5, 0.25, 0.125, 0.125] + [0.0] * (VOCAB - 4)) + 1e-12
    p = p / p.sum()
    model = constant_prediction_model(p.log())
    values = entropy.next_token_entropies(model, stream(6, 103), streams=5, window=3)
    # 103 tokens in 5 streams: 20 rows, so 19 contexts per stream; H = 0.5 ln2 + 0.25 ln4 + 2 * 0.125 ln8.
    assert values.shape == (19, 5)
    torch.testing.assert_close(values, torch.full((19, 5), 1.75 * math.log(2)), atol=1e-5, rtol=0)


def test_entropy_run_reports_contexts_and_means():
    model = constant_prediction_model(torch.zeros(VOCAB))  # uniform: ln 12 everywhere
    corpus = Corpus(vocab=[f"w{i}" for i in range(VOCAB)], tokenizer="word", train=stream(1, 50),
                    valid=stream(2, 101), test=stream(3, 50))
    out = entropy.run(model, corpus, {"split": "valid", "streams": 4})
    assert (out["steps"], out["contexts"]) == (24, 96)
    assert out["mean_entropy"] == pytest.approx(math.log(VOCAB), abs=1e-5)
    assert len(out["entropies"]) == 24 and len(out["entropies"][0]) == 4


# ---- saliency -----------------------------------------------------------------------------------

def test_top_words_and_zero_saliency_when_the_prediction_ignores_the_input():
    bias = torch.linspace(1.0, -1.0, VOCAB)[torch.randperm(VOCAB, generator=torch.Generator().manual_seed(0))]
    model = constant_prediction_model(bias)
    result = saliency.saliency(model, torch.tensor([1, 2, 3, 4]), target=5)
    probabilities = torch.softmax(bias, 0)
    assert result["top_ids"] == probabilities.argsort(descending=True)[:5].tolist()
    assert result["top_probabilities"] == pytest.approx(probabilities.sort(descending=True).values[:5].tolist())
    assert result["target_probability"] == pytest.approx(probabilities[5].item())
    assert result["saliency"] == [0.0, 0.0, 0.0, 0.0]


def test_saliency_is_the_squared_gradient_norm_at_each_input_embedding():
    model = tiny_model(layers=2, hidden=12)
    words, target = torch.tensor([3, 7, 1, 9, 4]), 6  # distinct words, untied: one embedding row each
    result = saliency.saliency(model, words, target)
    # Independent computation: the gradient of the embedding matrix row of each (distinct) word.
    model.zero_grad()
    out = model(words.reshape(-1, 1), model.init_state(1))
    (-torch.log_softmax(out.logits[-1, 0], -1)[target]).backward()
    expected = model.embedding.weight.grad[words].pow(2).sum(-1)
    assert result["saliency"] == pytest.approx(expected.tolist(), rel=1e-5)
    assert result["saliency"][-1] > 0


def test_saliency_of_a_word_the_state_forgets_is_zero():
    # An LSTM whose forget gate is shut (bias -1e4): c_t = i_t * g_t depends on x_t and h_{t-1} only, and
    # with a zero recurrent matrix h_{t-1} does not enter either, so only the last word matters.
    model = tiny_model(cell="lstm")
    layer = model.layers[0]
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if "weight_hh" in name:
                p.zero_()
            if "bias_ih" in name:
                hidden = p.numel() // 4
                p[hidden : 2 * hidden] = -1e4  # PyTorch gate order i, f, g, o
    result = saliency.saliency(model, torch.tensor([3, 7, 1, 9]), target=2)
    assert result["saliency"][:3] == [0.0, 0.0, 0.0]
    assert result["saliency"][3] > 0


def test_sequences_are_the_first_long_enough_sentences():
    eos = 0
    tokens = torch.tensor([5, 6, eos, 1, 2, 3, 4, eos, 7, 8, eos, 9, 10, 11, 3, 2])
    picked = saliency.pick_sequences(tokens, eos, count=2, length=3)
    assert [t.tolist() for t in picked] == [[1, 2, 3, 4], [9, 10, 11, 3]]
    with pytest.raises(ValueError, match="lower `sequences` or `length`"):
        saliency.pick_sequences(tokens, eos, count=3, length=3)


# ---- plan, CLI and rule -------------------------------------------------------------------------

def test_study_evaluations_resolve_per_budget():
    study = load_study("pru")
    paper = evaluation_spec(study, {"budget": "paper", "device": "cpu", "threads": 1}, "dynamic_eval", "ptb")
    smoke = evaluation_spec(study, {"budget": "smoke", "device": "cpu", "threads": 1}, "dynamic_eval", "synth_ptb")
    assert paper["lr"] == [3e-5, 4e-5, 5e-5, 6e-5, 7e-5, 1e-4] and paper["segment_length"] == 5
    assert smoke["method"] == "dynamic" and smoke["segment_length"] == 20 and smoke["tuned_segment_length"] == 5
    files = artifact_evaluation_files(study, {"budget": "smoke", "seeds": [1111]}, "fig3")
    assert files == ["results/smoke/runs/pru/synth_ptb/pru_g4_k2_m1400/frac100/seed1111/entropy.json",
                     "results/smoke/runs/pru/synth_ptb/lstm_m1000/frac100/seed1111/entropy.json"]


def test_lrn_study_runs_the_authors_settings_per_dataset():
    # bzhangGo/lrn lm/README.md: PTB --lamb 0.075, WT-2 --epsilon 0.002, the old script's defaults otherwise
    study = load_study("lrn")
    for budget, corpus, n in (("paper", "ptb", 5), ("paper", "wt2", 5), ("reduced", "wt2", 20), ("smoke", "synth_ptb", 20)):
        spec = evaluation_spec(study, {"budget": budget, "device": "cpu", "threads": 1}, "dynamic_eval", corpus)
        dataset = corpus.removeprefix("synth_")
        assert (spec["scaling"], spec["lr"], spec["segment_length"], spec["tuned_segment_length"]) == ("old", [0.002], n, 5)
        assert (spec["decay"], spec["epsilon"]) == ({"ptb": ([0.075], 0.001), "wt2": ([0.02], 0.002)}[dataset])
        assert "dataset_settings" not in spec


@pytest.mark.parametrize("change, message", [
    (lambda s: s["artifacts"]["fig3"].update(evaluations=["entropies"]), "unknown evaluation 'entropies'"),
    (lambda s: s["evaluations"]["dynamic_eval"].update(dataset_settings={"wt3": {}}), "dataset_settings.wt3"),
    (lambda s: s["evaluations"]["dynamic_eval"].update(dataset_settings={"wt2": {"scaling": "new"}}), "scaling"),
    (lambda s: s["evaluations"].update(metrics=s["evaluations"]["entropy"]), "taken by the run folder"),
    (lambda s: s["budgets"]["smoke"]["evaluations"].update(entropy={"method": "saliency"}), "not the method"),
    (lambda s: s["budgets"]["smoke"]["evaluations"].update(entropy={"streams": 0}), "streams"),
])
def test_bad_evaluation_declarations_are_named(change, message):
    study = load_study("pru")
    change(study)
    with pytest.raises(ConfigError, match=message):
        check_evaluations(study)


def write_corpus(folder: Path) -> None:
    words = [f"w{i}" for i in range(VOCAB - 1)]
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("".join(json.dumps(w) + "\n" for w in ["<eos>", *words]))
    (folder / "stats.json").write_text(json.dumps({"tokenizer": "word"}))
    generator = torch.Generator().manual_seed(0)
    for split, lines in (("train", 120), ("valid", 30), ("test", 30)):
        text = "".join(" ".join(words[i] for i in torch.randint(0, VOCAB - 1, (12,), generator=generator)) + "\n"
                       for _ in range(lines))
        (folder / f"{split}.txt").write_text(text)


def trained_cell(tmp_path: Path) -> Path:
    """A run folder with model.pt (weights + config) over a tiny processed corpus."""
    write_corpus(tmp_path / "data")
    cfg = {**tiny_config(), "study": "pru", "task": "lm", "dataset": "ptb", "corpus": "tiny", "model": "lstm_tiny",
           "fraction": 100, "seed": 1, "budget": "smoke",
           "data": {"dir": str(tmp_path / "data"), "train_file": str(tmp_path / "data" / "train.txt")}}
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    torch.save({"config": cfg, "state_dict": tiny_model().state_dict()}, run_dir / "model.pt")
    return run_dir


def evaluation_cli(run_dir: Path, spec: dict, output: Path) -> subprocess.CompletedProcess:
    """`python -m rnnrepro.evaluation` on one run folder, run in this process (conftest.run_here)."""
    from rnnrepro.evaluation.__main__ import main

    return run_here(main, ["--run-dir", str(run_dir), "--name", spec.get("name", "x"), "--config", json.dumps(spec),
                           "--output", str(output), "--device", "cpu", "--threads", "1"])


def test_cli_runs_each_method_over_a_run_folder(tmp_path):
    run_dir = trained_cell(tmp_path)
    specs = {
        "dynamic_eval": {"method": "dynamic", "scaling": "current", "splits": ["valid", "test"], "segment_length": 5,
                         "tuned_segment_length": 5, "stats_batch_size": 4, "stats_max_segments": 10, "epsilon": 1e-5,
                         "lr": [0.0, 1e-2], "decay": [1e-3], "tune_tokens": 100},
        "entropy": {"method": "entropy", "split": "valid", "streams": 3},
        "saliency": {"method": "saliency", "split": "test", "sequences": 2, "length": 5},
    }
    for name, settings in specs.items():
        result = evaluation_cli(run_dir, {"name": name, **settings},
                                run_dir / f"{name}.json")
        assert result.returncode == 0, result.stderr
    out = json.loads((run_dir / "dynamic_eval.json").read_text())
    assert (out["model"], out["evaluation"], len(out["grid"])) == ("lstm_tiny", "dynamic_eval", 2)
    for split in ("valid", "test"):
        assert out[f"static_{split}_ppl"] == pytest.approx(math.exp(out[f"static_{split}_loss"]))
    assert json.loads((run_dir / "entropy.json").read_text())["streams"] == 3
    # One given pair: used as is, no tuning pass.
    fixed = {"name": "dynamic_eval", **specs["dynamic_eval"], "lr": [1e-2], "splits": ["test"]}
    assert evaluation_cli(run_dir, fixed, run_dir / "fixed.json").returncode == 0
    out = json.loads((run_dir / "fixed.json").read_text())
    assert (out["grid"], out["tune_tokens"], out["lr"]) == ([{"lr": 1e-2, "decay": 1e-3}], 0, 1e-2)
    assert "static_valid_ppl" not in out
    assert len(json.loads((run_dir / "saliency.json").read_text())["sequences"]) == 2


def test_cli_names_bad_settings_and_a_missing_model(tmp_path):
    run_dir = trained_cell(tmp_path)
    bad = evaluation_cli(run_dir, {"name": "e", "method": "entropy", "split": "valid", "streams": 0},
                         tmp_path / "e.json")
    assert bad.returncode == 1 and "streams" in bad.stderr and not (tmp_path / "e.json").exists()
    (run_dir / "model.pt").unlink()
    missing = evaluation_cli(run_dir, {"name": "e", "method": "entropy", "split": "valid", "streams": 2},
                             tmp_path / "e.json")
    assert missing.returncode == 1 and "model.pt not found: train the cell first" in missing.stderr


def test_cli_names_a_damaged_model(tmp_path):
    """A truncated model.pt: one line naming the file and the fix, exit status 1, no output file."""
    run_dir = trained_cell(tmp_path)
    weights = run_dir / "model.pt"
    weights.write_bytes(weights.read_bytes()[:-100])
    result = evaluation_cli(run_dir, {"name": "e", "method": "entropy", "split": "valid", "streams": 2},
                            tmp_path / "e.json")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"error: {weights} is damaged (" in result.stderr
    assert "delete it and its metrics.json, then rerun" in result.stderr
    assert not (tmp_path / "e.json").exists()


@pytest.mark.parametrize("read", [
    lambda run_dir: pru.load_embedding(run_dir),                          # Figure 4
    lambda run_dir: lrn.load_trained(run_dir / "metrics.json"),            # the LRN gate analysis
    lambda run_dir: example_predictions(run_dir / "model.pt", 1, 10),       # the autocomplete examples
], ids=["pru_fig4", "lrn_gates", "nlstm_examples"])
def test_analyses_name_a_damaged_model(tmp_path, read):
    run_dir = trained_cell(tmp_path)
    weights = run_dir / "model.pt"
    weights.write_bytes(weights.read_bytes()[:-100])
    with pytest.raises(DamagedCheckpoint, match=rf"^{weights} is damaged .*delete it and its metrics.json"):
        read(run_dir)


def test_paper_budget_dry_run_lists_every_evaluation(tmp_path):
    project = copy_project(tmp_path)
    result = snakemake(project, "-n", "results/tables/pru_dynamic_eval.csv",
                       "results/tables/pru_fig3.csv", "results/tables/pru_saliency.csv")
    assert result.returncode == 0, result.stderr[-3000:]
    counts = {line.split()[0]: int(line.split()[1]) for line in result.stdout.splitlines()
              if len(line.split()) == 2 and line.split()[1].isdigit()}
    # 2 models x 3 evaluations over the two PTB Table 1 cells, which train once for all three notebooks.
    assert counts["evaluate_cell"] == 6 and counts["train_cell"] == 2


# ---- the notebooks, on fixtures ----------------------------------------------------------------

def fixture_cells(tmp_path: Path, evaluation: str, make) -> list[str]:
    """Two paper-budget PTB cells with what a notebook reads: metrics.json, the config.json the study file
    gives them (a notebook reads no stale cell) and the evaluation's output made by ``make(model)``."""
    files = []
    run_config = load_run_config({**load_yaml(REPO_ROOT / "config" / "config.yaml"), "budget": "paper"})
    for model in ("pru_g4_k2_m1400", "lstm_m1000"):
        grid_cell = grid.Cell("pru", "ptb", model, 100, 1111, "paper")
        run_dir = tmp_path / grid_cell.run_dir
        run_dir.mkdir(parents=True)
        (run_dir / "config.json").write_text(json.dumps(grid.resolve_cell(load_study("pru"), run_config, grid_cell)))
        cell = {"study": "pru", "dataset": "ptb", "corpus": "ptb", "model": model, "fraction": 100, "seed": 1111,
                "budget": "paper"}
        trained = {"params": 1000, "epochs": 1, "wall_seconds": 1.0, "val_loss": 4.2, "val_ppl": math.exp(4.2),
                   "test_loss": 4.1, "test_ppl": math.exp(4.1)}  # what the trainer writes (not read here)
        (run_dir / "metrics.json").write_text(json.dumps({**cell, **trained}))
        method = {"dynamic_eval": "dynamic"}.get(evaluation, evaluation)  # pru.yaml's `evaluations:`
        (run_dir / f"{evaluation}.json").write_text(json.dumps({**cell, "evaluation": evaluation, "method": method,
                                                                **make(model)}))
        files.append(str(run_dir / "metrics.json"))
    return files


def execute(notebook: str, artifact: str, metrics: list[str], tmp_path: Path, monkeypatch) -> pd.DataFrame:
    monkeypatch.chdir(REPO_ROOT)
    table, figure = tmp_path / f"{artifact}.csv", tmp_path / f"{artifact}.png"
    run_notebook(REPO_ROOT / "notebooks" / notebook, tmp_path / f"{artifact}.ipynb",
                 {"study": "pru", "artifact": artifact, "metrics_files": metrics, "tables": [str(table)],
                  "figures": [str(figure)]})
    assert figure.stat().st_size > 0
    return pd.read_csv(table)


def test_dynamic_eval_notebook(tmp_path, monkeypatch):
    numbers = {"pru_g4_k2_m1400": (60.0, 54.0), "lstm_m1000": (64.0, 57.0)}
    metrics = fixture_cells(tmp_path, "dynamic_eval", lambda m: {
        "static_test_ppl": numbers[m][0], "dynamic_test_ppl": numbers[m][1], "lr": 5e-5, "decay": 2e-3,
        "epsilon": 2e-5, "segment_length": 5, "grid": [{"lr": 5e-5, "decay": 2e-3, "tune_loss": 4.0, "tune_ppl": 54.6}]})
    table = execute("pru_dynamic_eval.py", "dynamic_eval", metrics, tmp_path, monkeypatch)
    assert table[["model", "evaluation"]].values.tolist() == [
        ["pru_g4_k2_m1400", "static"], ["pru_g4_k2_m1400", "dynamic"], ["lstm_m1000", "static"], ["lstm_m1000", "dynamic"]]
    assert table["test_ppl"].tolist() == [60.0, 54.0, 64.0, 57.0]
    assert table["paper_test_ppl"].tolist() == [62.42, 55.23, 66.29, 58.79]
    assert table["test_change_pct"].iloc[1] == pytest.approx(-10.0)


def test_fig3_notebook(tmp_path, monkeypatch):
    means = {"pru_g4_k2_m1400": 3.5, "lstm_m1000": 4.0}
    metrics = fixture_cells(tmp_path, "entropy", lambda m: {
        "split": "valid", "streams": 2, "steps": 3, "contexts": 6, "mean_entropy": means[m],
        "mean_entropy_first_stream": means[m] - 0.5,
        "entropies": [[means[m] - 0.5, means[m] + 0.5]] * 3})
    table = execute("pru_fig3.py", "fig3", metrics, tmp_path, monkeypatch)
    assert table["model"].tolist() == ["pru_g4_k2_m1400", "lstm_m1000"]
    assert table["mean_entropy"].tolist() == [3.5, 4.0]
    assert table["paper_mean_entropy"].tolist() == [3.80, 3.93]
    assert table["contexts"].tolist() == [6, 6]


def test_saliency_notebook(tmp_path, monkeypatch):
    metrics = fixture_cells(tmp_path, "saliency", lambda m: {"split": "test", "length": 3, "sequences": [
        {"words": ["the", "cat", "sat"], "target": "on", "saliency": [1.0, 1.0, 2.0],
         "top_words": ["on", "down", "up", "in", "."], "top_probabilities": [0.4, 0.2, 0.1, 0.05, 0.05],
         "target_probability": 0.4}]})
    table = execute("pru_saliency.py", "saliency", metrics, tmp_path, monkeypatch)
    assert len(table) == 6
    assert table["saliency_share"].tolist() == [0.25, 0.25, 0.5] * 2
    assert table["top5"].iloc[0].startswith("on (0.400) down (0.200)")


def test_gradient_passes_leave_the_precision_flags_readable():
    """The passes that take gradients in eval mode switch cuDNN off and on again without touching its
    TF32 flags: after `precision.apply` (torch's per-operator API) two such passes run without torch's
    complaint about mixed APIs, and leave cuDNN and the per-operator precisions as they were."""
    from rnnrepro import precision
    from rnnrepro.evaluation.dynamic import eval_mode_with_gradients

    before = torch.backends.cudnn.enabled
    precision.apply("fp32")
    for _ in range(2):
        with eval_mode_with_gradients(torch.nn.Linear(2, 2)):
            assert not torch.backends.cudnn.enabled
    assert torch.backends.cudnn.enabled == before
    if hasattr(torch.backends.cudnn, "rnn"):  # torch >= 2.9: the per-operator flags stay as apply set them
        assert torch.backends.cudnn.rnn.fp32_precision == torch.backends.cudnn.conv.fp32_precision == "ieee"
