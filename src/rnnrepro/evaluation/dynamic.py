"""Dynamic evaluation (Krause, Kahembwe, Murray & Renals, ICML 2018): adapt a trained language model to
the text it is scoring, one short segment at a time ("RMS-normalised SGD with decay to the trained
weights"; ``benkrause/dynamic-evaluation:dynamiceval.py``).

θ0 are the trained weights, dropout is off everywhere, the loss of a segment is its mean cross entropy.

Gradient statistics, once per model, on the *training* split cut into ``B_s`` parallel streams
(``stats_batch_size``) and segments of n tokens, the hidden state carried (detached) from segment to
segment; with g_s the gradient of segment s's loss at θ0 and S the number of segments:

    MS = sqrt( Σ_s g_s² / S )                                    (element-wise, per parameter tensor)
    gsum = mean over parameter tensors t of mean(MS_t)
    r = min(MS / gsum, 1/λ)                                      (per-element decay rate)

Scoring a stream (validation or test) as one sequence (batch 1), segments of n tokens (the last one
shorter), the hidden state carried: predict, then adapt. For each segment s, score it with the current
θ (this loss counts), take the gradient ∇_s of that loss and update every element

    θ ← θ + λ · r ⊙ (θ0 − θ) − η · ∇_s / (MS + ε)

The reported loss is the mean over every scored token (Krause weights each segment's mean loss by
len/n, the same thing); the first token of a stream is never scored. With η = λ = 0 this is exactly
the static evaluation of θ0 on the whole stream at batch 1.

**The parameter tensors gsum averages over** are those of the code the settings were published for,
not necessarily ours: gsum is the one place where the update depends on how parameters are cut into
tensors. Our single-bias LSTM and GRU store their weights as weight_ih, weight_hh and bias, where the
LRN authors' code (``bzhangGo/lrn:lm/code/rnn.py``) holds one joint [x; h] matrix and one bias (LSTM:
2 tensors a layer, so 11 in their mixture-of-softmaxes LM where ours has 14) or a gate matrix, a
candidate matrix and their biases (GRU: 4 a layer, 17 in all, ours 14). :func:`published_tensors`
gives the partition as the authors' code holds it (LRN, ATR, SRU, the PRU and nn.LSTM/nn.GRU cells
are stored as they are); MS itself is element-wise and does not depend on it.

η (``lr``) and λ (``decay``) are given by the study (the authors' values where they published them:
one pair, used as given) or tuned on the first ``tune_tokens`` of the validation split over a declared
grid, restarting from θ0 at every grid point and keeping the first best (Krause's ``--grid`` /
``--gridfast``). The chosen pair then scores each split the study asks for (``splits``: validation
and/or test), each from θ0.

**Scalings** (``scaling``). ``current``: the equations above, as Krause's current script.
``old``: the settings are those of the script's first version, which MoS and the LRN paper ran
(``bzhangGo/lrn:lm/code/dynamiceval.py``): there MS = sqrt(Σ_s g_s²) (no 1/S) and gsum is the *sum*
over tensors of mean(MS). They are converted exactly, at run time, to the current scaling:

    λ = λ_old / T,      η = η_old / √S,      ε = ε_old / √S

T the number of published tensors (above), S the number of segments the script's statistics sum over:
the whole training split's (also when ``stats_max_segments`` estimates MS from fewer). Then every
update, the clip at 1/λ included, equals the old script's on the authors' model
(tests/test_evaluation.py checks it against a transcription of that script for LSTM, GRU and LRN).

**Segment length.** Settings are tuned for a segment length n (``tuned_segment_length``; Krause's
and the authors': 5). With another ``segment_length`` there are fewer updates per token, and η and λ
are both scaled by segment_length / tuned_segment_length, as Krause's script scales its grid.

Departures from ``benkrause/dynamic-evaluation:dynamiceval.py`` (current version):

1. Every target after the first is scored; the script's loop condition skips the final target when
   exactly one is left after the last full segment (at most one token per stream). Otherwise the two
   agree to float round-off (checked by running a transcription of the script's loop on a tiny model).
   The statistics loop is the script's (a last one-row segment is left out, as there).
2. With λ = 0 the clip at 1/λ is not applied (the script would divide by zero); the decay term is
   zero anyway.
3. Parameters a model does not use in its forward pass get zero gradients (the script would fail).
4. Passes that take gradients run with cuDNN off (the script relied on an old PyTorch whose cuDNN
   RNNs had a backward in eval mode; see ``eval_mode_with_gradients``).

Works for every model ``rnnrepro.train.language_model.build_model`` builds, including heads whose
``LMOutput.logits`` are already log-probabilities (mixture of softmaxes): cross entropy applies a
log-softmax, which leaves log-probabilities unchanged, so the loss is still their negative
log-likelihood. Tied weights are one parameter (``model.parameters()`` lists them once, as the
authors' code's).
"""

