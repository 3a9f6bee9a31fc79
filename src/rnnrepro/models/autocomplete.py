"""The autocomplete classifier of the Nested-LSTM comparison: characters -> embedding -> recurrent
layers from the cell library -> dense layer to the word classes, one prediction per character.

Parameter counts (the published table, 600 units, 28 input symbols, 16,386 classes):

- embedding: (input symbols - 1) x E = 27 x 600 = 16,200. The padding symbol's row is a constant zero
  vector, not a parameter (the authors' ``embedding_matrix`` concatenates a zero row to a trainable
  27-row matrix), so padding feeds nothing into the recurrence.
- recurrent: the cells' own counts; the published numbers are those of the single-bias TensorFlow cells
  (``gru_single_bias``, ``lstm_single_bias``, ``nested_lstm``; see their docstrings).
- dense: (H + 1) x classes = 601 x 16,386 = 9,847,986.

Every sequence starts from a zero state. Padding sits after the end of each sequence, so the causal
recurrence never carries it into a real position; the loss and accuracy mask it out.

Initialisation as the authors' TensorFlow model where the cell library leaves it open: embedding
U(+-sqrt(1/27)), dense weight Glorot-uniform with zero bias (``tf.layers.dense``). The recurrent layers
keep the library's U(+-1/sqrt(M)) -- for the LSTMs the same bound as TensorFlow's Glorot-uniform
kernel at 600 -> 600; TensorFlow's GRUCell starts its gate biases at 1, the library's GRU does not.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..cells import build_layer


class AutocompleteModel(nn.Module):
    def __init__(self, input_symbols: int, classes: int, cell: str, embedding_size: int, hidden_size: int,
                 layers: int, cell_options: dict):
        super().__init__()
        self.embedding = nn.Parameter(torch.empty(input_symbols - 1, embedding_size))
        sizes = [embedding_size] + [hidden_size] * layers
        self.layers = nn.ModuleList(build_layer(cell, sizes[i], sizes[i + 1], **cell_options)
                                    for i in range(layers))
        self.dense = nn.Linear(hidden_size, classes)
        bound = math.sqrt(1.0 / (input_symbols - 1))
        nn.init.uniform_(self.embedding, -bound, bound)
        nn.init.xavier_uniform_(self.dense.weight)
        nn.init.zeros_(self.dense.bias)

    def parameter_counts(self) -> dict[str, int]:
        return {
            "embedding": self.embedding.numel(),
            "recurrent": sum(p.numel() for layer in self.layers for p in layer.parameters()),
            "dense": sum(p.numel() for p in self.dense.parameters()),
        }

    def embed(self, inputs: torch.Tensor) -> torch.Tensor:
        table = torch.cat([self.embedding.new_zeros(1, self.embedding.size(1)), self.embedding])
        return F.embedding(inputs, table)

    def forward(self, inputs: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Logits of ``inputs`` (T, B): (T, B, classes), or (K, classes) at the K ``positions`` (a (T, B)
        boolean mask) only -- the dense layer dominates the cost, so training skips masked positions."""
        x = self.embed(inputs)
        for layer in self.layers:
            x, _ = layer(x, layer.init_state(inputs.size(1), x.device, x.dtype))
        if positions is not None:
            x = x[positions]
        return self.dense(x)
