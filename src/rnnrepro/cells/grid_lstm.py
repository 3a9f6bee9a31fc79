"""Two-dimensional Grid LSTM (Kalchbrenner, Danihelka & Graves, 2015) over time x depth.

A block at (step t, row l) reads the hidden vectors arriving along both dimensions, concatenated,
H = [x; h] (x: depth hidden from the row below, h: time hidden from step t-1), and applies one LSTM
transform per dimension, each with its own weights and its own memory:

    time:   [i, f, g, o] = [σ, σ, tanh, σ](W^t_x x + W^t_h h + b^t),   m'  = f ⊙ m  + i ⊙ g,   h' = o ⊙ tanh(m')
    depth:  [i, f, g, o] = [σ, σ, tanh, σ](W^d_x x + W^d_h h + b^d),   m'_d = f ⊙ m_d + i ⊙ g,  x' = o ⊙ tanh(m'_d)

(h', m') go to step t+1, (x', m'_d) to row l+1. The first row reads x = the layer input (N features)
and m_d = 0; the top row's x' is the output. This is the 2-D (time x depth) Grid LSTM the LRU paper
compares with.

Depth memory travels from row to row, so the depth dimension belongs inside the cell: one
GridLSTMLayer is the whole grid of ``depth`` rows (build the model with one layer of this cell). Its
state is the time flow of every row: (h, m), each (B, depth, M).

Because both transforms read the same H, the time transform of a row is an LSTM over the sequence of
x; it runs in torch's fused LSTM kernel (nn.LSTM). The depth transform never feeds back in time, so
it is computed for all steps at once from x and the shifted time outputs.

Parameters: 2 x 4M(N + M + 2) for the first row and 2 x 8M(M + 1) for each further row, i.e.
depth (16M^2 + 16M) when N = M; each transform has the nn.LSTM layout (W_x, W_h and two biases), the
same count as the LRU authors' GridLSTM (two nn.LSTMCell per block). Their code departs from the
paper in one point: it applies the depth transform first and feeds the *new* depth hidden x' to the
time transform (sequential), where Kalchbrenner et al. give both transforms the same H (parallel).
We follow the paper. Weight drop takes both transforms' W_h (they multiply h_{t-1}).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .base import RecurrentLayer
from .recurrence import uniform_init_, zero_state


class GridLSTMRow(nn.Module):
    """One row of blocks along time: the time transform (nn.LSTM) and the depth transform."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.time = nn.LSTM(input_size, hidden_size)
        self.depth_weight_ih = nn.Parameter(torch.empty(4 * hidden_size, input_size))
        self.depth_weight_hh = nn.Parameter(torch.empty(4 * hidden_size, hidden_size))
        self.depth_bias_ih = nn.Parameter(torch.empty(4 * hidden_size))
        self.depth_bias_hh = nn.Parameter(torch.empty(4 * hidden_size))
        uniform_init_(self, hidden_size)

    def forward(self, x: torch.Tensor, depth_memory: torch.Tensor | None, h: torch.Tensor, m: torch.Tensor):
        """x, depth_memory: (T, B, .) from the row below (memory None for the first row); h, m: (B, M)."""
        time_hidden, (h_last, m_last) = self.time(x, (h.unsqueeze(0).contiguous(), m.unsqueeze(0).contiguous()))
        previous = torch.cat([h.unsqueeze(0), time_hidden[:-1]])
        gates = (F.linear(x, self.depth_weight_ih, self.depth_bias_ih)
                 + F.linear(previous, self.depth_weight_hh, self.depth_bias_hh))
        i, f, g, o = gates.chunk(4, dim=2)
        memory = torch.sigmoid(i) * torch.tanh(g)
        if depth_memory is not None:
            memory = torch.addcmul(memory, torch.sigmoid(f), depth_memory)
        return torch.sigmoid(o) * torch.tanh(memory), memory, h_last.squeeze(0), m_last.squeeze(0)


class GridLSTMLayer(RecurrentLayer):
    """A 2-D Grid LSTM of ``depth`` rows; y = top row's depth output; state (h, m), each (B, depth, M)."""

    def __init__(self, input_size: int, hidden_size: int, *, depth: int):
        """``depth``: rows of the grid, i.e. the network's layers (the model stacks one such layer)."""
        super().__init__(input_size, hidden_size)
        if depth < 1:
            raise ValueError(f"grid_lstm: depth={depth}, must be at least 1")
        self.depth = depth
        self.rows = nn.ModuleList(GridLSTMRow(input_size if row == 0 else hidden_size, hidden_size)
                                  for row in range(depth))
        self.recurrent_weight_names = tuple(
            name for row in range(depth) for name in (f"rows.{row}.time.weight_hh_l0", f"rows.{row}.depth_weight_hh"))

    @staticmethod
    def parameter_count(input_size: int, hidden_size: int, *, depth: int) -> int:
        first_row = 8 * hidden_size * (input_size + hidden_size + 2)
        return first_row + (depth - 1) * 16 * hidden_size * (hidden_size + 1)

    def init_state(self, batch_size: int, device=None, dtype=None) -> tuple[torch.Tensor, torch.Tensor]:
        h = zero_state(self.rows[0].depth_weight_hh, batch_size, self.depth, self.hidden_size,
                       device=device, dtype=dtype)
        return h, torch.zeros_like(h)

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
        h, m = state
        depth_memory, h_last, m_last = None, [], []
        for index, row in enumerate(self.rows):
            x, depth_memory, h_row, m_row = row(x, depth_memory, h[:, index], m[:, index])
            h_last.append(h_row)
            m_last.append(m_row)
        return x, (torch.stack(h_last, dim=1), torch.stack(m_last, dim=1))