from __future__ import annotations

import math
import sys
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .. import console
from ..cells import detach_state
from ..cells.gru import SingleBiasGRULayer
from ..cells.lstm_single_bias import SingleBiasLSTMLayer
from ..data.corpus import batchify, get_batch

SCALINGS = ("current", "old")


@dataclass(frozen=True)
class DynamicSettings:
    """The update's settings as applied: the current scaling, at this segment length."""
    lr: float            # η, step size of the RMS-normalised update
    decay: float         # λ, pull toward the trained weights per segment
    epsilon: float       # ε, added to MS in the update's denominator
    segment_length: int  # n, tokens scored before each update

    def __post_init__(self):
        if self.lr < 0 or self.decay < 0 or self.epsilon <= 0 or self.segment_length < 1:
            raise ValueError(f"dynamic evaluation settings {self}: lr and decay must be >= 0, epsilon > 0 and "
                             "segment_length >= 1; fix the study file's evaluations entry")


@dataclass
class GradientStatistics:
    ms: list[torch.Tensor]           # root mean square of the training gradients, per parameter tensor
    decay_rates: list[torch.Tensor]  # MS / gsum (gsum over the published tensors), before the clip at 1/λ
    segments: int                    # S, training segments the statistics were collected over
    split_segments: int              # segments of the whole training split (the old scaling's S)
    tensors: int                     # T, published tensors gsum averages over


# Rows of a layer's parameter, or None for all of it; a published tensor is a list of such pieces.
Piece = tuple[str, "slice | None"]


def _single_bias_lstm_tensors(layer: SingleBiasLSTMLayer) -> list[list[Piece]]:
    """The LRN authors' LSTMCell: _W ((N+M) x 4M, the input and recurrent weights in one) and _b."""
    return [[("weight_ih", None), ("weight_hh", None)], [("bias", None)]]


def _single_bias_gru_tensors(layer: SingleBiasGRULayer) -> list[list[Piece]]:
    """The LRN authors' GRUCell: _W ((N+M) x 2M, gates r and u), _W_b, _U ((N+M) x M, the candidate),
    _U_b; ours holds the rows r, u, c of both weights and the bias."""
    gates, candidate = slice(0, 2 * layer.hidden_size), slice(2 * layer.hidden_size, 3 * layer.hidden_size)
    return [[("weight_ih", gates), ("weight_hh", gates)], [("bias", gates)],
            [("weight_ih", candidate), ("weight_hh", candidate)], [("bias", candidate)]]


# Layers whose published code holds their parameters in other tensors than ours (every other
# parameter, ours and the published code's alike, is one tensor).
PUBLISHED_LAYOUTS = {SingleBiasLSTMLayer: _single_bias_lstm_tensors, SingleBiasGRULayer: _single_bias_gru_tensors}


