"""Dynamic evaluation (Krause, Kahembwe, Murray & Renals, ICML 2018): adapt a trained language model to
the text it is scoring, one short segment at a time ("RMS-normalised SGD with decay to the trained
weights"; reference notes ``lrn.md`` §5 and ``pru_awd.md`` §7).

θ0 are the trained weights, dropout is off everywhere, the loss of a segment is its mean cross entropy.

Gradient statistics, once per model, on the *training* split cut into ``B_s`` parallel streams
(``stats_batch_size``) and segments of n tokens, the hidden state carried (detached) from segment to
segment; with g_s the gradient of segment s's loss at θ0 and S the number of segments:

    MS = sqrt( Σ_s g_s² / S )                                    (element-wise, per parameter tensor)
    gsum = mean over parameter tensors of mean(MS)
    r = min(MS / gsum, 1/λ)                                      (per-element decay rate)

Scoring a stream (validation or test) as one sequence (batch 1), segments of n tokens (the last one
shorter), the hidden state carried: predict, then adapt. For each segment s, score it with the current
θ (this loss counts), take the gradient ∇_s of that loss and update every element

    θ ← θ + λ · r ⊙ (θ0 − θ) − η · ∇_s / (MS + ε)

The reported loss is the mean over every scored token (Krause weights each segment's mean loss by
len/n, the same thing); the first token of a stream is never scored. With η = λ = 0 this is exactly
the static evaluation of θ0 on the whole stream at batch 1.

η (``lr``) and λ (``decay``) are given by the study (the authors' values where they published them:
one pair, used as given) or tuned on the first ``tune_tokens`` of the validation split over a declared
grid, restarting from
θ0 at every grid point and keeping the first best (Krause's ``--grid`` / ``--gridfast``). The chosen
pair then scores each split the study asks for (``splits``: validation and/or test), each from θ0.

Departures from ``benkrause/dynamic-evaluation:dynamiceval.py`` (current version, the "new" scaling):

1. Every target after the first is scored; the script's loop condition skips the final target when
   exactly one is left after the last full segment (at most one token per stream), and likewise may
   leave out a last one-row segment of the training statistics. Otherwise the two agree to float
   round-off (checked by running a transcription of the script's loop on a tiny model).
2. With λ = 0 the clip at 1/λ is not applied (the script would divide by zero); the decay term is
   zero anyway.
3. Parameters a model does not use in its forward pass get zero gradients (the script would fail).
4. Passes that take gradients run with cuDNN off (the script relied on an old PyTorch whose cuDNN
   RNNs had a backward in eval mode; see ``eval_mode_with_gradients``).
5. Only the current ("new") scaling is implemented. Settings published for the old script (used by
   MoS and the LRN paper: MS without the 1/S, gsum a sum over tensors) convert exactly as
   λ_new = λ_old / (number of parameter tensors), η_new = η_old / √S, ε_new = ε_old / √S (note §5.1),
   so a study states converted values.

Works for every model ``rnnrepro.train.language_model.build_model`` builds, including heads whose
``LMOutput.logits`` are already log-probabilities (mixture of softmaxes): cross entropy applies a
log-softmax, which leaves log-probabilities unchanged, so the loss is still their negative
log-likelihood. Tied weights are one parameter (``model.parameters()`` lists them once).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..cells import detach_state
from ..data.corpus import batchify, get_batch


@dataclass(frozen=True)
class DynamicSettings:
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
    decay_rates: list[torch.Tensor]  # MS / gsum, before the clip at 1/λ
    segments: int                    # S, training segments the statistics were collected over


@contextmanager
def eval_mode_with_gradients(model):
    """Dropout off (eval mode) for passes that take gradients, with cuDNN off: cuDNN has no backward
    through an RNN run in eval mode ("cudnn RNN backward can only be called in training mode",
    pytorch#5878, whose use case was dynamic evaluation; it hits nn.LSTM/nn.GRU and torch.lstm alike).
    PyTorch's own kernels compute the same function with a backward in any mode."""
    model.eval()
    with torch.backends.cudnn.flags(enabled=False):
        yield


def _segment_loss(model, x: torch.Tensor, y: torch.Tensor, state: list) -> tuple[torch.Tensor, list]:
    out = model(x, state)
    loss = F.cross_entropy(out.logits.reshape(-1, out.logits.size(-1)), y.reshape(-1))
    return loss, out.state


def _gradients(loss: torch.Tensor, params: list[torch.nn.Parameter]) -> list[torch.Tensor]:
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]


