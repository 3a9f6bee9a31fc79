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
"""

from __future__ import annotations

import torch
from torch import nn

from .regularisation import sequence_dropout


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
        expert_log_probs = torch.log_softmax(
            decoder(latent.view(steps, batch, self.experts, self.embedding_size)), dim=-1)   # (T, B, K, V)
        log_prior = torch.log_softmax(self.prior(hidden), dim=-1)                          # (T, B, K)
        return torch.logsumexp(expert_log_probs + log_prior.unsqueeze(-1), dim=2)