def published_tensors(model) -> list[list[tuple[int, slice | None]]]:
    """``model.parameters()`` cut into tensors as the code the settings come from holds them: one entry
    per tensor of that code, each a list of (index into ``model.parameters()``, rows or None for all)."""
    index = {id(p): i for i, p in enumerate(model.parameters())}
    tensors, claimed = [], set()
    for module in model.modules():
        layout = PUBLISHED_LAYOUTS.get(type(module))
        if layout is None:
            continue
        for pieces in layout(module):
            tensors.append([(index[id(module.get_parameter(name))], rows) for name, rows in pieces])
        claimed.update(index[id(p)] for p in module.parameters())
    return tensors + [[(i, None)] for i in range(len(index)) if i not in claimed]


def _published_means(ms: list[torch.Tensor], tensors: list[list[tuple[int, slice | None]]]) -> torch.Tensor:
    """mean(MS) over each published tensor."""
    means = []
    for pieces in tensors:
        parts = [ms[i] if rows is None else ms[i][rows] for i, rows in pieces]
        means.append(sum(part.sum() for part in parts) / sum(part.numel() for part in parts))
    return torch.stack(means)


@contextmanager
def eval_mode_with_gradients(model):
    """Dropout off (eval mode) for passes that take gradients, with cuDNN off: cuDNN has no backward
    through an RNN run in eval mode ("cudnn RNN backward can only be called in training mode",
    pytorch#5878, whose use case was dynamic evaluation; it hits nn.LSTM/nn.GRU and torch.lstm alike).
    PyTorch's own kernels compute the same function with a backward in any mode. Only ``enabled`` is
    switched: ``torch.backends.cudnn.flags`` would also set and restore TF32 through the legacy flag,
    which leaves the per-operator precisions that ``precision.apply`` set disagreeing, and the next
    reader of that flag in the process raises."""
    model.eval()
    was_enabled = torch.backends.cudnn.enabled
    torch.backends.cudnn.enabled = False
    try:
        yield
    finally:
        torch.backends.cudnn.enabled = was_enabled


def _segment_loss(model, x: torch.Tensor, y: torch.Tensor, state: list) -> tuple[torch.Tensor, list]:
    out = model(x, state)
    loss = F.cross_entropy(out.logits.reshape(-1, out.logits.size(-1)), y.reshape(-1))
    return loss, out.state


def _gradients(loss: torch.Tensor, params: list[torch.nn.Parameter]) -> list[torch.Tensor]:
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]


def gradient_statistics(model, train_tokens: torch.Tensor, batch_size: int, segment_length: int,
                        max_segments: int | None = None) -> GradientStatistics:
    """MS and the decay rates at the model's current weights (θ0), from the training stream: segments
    start at rows 0, n, 2n, ... while at least two rows are left (the script's loop), at most
    ``max_segments`` of them."""
    params = list(model.parameters())
    device = params[0].device
    source = batchify(train_tokens, batch_size).to(device)
    starts = range(0, source.size(0) - 2, segment_length)
    if not starts:
        raise ValueError(f"{train_tokens.numel()} training tokens in {batch_size} streams give no segment for the "
                         "gradient statistics; lower stats_batch_size")
    sums = [torch.zeros_like(p) for p in params]
    state = model.init_state(batch_size)
    segments = 0
    used = starts[:max_segments]
    with eval_mode_with_gradients(model):
        for i in console.progress(len(used), "dynamic evaluation: gradient statistics", "segment", iterable=used):
            x, y = get_batch(source, i, segment_length)
            loss, state = _segment_loss(model, x, y, state)
            for total, grad in zip(sums, _gradients(loss, params)):
                total.addcmul_(grad, grad)
            state = [detach_state(s) for s in state]
            segments += 1
    ms = [torch.sqrt(total / segments) for total in sums]
    tensors = published_tensors(model)
    gsum = _published_means(ms, tensors).mean()
    return GradientStatistics(ms=ms, decay_rates=[m / gsum for m in ms], segments=segments,
                              split_segments=len(starts), tensors=len(tensors))


