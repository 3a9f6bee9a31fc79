"""Mixture-of-softmaxes output head, MoS (Yang, Dai, Salakhutdinov & Cohen, ICLR 2018).

Given the last recurrent layer's (dropped) output g_t (size L), K experts share the decoder:

    π_t = softmax(W_π g_t)                                 (mixture weights, W_π: K x L, no bias)
    c_{t,k} = tanh(W_h g_t + b_h)[k]                        (K latent contexts of size E, W_h: K·E x L)
    P(w | t) = Σ_k π_{t,k} · softmax(E c_{t,k} + b)_w       (E: the tied V x E embedding, b: V)

Parameters beside the embedding: V (decoder bias) + K·L (W_π) + K·E·L + K·E (W_h, b_h). With the LRN
authors' PTB shapes (V 10,000, E 280, L 620, K 15) that is 10,000 + 9,300 + 2,608,200, plus the
2,800,000 of the embedding; the LM's totals per cell are in tests/test_lrn.py (PAPER_TOTALS).

Regularisation as the MoS code: locked dropout ``latent_dropout`` (dropoutl) on the latent contexts,
one mask per sequence; the dropout on g_t itself is the LM's output dropout, applied before the head.

Output: log P(w | t) of shape (T, B, V), returned as the LM's ``logits``. log_softmax of a vector of
log-probabilities returns it unchanged, so ``F.cross_entropy`` on it is the mixture's negative
log-likelihood and the training loop and every evaluation need no change.

Departure from the MoS code (``zihangdai/mos`` and ``bzhangGo/lrn`` ``lm/code/model.py``): it returns
log(Σ_k π_k softmax_k + 1e-8), so its loss of a target of mixture probability p is -log(p + 1e-8) in
training, evaluation and dynamic evaluation alike; we compute logsumexp_k(log π_k + log_softmax_k),
the exact log p, without overflow or underflow and without the 1e-8. The two losses differ by
log(1 + 1e-8/p) < 1e-8/p nats per token: below 1e-4 nats wherever p > 1e-4, and only targets given
less than about 1e-6 move by more than 0.01 nats (the authors' loss is capped at -log 1e-8 = 18.4
nats, ours is not). Their gradient is ours times p / (p + 1e-8), which matters only for such targets.

Memory: the experts' logits z (T, B, K, V) are the head's one large tensor: at the LRN authors' PTB
training shapes (batch 12, BPTT 70, K 15, V 10,000) each such tensor holds 126 M floats (504 MB).
Written as log_softmax, add and logsumexp, autograd keeps two of them for the backward pass and the
forward and backward passes allocate about eight in all; on a CPU each is fresh memory from the
operating system (PyTorch's CPU allocator does not cache, glibc maps every block this large anew),
so every step paid for page faults on about 4 GB: the lrn speed job spent as much time in the kernel as
in its own arithmetic. :class:`LogMixture` computes the same function with its own backward: it keeps
only z (which the decoder produced anyway) and the small per-expert normalisers, and allocates one
more such tensor in the forward pass and two in the backward pass, computing in place. The arithmetic
is float32 at least (float64 stays float64), whatever precision the decoder's product ran in.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from .regularisation import sequence_dropout


class LogMixture(torch.autograd.Function):
    """log Σ_k π_k softmax(z_k): experts' logits z (..., K, V) and log π (..., K) -> (..., V), with a
    backward that needs no more than z, the per-expert log-normalisers and the result.

    With p_k = softmax(z_k), log P = logsumexp_k(log π_k + log p_k) and the responsibilities
    r_kw = π_k p_kw / P_w (Σ_k r_kw = 1), the gradient of a loss with dL/dlog P_w = g_w is

        dL/dz_kw = g_w r_kw − p_kw s_k,    dL/dlog π_k = s_k,    s_k = Σ_w g_w r_kw.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, log_prior: torch.Tensor) -> torch.Tensor:
        dtype = torch.promote_types(logits.dtype, torch.float32)
        peak = logits.amax(-1, keepdim=True).to(dtype)
        work = torch.sub(logits, peak)                                   # the one temporary of z's size
        log_normaliser = work.exp_().sum(-1).log_().add_(peak.squeeze(-1))       # log Σ_w exp z_kw
        torch.add(logits, (log_prior.to(dtype) - log_normaliser).unsqueeze(-1), out=work)  # log π_k p_kw
        peak = work.amax(-2, keepdim=True)
        log_mixture = work.sub_(peak).exp_().sum(-2).log_().add_(peak.squeeze(-2))
        ctx.save_for_backward(logits, log_prior, log_normaliser, log_mixture)
        return log_mixture

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits, log_prior, log_normaliser, log_mixture = ctx.saved_tensors
        dtype = log_mixture.dtype
        grad_logits = torch.add(logits, (log_prior.to(dtype) - log_normaliser).unsqueeze(-1))
        grad_logits.sub_(log_mixture.unsqueeze(-2)).exp_().mul_(grad.to(dtype).unsqueeze(-2))   # g_w r_kw
        expert_share = grad_logits.sum(-1)                                                     # s_k
        softmaxes = torch.sub(logits, log_normaliser.unsqueeze(-1)).exp_()                     # p_kw
        grad_logits.sub_(softmaxes.mul_(expert_share.unsqueeze(-1)))
        return grad_logits.to(logits.dtype), expert_share.to(log_prior.dtype)


class MixtureOfSoftmaxes(nn.Module):
    """K softmaxes through a (tied) decoder, mixed by a learned prior; returns log-probabilities."""

    def __init__(self, input_size: int, embedding_size: int, experts: int, latent_dropout: float):
        super().__init__()
        if experts < 1:
            raise ValueError(f"mixture of softmaxes: experts={experts}; use at least 1")
        self.experts, self.embedding_size, self.latent_dropout = experts, embedding_size, latent_dropout
        self.prior = nn.Linear(input_size, experts, bias=False)
        self.latent = nn.Linear(input_size, experts * embedding_size)

    @staticmethod
    def parameter_count(input_size: int, embedding_size: int, experts: int) -> int:
        """The head's own parameters (the decoder's weight and bias belong to the LM)."""
        return input_size * experts + input_size * experts * embedding_size + experts * embedding_size

    def forward(self, hidden: torch.Tensor, decoder: nn.Linear, dropout_kind: str) -> torch.Tensor:
        """``hidden`` (T, B, L) -> log-probabilities (T, B, V) through ``decoder`` (E -> V)."""
        steps, batch, _ = hidden.shape
        latent = torch.tanh(self.latent(hidden))
        latent = sequence_dropout(latent, self.latent_dropout, dropout_kind, self.training)
        expert_logits = decoder(latent.view(steps, batch, self.experts, self.embedding_size))  # (T, B, K, V)
        log_prior = torch.log_softmax(self.prior(hidden), dim=-1)                              # (T, B, K)
        return LogMixture.apply(expert_logits, log_prior)
