"""Closed-form parameter counts of the recurrent layers and of the tied language model (pure integers).

The tests compare every formula with ``sum(p.numel())`` of the instantiated modules and with the
PRU paper's arithmetic (Mehta et al., EMNLP 2018, Tables 1 and 3), so model sizes can be printed and
checked without building a model. The pyramid geometry (level sizes, pooling kernels) lives here too
because it is integer arithmetic the PRU layer and the formulas must share.

Sizes: N = input size, M = hidden size, K = pyramid levels, g = groups. Every transformation maps its
input to the four gate pre-activations (4 x M outputs) and has one bias per output.
"""

from __future__ import annotations

#: kernel of the learned stride-2 convolution that replaces pooling for ``subsample="conv"``
CONV_SUBSAMPLE_KERNEL = 3


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def pyramid_level_sizes(input_size: int, hidden_size: int, levels: int) -> tuple[list[int], list[int]]:
    """Input size n_i and per-gate output size d_i of each pyramid level i = 0..K-1, as the authors' code.

    n_i = ceil(N / 2^i) (each level halves the previous one). The code's output split is
    d_i = ceil(M / 2^(i+1)) with level 0 taking the remainder, i.e. d_0 = M/2 + M/2^K and
    d_i = M/2^(i+1) for i >= 1 (not the paper's equal split M/K); sum_i d_i = M.
    """
    if levels < 1:
        raise ValueError(f"levels={levels}: the pyramidal transformation needs at least one level")
    inputs = [ceil_div(input_size, 2**i) for i in range(levels)]
    units = [ceil_div(hidden_size, 2 ** (i + 1)) for i in range(levels)]
    units[0] += hidden_size - sum(units)
    if min(units) < 1:
        raise ValueError(f"hidden_size={hidden_size} is too small for levels={levels}: a pyramid level would "
                         f"get no units (per-gate split {units}); use fewer levels or a larger hidden size")
    return inputs, units


#: pooling-kernel schedules of the pyramid: the authors' code's (2K-1, ..., 5, 3) and the paper's text's (3)
POOLING_KERNELS = ("code", "paper")


def pooling_kernel_sizes(levels: int, schedule: str = "code") -> list[int]:
    """Pooling kernel that produces level i = 1..K-1 from level i-1, stride 2, padding (kernel-1)/2.

    "code": 2K-1, ..., 5, 3 (sacmehta/PRU PRUTransforms.py; the same as the paper's for K <= 2);
    "paper": 3 at every level ("kernel size 3, stride 2", the paper's ablation text). Both give
    level lengths ceil(n/2).
    """
    if schedule == "code":
        return [2 * (levels - i) + 1 for i in range(1, levels)]
    if schedule == "paper":
        return [3] * (levels - 1)
    raise ValueError(f"unknown pooling_kernels={schedule!r}; use one of {', '.join(map(repr, POOLING_KERNELS))}")


def group_sizes(size: int, groups: int) -> list[int]:
    """Sizes of `groups` contiguous, near-equal parts of `size` features (the first size % groups parts
    one larger, as torch.tensor_split cuts)."""
    return [size // groups + (j < size % groups) for j in range(groups)]


def lstm_params(input_size: int, hidden_size: int) -> int:
    """nn.LSTM, one layer: W_ih (4M x N), W_hh (4M x M) and two biases b_ih, b_hh (4M each)."""
    return 4 * hidden_size * (input_size + hidden_size) + 8 * hidden_size


def linear_params(input_size: int, hidden_size: int) -> int:
    """"lt": one dense map N -> 4M with one bias."""
    return 4 * input_size * hidden_size + 4 * hidden_size


def grouped_linear_params(input_size: int, hidden_size: int, groups: int) -> int:
    """"glt": g blocks (N/g -> 4M/g) with one bias per output: 4NM/g + 4M."""
    return 4 * input_size * hidden_size // groups + 4 * hidden_size


def pyramidal_params(input_size: int, hidden_size: int, levels: int, subsample: str = "avg",
                     pyramid_groups: int = 1) -> int:
    """"pt": sum_i (n_i + 1) * 4 d_i, plus the learned kernels when sub-sampling by convolution.

    With ``pyramid_groups`` = G > 1 each level is a grouped map: its input and, per gate, its units are
    cut into G near-equal contiguous groups (``group_sizes``), group j mapping n_ij inputs to d_ij units
    of every gate: sum_i (sum_j n_ij * 4 d_ij + 4 d_i), about the weights / G.
    """
    inputs, units = pyramid_level_sizes(input_size, hidden_size, levels)
    total = 0
    for n, d in zip(inputs, units):
        pairs = zip(group_sizes(n, pyramid_groups), group_sizes(d, pyramid_groups))
        total += sum(4 * d_j * n_j for n_j, d_j in pairs) + 4 * d
    if subsample == "conv":
        total += CONV_SUBSAMPLE_KERNEL * (levels - 1)
    return total


def transform_params(kind: str, input_size: int, hidden_size: int, levels: int, groups: int,
                     subsample: str = "avg", pyramid_groups: int = 1) -> int:
    """Parameters of one gate transformation ("lt", "glt" or "pt") from input_size to 4 x hidden_size."""
    if kind == "lt":
        return linear_params(input_size, hidden_size)
    if kind == "glt":
        return grouped_linear_params(input_size, hidden_size, groups)
    if kind == "pt":
        return pyramidal_params(input_size, hidden_size, levels, subsample, pyramid_groups)
    raise ValueError(f"unknown transformation {kind!r}; use 'lt', 'glt' or 'pt'")


def pru_params(input_size: int, hidden_size: int, levels: int, groups: int, input_transform: str = "pt",
               context_transform: str = "glt", subsample: str = "avg", pyramid_groups: int = 1) -> int:
    """One PRU layer: the transformation of x_t (N -> 4M) plus that of h_{t-1} (M -> 4M).

    With the defaults: PT(N, M, K) + GLT(M, g) = sum_i (n_i + 1) 4 d_i + 4M^2/g + 4M.
    """
    return (transform_params(input_transform, input_size, hidden_size, levels, groups, subsample, pyramid_groups)
            + transform_params(context_transform, hidden_size, hidden_size, levels, groups, subsample,
                               pyramid_groups))


def tied_lm_layer_sizes(embedding_size: int, hidden_size: int, layers: int) -> list[tuple[int, int]]:
    """(input, hidden) size of each layer of a tied LM: (E -> H), (H -> H) x (L-2), (H -> E)."""
    sizes = [embedding_size] + [hidden_size] * (layers - 1) + [embedding_size]
    return list(zip(sizes[:-1], sizes[1:]))


def tied_lm_params(vocab_size: int, embedding_size: int, recurrent_params: int) -> int:
    """Embedding V x E (shared with the decoder weight) + decoder bias V + the recurrent layers."""
    return vocab_size * embedding_size + vocab_size + recurrent_params