@dataclass(frozen=True)
class GridPoint:
    lr: float                  # η as the study gives it (its scaling, for its tuned segment length)
    decay: float               # λ, likewise
    settings: DynamicSettings  # as applied


def applied_settings(spec: dict, statistics: GradientStatistics, lr: float, decay: float) -> DynamicSettings:
    """The study's η, λ and ε in the current scaling (exact conversion from the old one: λ / T, η / √S,
    ε / √S), η and λ scaled by segment_length / tuned_segment_length."""
    epsilon = spec["epsilon"]
    if spec["scaling"] == "old":
        root = math.sqrt(statistics.split_segments)
        lr, decay, epsilon = lr / root, decay / statistics.tensors, epsilon / root
    elif spec["scaling"] != "current":
        raise ValueError(f"unknown scaling {spec['scaling']!r}; use one of {', '.join(map(repr, SCALINGS))}")
    n = spec["segment_length"]
    factor = n / spec["tuned_segment_length"]
    return DynamicSettings(lr * factor, decay * factor, epsilon, n)


class DynamicEvaluator:
    """Scores token streams with dynamic evaluation; the model is adapted in place and put back to θ0
    (its weights when the evaluator was made) before and after every stream."""

    def __init__(self, model, statistics: GradientStatistics, settings: DynamicSettings):
        self.model = model
        self.settings = settings
        self.params = list(model.parameters())
        self.theta0 = [p.detach().clone() for p in self.params]
        s = settings
        rates = [r.clamp(max=1.0 / s.decay) if s.decay > 0 else r for r in statistics.decay_rates]
        # Per-element factors of the update, fixed for the whole stream.
        self.pull = [s.decay * r for r in rates]
        self.step_scale = [s.lr / (m + s.epsilon) for m in statistics.ms]

    def reset(self) -> None:
        with torch.no_grad():
            for p, p0 in zip(self.params, self.theta0):
                p.copy_(p0)

    def adapt(self, loss: torch.Tensor) -> None:
        """One update θ ← θ + λ r ⊙ (θ0 − θ) − η ∇/(MS + ε) from a segment's loss."""
        grads = _gradients(loss, self.params)
        with torch.no_grad():
            for p, p0, pull, scale, g in zip(self.params, self.theta0, self.pull, self.step_scale, grads):
                p.addcmul_(pull, p0 - p).addcmul_(scale, g, value=-1.0)

    def evaluate(self, tokens: torch.Tensor, what: str = "dynamic evaluation") -> float:
        """Mean cross entropy (nats per token) of a stream scored as one sequence, predict then adapt."""
        self.reset()
        model = self.model
        source = tokens.reshape(-1, 1).to(self.params[0].device)
        n = self.settings.segment_length
        state = model.init_state(1)
        total, count = 0.0, 0
        starts = range(0, source.size(0) - 1, n)
        try:
            with eval_mode_with_gradients(model):
                for i in console.progress(len(starts), what, "segment", iterable=starts):
                    x, y = get_batch(source, i, n)
                    loss, state = _segment_loss(model, x, y, state)
                    total += loss.item() * y.numel()
                    count += y.numel()
                    self.adapt(loss)
                    state = [detach_state(s) for s in state]
        finally:
            self.reset()
        if count == 0:
            raise ValueError(f"a stream of {tokens.numel()} tokens has nothing to score (need at least 2)")
        return total / count


@torch.no_grad()
def static_loss(model, tokens: torch.Tensor, window: int = 100, what: str = "static evaluation") -> float:
    """Mean cross entropy of θ as it is over a stream scored as one sequence (batch 1, state carried).
    At batch 1 with the state carried the window only groups the work: the loss does not depend on it."""
    model.eval()
    source = tokens.reshape(-1, 1).to(next(model.parameters()).device)
    state = model.init_state(1)
    total, count = 0.0, 0
    starts = range(0, source.size(0) - 1, window)
    for i in console.progress(len(starts), what, "window", iterable=starts):
        x, y = get_batch(source, i, window)
        loss, state = _segment_loss(model, x, y, state)
        total += loss.item() * y.numel()
        count += y.numel()
    return total / count


