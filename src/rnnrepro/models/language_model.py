"""Word-level language model with a pluggable recurrent cell (AWD-LSTM / PRU layout).

tokens -> embedding (word-type dropout) -> input dropout -> layer 1 -> hidden dropout -> ... ->
layer L -> output dropout -> decoder (weight tied to the embedding). With tied weights the last layer
outputs the embedding size, as in both reference implementations.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..cells import build_layer
from .regularisation import embedding_dropout, run_with_weight_drop, sequence_dropout


@dataclass
class Dropouts:
    kind: str
    embedding: float
    input: float
    hidden: float
    output: float
    weight: float


@dataclass
class LMOutput:
    logits: torch.Tensor       # (T, B, V)
    state: list                # per-layer state, to carry into the next BPTT window
    last_raw: torch.Tensor     # last layer output before dropout (for TAR)
    last_dropped: torch.Tensor  # last layer output after dropout (for AR)


class LanguageModel(nn.Module):
    def __init__(self, vocab_size: int, cell: str, embedding_size: int, hidden_size: int, layers: int,
                 tie_weights: bool, cell_options: dict, dropouts: Dropouts, init: str = "awd"):
        """``init``: 'awd' -- embedding and decoder U(-0.1, 0.1), decoder bias 0 (AWD-LSTM, the PRU
        code); 'torch' -- torch's defaults, embedding N(0, 1), decoder weight and bias U(+-1/sqrt(fan_in))
        (the LRU authors' langModel). The recurrent layers initialise themselves either way."""
        super().__init__()
        if init not in ("awd", "torch"):
            raise ValueError(f"init={init!r}: expected 'awd' or 'torch'")
        self.dropouts = dropouts
        self.embedding = nn.Embedding(vocab_size, embedding_size)
        last_size = embedding_size if tie_weights else hidden_size
        sizes = [embedding_size] + [hidden_size] * (layers - 1) + [last_size]
        self.layers = nn.ModuleList(
            build_layer(cell, sizes[i], sizes[i + 1], **cell_options) for i in range(layers))
        self.decoder = nn.Linear(last_size, vocab_size)
        if init == "awd":
            nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
            nn.init.zeros_(self.decoder.bias)
            if not tie_weights:
                nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        if tie_weights:
            self.decoder.weight = self.embedding.weight

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
            raw, layer_state = run_with_weight_drop(layer, x, state[i], d.weight, self.training)
            new_state.append(layer_state)
            is_last = i == len(self.layers) - 1
            x = sequence_dropout(raw, d.output if is_last else d.hidden, d.kind, self.training)
        return LMOutput(self.decoder(x), new_state, raw, x)
