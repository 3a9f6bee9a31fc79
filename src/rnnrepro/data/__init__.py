"""The data layer: dataset registry, checked downloads, splits and fractions, tensors for training.

    fetch("ptb", "data/raw/ptb")                      raw file, checked against the registry
    prepare("ptb", "data/raw/ptb/simple-examples.tgz", "data/processed/ptb")
    fraction("data/processed/ptb/train.txt", 20, "data/processed/ptb/train.fraction20.txt", tokenizer="word")
    load_corpus("data/processed/ptb")                 token ids as tensors (imports torch)

The same steps run from the command line: ``python -m rnnrepro.data --help``.
"""

from __future__ import annotations

from .download import ChecksumError, DiskFullError, DownloadError, UnverifiedDatasetError, fetch
from .preprocess import fraction, prepare
from .registry import DATASETS, DataError, Dataset, get_dataset

_TORCH_NAMES = ("Corpus", "batchify", "get_batch", "load_corpus")


def __getattr__(name: str):
    # corpus.py needs torch; importing it lazily keeps the fetch/prepare CLI quick to start.
    if name in _TORCH_NAMES:
        from . import corpus

        return getattr(corpus, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DATASETS", "ChecksumError", "DataError", "Dataset", "DiskFullError", "DownloadError", "UnverifiedDatasetError",
    "fetch", "fraction", "get_dataset", "prepare", *_TORCH_NAMES,
]