def gradient_statistics(model, train_tokens: torch.Tensor, batch_size: int, segment_length: int,
                        max_segments: int | None = None) -> GradientStatistics:
    """MS and the decay rates at the model's current weights (θ0), from the training stream."""
    params = list(model.parameters())
    device = params[0].device
    source = batchify(train_tokens, batch_size).to(device)
    sums = [torch.zeros_like(p) for p in params]
    state = model.init_state(batch_size)
    segments = 0
    with eval_mode_with_gradients(model):
        for i in range(0, source.size(0) - 1, segment_length):
            x, y = get_batch(source, i, segment_length)
            loss, state = _segment_loss(model, x, y, state)
            for total, grad in zip(sums, _gradients(loss, params)):
                total.addcmul_(grad, grad)
            state = [detach_state(s) for s in state]
            segments += 1
            if max_segments is not None and segments >= max_segments:
                break
    ms = [torch.sqrt(total / segments) for total in sums]
    gsum = torch.stack([m.mean() for m in ms]).mean()
    return GradientStatistics(ms=ms, decay_rates=[m / gsum for m in ms], segments=segments)


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

    def evaluate(self, tokens: torch.Tensor) -> float:
        """Mean cross entropy (nats per token) of a stream scored as one sequence, predict then adapt."""
        self.reset()
        model = self.model
        source = tokens.reshape(-1, 1).to(self.params[0].device)
        n = self.settings.segment_length
        state = model.init_state(1)
        total, count = 0.0, 0
        try:
            with eval_mode_with_gradients(model):
                for i in range(0, source.size(0) - 1, n):
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
def static_loss(model, tokens: torch.Tensor, window: int = 100) -> float:
    """Mean cross entropy of θ as it is over a stream scored as one sequence (batch 1, state carried).
    At batch 1 with the state carried the window only groups the work: the loss does not depend on it."""
    model.eval()
    source = tokens.reshape(-1, 1).to(next(model.parameters()).device)
    state = model.init_state(1)
    total, count = 0.0, 0
    for i in range(0, source.size(0) - 1, window):
        x, y = get_batch(source, i, window)
        loss, state = _segment_loss(model, x, y, state)
        total += loss.item() * y.numel()
        count += y.numel()
    return total / count


def tune(model, statistics: GradientStatistics, valid_tokens: torch.Tensor, lrs: list[float],
         decays: list[float], epsilon: float, segment_length: int) -> tuple[DynamicSettings, list[dict]]:
    """The (η, λ) of the grid with the lowest loss on ``valid_tokens`` (first best, λ outer, η inner, as
    Krause's script), and one row per grid point."""
    rows, best = [], None
    for decay in decays:
        for lr in lrs:
            settings = DynamicSettings(lr, decay, epsilon, segment_length)
            loss = DynamicEvaluator(model, statistics, settings).evaluate(valid_tokens)
            rows.append({"lr": lr, "decay": decay, "tune_loss": loss, "tune_ppl": math.exp(loss)})
            if not math.isfinite(loss):
                continue
            if best is None or loss < best[0]:
                best = (loss, settings)
    if best is None:
        raise ValueError(f"dynamic evaluation diverged at every grid point {rows}; lower the lr grid")
    return best[1], rows


def run(model, corpus, spec: dict) -> dict:
    """The ``method: dynamic`` evaluation of a trained model: static and dynamic loss/perplexity on each
    of the spec's ``splits``, with the hyperparameters used (tuned on validation when the spec gives a grid)."""
    n = spec["segment_length"]
    statistics = gradient_statistics(model, corpus.train, spec["stats_batch_size"], n, spec["stats_max_segments"])
    if len(spec["lr"]) * len(spec["decay"]) == 1:
        # The authors' pair, given: nothing to tune, so no validation pass for it.
        chosen = DynamicSettings(spec["lr"][0], spec["decay"][0], spec["epsilon"], n)
        tune_tokens, grid = corpus.valid[:0], [{"lr": chosen.lr, "decay": chosen.decay}]
    else:
        tune_tokens = corpus.valid if spec["tune_tokens"] is None else corpus.valid[: spec["tune_tokens"]]
        chosen, grid = tune(model, statistics, tune_tokens, spec["lr"], spec["decay"], spec["epsilon"], n)
    dynamic = DynamicEvaluator(model, statistics, chosen)
    out = {}
    for split in spec["splits"]:
        tokens = getattr(corpus, split)
        for name, loss in (("static", static_loss(model, tokens)), ("dynamic", dynamic.evaluate(tokens))):
            out[f"{name}_{split}_loss"] = loss
            out[f"{name}_{split}_ppl"] = math.exp(loss)
    return {**out, "lr": chosen.lr, "decay": chosen.decay, "epsilon": chosen.epsilon, "segment_length": n,
            "stats_batch_size": spec["stats_batch_size"], "stats_segments": statistics.segments,
            "tune_tokens": int(tune_tokens.numel()), "grid": grid}
