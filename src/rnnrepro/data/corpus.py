"""Load a processed dataset as token-id tensors, and cut them into BPTT batches (AWD-LSTM style)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .preprocess import read_text, read_vocab, split_lines
from .registry import EOS, SPLITS, DataError


@dataclass
class Corpus:
    vocab: list[str]  # token id -> token
    tokenizer: str  # "word" or "char"
    train: torch.Tensor  # 1-D int64 token ids
    valid: torch.Tensor
    test: torch.Tensor
    files: dict[str, Path] = field(default_factory=dict)  # split -> the file it was read from


def _unknown(path: Path, token: str, where: str) -> DataError:
    return DataError(
        f"{path}: token {token!r} ({where}) is not in the vocabulary of {path.parent / 'vocab.txt'}; "
        "the file was not made from this processed dataset: re-run prepare (and fraction) for it"
    )


def _encode_words(path: Path, index: dict[str, int]) -> torch.Tensor:
    lines = split_lines(read_text(path))
    try:
        ids = [index[token] for line in lines for token in (*line.split(), EOS)]
    except KeyError as exc:
        line_number = next(n for n, line in enumerate(lines, 1) if exc.args[0] in line.split())
        raise _unknown(path, exc.args[0], f"line {line_number}") from None
    return torch.tensor(ids, dtype=torch.long)


def _encode_chars(path: Path, vocab: list[str]) -> torch.Tensor:
    # A lookup table over code points keeps 90M-character splits (text8) to about a second.
    codes = np.frombuffer(read_text(path).encode("utf-32-le"), dtype=np.uint32)
    vocab_codes = np.array([ord(c) for c in vocab], dtype=np.int64)
    table = np.full(max(int(codes.max(initial=0)), int(vocab_codes.max(initial=0))) + 1, -1, dtype=np.int64)
    table[vocab_codes] = np.arange(len(vocab))
    ids = table[codes]
    if (missing := np.flatnonzero(ids < 0)).size:
        raise _unknown(path, chr(codes[missing[0]]), f"character {missing[0]}")
    return torch.from_numpy(ids)


def load_corpus(processed_dir: Path | str, train_file: Path | str | None = None) -> Corpus:
    """Read a folder written by ``prepare``; ``train_file`` replaces train.txt (e.g. a fraction file)."""
    folder = Path(processed_dir)
    stats_file = folder / "stats.json"
    if not stats_file.is_file():
        raise DataError(f"{folder} is not a processed dataset (no stats.json); run `python -m rnnrepro.data prepare`")
    tokenizer = json.loads(read_text(stats_file))["tokenizer"]
    vocab = read_vocab(folder / "vocab.txt")
    paths = {split: folder / f"{split}.txt" for split in SPLITS}
    if train_file is not None:
        paths["train"] = Path(train_file)
    for path in paths.values():
        if not path.is_file():
            raise DataError(f"split file {path} not found; run `python -m rnnrepro.data prepare` (or fraction)")
    if tokenizer == "word":
        index = {token: i for i, token in enumerate(vocab)}
        tensors = {split: _encode_words(path, index) for split, path in paths.items()}
    else:
        tensors = {split: _encode_chars(path, vocab) for split, path in paths.items()}
    return Corpus(vocab=vocab, tokenizer=tokenizer, **tensors, files=paths)


def check_batch_sizes(corpus: Corpus, sizes: dict[str, tuple[str, int]]) -> None:
    """Stop before training where a split is too short for its batch size (``sizes``: split -> (the
    recipe's key, its value)), naming the split, its file and the key: batchify needs two rows."""
    for split, (key, batch_size) in sizes.items():
        tokens = getattr(corpus, split).numel()
        if tokens // batch_size < 2:
            path = corpus.files.get(split, split)
            what = "is empty" if tokens == 0 else f"has {tokens} tokens"
            raise DataError(f"the {split} split {path} {what}: too few for the recipe's {key} {batch_size} (at "
                            f"least {2 * batch_size} tokens). Prepare that file again (delete it and rerun: a "
                            f"fraction of a short split may be empty), or lower {key} in the study file's budget")


def batchify(data: torch.Tensor, batch_size: int) -> torch.Tensor:
    """(rows, batch_size): trimmed to a multiple of batch_size; column j is the j-th contiguous chunk."""
    rows = data.size(0) // batch_size
    if rows < 2:
        raise DataError(f"{data.size(0)} tokens are too few for batch size {batch_size}")
    return data[: rows * batch_size].view(batch_size, rows).t().contiguous()


def get_batch(source: torch.Tensor, i: int, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs rows[i : i+L] and targets rows[i+1 : i+1+L], L cut short at the end of ``source``."""
    seq_len = min(seq_len, source.size(0) - 1 - i)
    return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len]