#: the largest loss whose perplexity (exp) a float holds
MAX_LOSS = math.log(sys.float_info.max)


def tune(model, statistics: GradientStatistics, valid_tokens: torch.Tensor,
         points: list[GridPoint]) -> tuple[GridPoint, list[dict]]:
    """The grid point with the lowest loss on ``valid_tokens`` (the first best, in the given order:
    λ outer, η inner, as Krause's script), and one row per point (η and λ as the study gives them)."""
    rows, best = [], None
    for point in points:
        loss = DynamicEvaluator(model, statistics, point.settings).evaluate(
            valid_tokens, f"dynamic evaluation: tuning on validation, lr {point.lr}, decay {point.decay}")
        # a point that diverged (a loss past exp's range, or not finite) is shown without a perplexity
        # and never chosen
        diverged = not math.isfinite(loss) or loss > MAX_LOSS
        rows.append({"lr": point.lr, "decay": point.decay, "tune_loss": loss if math.isfinite(loss) else None,
                     "tune_ppl": None if diverged else math.exp(loss)})
        if diverged:
            continue
        if best is None or loss < best[0]:
            best = (loss, point)
    if best is None:
        raise ValueError(f"dynamic evaluation diverged at every grid point {rows}; lower the lr grid")
    return best[1], rows


def run(model, corpus, spec: dict) -> dict:
    """The ``method: dynamic`` evaluation of a trained model: static and dynamic loss/perplexity on each
    of the spec's ``splits``, with the hyperparameters used (tuned on validation when the spec gives a
    grid): ``lr``, ``decay``, ``epsilon`` as applied (current scaling, this segment length), ``given_*``
    as the study gives them."""
    n = spec["segment_length"]
    statistics = gradient_statistics(model, corpus.train, spec["stats_batch_size"], n, spec["stats_max_segments"])
    points = [GridPoint(lr, decay, applied_settings(spec, statistics, lr, decay))
              for decay in spec["decay"] for lr in spec["lr"]]
    if len(points) == 1:
        # The authors' pair, given: nothing to tune, so no validation pass for it.
        chosen, tune_tokens, grid = points[0], corpus.valid[:0], [{"lr": points[0].lr, "decay": points[0].decay}]
    else:
        tune_tokens = corpus.valid if spec["tune_tokens"] is None else corpus.valid[: spec["tune_tokens"]]
        chosen, grid = tune(model, statistics, tune_tokens, points)
    dynamic = DynamicEvaluator(model, statistics, chosen.settings)
    out = {}
    for split in spec["splits"]:
        tokens = getattr(corpus, split)
        for name, loss in (("static", static_loss(model, tokens, what=f"static evaluation: {split}")),
                           ("dynamic", dynamic.evaluate(tokens, f"dynamic evaluation: {split}"))):
            out[f"{name}_{split}_loss"] = loss
            out[f"{name}_{split}_ppl"] = math.exp(loss)
    applied = chosen.settings
    return {**out, "lr": applied.lr, "decay": applied.decay, "epsilon": applied.epsilon, "segment_length": n,
            "scaling": spec["scaling"], "given_lr": chosen.lr, "given_decay": chosen.decay,
            "given_epsilon": spec["epsilon"], "tuned_segment_length": spec["tuned_segment_length"],
            "published_tensors": statistics.tensors, "stats_batch_size": spec["stats_batch_size"],
            "stats_segments": statistics.segments, "stats_split_segments": statistics.split_segments,
            "tune_tokens": int(tune_tokens.numel()), "grid": grid}
