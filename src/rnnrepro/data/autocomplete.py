"""The autocomplete dataset of the Nested-LSTM comparison (Madsen, "Visualizing memorization in RNNs",
Distill 2019): every character of a text is labelled with the whole word it belongs to.

Construction, as the authors' ``python/download/preprocess/autocomplete.py`` builds it from text8:

1. The whole source text (train + valid + test of the processed source dataset, which together are the
   raw text), reduced to text8's alphabet: every run of characters outside a-z becomes one space (a
   no-op on text8 itself; it turns the synthetic stand-in's punctuation and line breaks into spaces).
2. Output vocabulary: the ``vocabulary_words`` most frequent words of the *whole* text (the authors
   count before splitting), plus class 0 ``<pad>`` (the authors' ``<eos>``, the padding target) and
   class 1 ``<unk>`` for every other word. text8 has 253,854 distinct words, so 2^14 + 2 = 16,386
   classes: the 601 x 16,386 = 9,847,986 parameters of the published dense layer. Among words with
   the same count as the last one kept, the alphabetically first are kept (the authors' unstable
   ``np.argsort`` leaves that tie order to NumPy; only words of that one count can differ).
3. Observations: the words in order, each written as a space followed by the word, packed greedily so
   that an observation never exceeds ``max_chars`` characters and never cuts a word. Every character,
   and the space before a word, is labelled with the word's class.
4. Split: the observations shuffled with ``numpy.random.RandomState(seed).permutation`` (the authors'
   seed), then the first floor(90 %) train, the next floor(5 %) valid, the rest test. The published
   run had 508,583 training sequences, which fixes text8's observation count at 565,093.

Input vocabulary: 0 ``<pad>`` (its embedding row is a constant zero), 1 space, 2..27 a-z.

Files written by :func:`build` into the output folder: ``train.txt``, ``valid.txt``, ``test.txt`` (one
observation per line, exactly the characters the model reads, leading space included), ``vocab.txt``
(the output classes, one JSON string per line: line number = class id) and ``stats.json``.
:func:`load_split` turns a split file into padded arrays for training. numpy only (no torch).
"""

from __future__ import annotations

import json
import math
import re
import string
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .preprocess import read_text, read_vocab, write_text
from .registry import SPLITS, DataError

PAD = "<pad>"
UNK = "<unk>"
PAD_ID, UNK_ID = 0, 1
#: input symbols: padding, space, a-z (the authors' char_map)
INPUT_SYMBOLS = (PAD, " ", *string.ascii_lowercase)


@dataclass(frozen=True)
class AutocompleteSpec:
    """How one autocomplete dataset is derived from a processed character-level source dataset."""

    source: str  # processed dataset whose train + valid + test is the whole text
    max_chars: int  # longest observation
    vocabulary_words: int  # most frequent words that get a class of their own
    train_percent: int
    valid_percent: int  # test gets the rest
    seed: int  # of the observation shuffle
    expected_train_observations: int | None  # published size; a different count is not that dataset

    @property
    def classes(self) -> int:
        """Output classes when the text has at least ``vocabulary_words`` distinct words."""
        return self.vocabulary_words + 2


AUTOCOMPLETE_DATASETS: dict[str, AutocompleteSpec] = {
    "text8_autocomplete": AutocompleteSpec(
        source="text8", max_chars=200, vocabulary_words=2**14, train_percent=90, valid_percent=5,
        seed=450849059, expected_train_observations=508_583),
    # The same construction on WikiText-2 cleaned into text8's format (text8 cannot be had here): the
    # published vocabulary size and split, so the models have the published shapes.
    "wt2_text8style_autocomplete": AutocompleteSpec(
        source="wt2_text8style", max_chars=200, vocabulary_words=2**14, train_percent=90, valid_percent=5,
        seed=450849059, expected_train_observations=None),
    # The same, with the 1,024 most frequent words as classes (1,026 with <pad> and <unk>; they cover
    # 71.7 % of the words, where 2^14 cover 97.9 %): the cpu budget's. The dense layer to 16,386 classes
    # is nearly all of a step's time at small widths (8 s a batch at width 60 on a 2-core CPU, against
    # 0.5 s with 1,026 classes, timed side by side), so only this vocabulary lets whole passes run there.
    "wt2_text8style_autocomplete_w1024": AutocompleteSpec(
        source="wt2_text8style", max_chars=200, vocabulary_words=2**10, train_percent=90, valid_percent=5,
        seed=450849059, expected_train_observations=None),
    # The smoke budget's stand-in: the synthetic character corpus (about 1,000 observations), with a
    # vocabulary smaller than its ~250 words so that <unk> occurs.
    "synth_autocomplete": AutocompleteSpec(
        source="synth_char", max_chars=200, vocabulary_words=128, train_percent=90, valid_percent=5,
        seed=450849059, expected_train_observations=None),
}


def get_spec(dataset_id: str) -> AutocompleteSpec:
    try:
        return AUTOCOMPLETE_DATASETS[dataset_id]
    except KeyError:
        raise DataError(f"unknown autocomplete dataset {dataset_id!r}; known: "
                        f"{', '.join(AUTOCOMPLETE_DATASETS)}") from None


def text8_alphabet(text: str) -> str:
    return re.sub(r"[^a-z]+", " ", text).strip()


def word_classes(words: list[str], vocabulary_words: int) -> tuple[list[str], dict]:
    """The output classes (<pad>, <unk>, then the most frequent words) and how the cut fell."""
    counts = Counter(words)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    kept = ranked[:vocabulary_words]
    boundary = kept[-1][1] if kept else 0
    cut = {
        "distinct_words": len(counts),
        "boundary_count": boundary,
        "words_with_boundary_count": sum(1 for _, c in ranked if c == boundary),
        "of_them_kept": sum(1 for _, c in kept if c == boundary),
    }
    return [PAD, UNK, *(word for word, _ in kept)], cut


def pack_observations(words: list[str], max_chars: int) -> list[str]:
    """Greedy packing of " word" pieces into observations of at most ``max_chars`` characters."""
    observations, current, length = [], [], 0
    for word in words:
        piece = len(word) + 1
        if piece > max_chars:
            raise DataError(f"the word {word[:40]!r}... has {len(word)} characters: an observation of at most "
                            f"{max_chars} characters cannot hold it with its leading space; raise max_chars")
        if length + piece > max_chars:
            observations.append("".join(current))
            current, length = [], 0
        current.append(" " + word)
        length += piece
    if current:
        observations.append("".join(current))
    return observations


def split_observations(observations: list[str], spec: AutocompleteSpec) -> dict[str, list[str]]:
    order = np.random.RandomState(spec.seed).permutation(len(observations))
    n_train = math.floor(len(observations) * spec.train_percent / 100)
    n_valid = math.floor(len(observations) * spec.valid_percent / 100)
    bounds = {"train": (0, n_train), "valid": (n_train, n_train + n_valid), "test": (n_train + n_valid, None)}
    return {split: [observations[i] for i in order[start:end]] for split, (start, end) in bounds.items()}


def build(dataset_id: str, source_dir: Path | str, out_dir: Path | str) -> dict:
    """Write the autocomplete dataset ``dataset_id`` from its processed source; returns the stats."""
    spec = get_spec(dataset_id)
    source_dir, out_dir = Path(source_dir), Path(out_dir)
    parts = [source_dir / f"{split}.txt" for split in SPLITS]
    for part in parts:
        if not part.is_file():
            raise DataError(f"{part} not found: prepare the source dataset {spec.source!r} first "
                            f"(python -m rnnrepro.data prepare {spec.source} ...)")
    text = text8_alphabet("".join(read_text(part) for part in parts))
    if not text:
        raise DataError(f"{source_dir} holds no words (a-z); prepare the source dataset {spec.source!r} again")
    words = text.split(" ")
    classes, cut = word_classes(words, spec.vocabulary_words)
    splits = split_observations(pack_observations(words, spec.max_chars), spec)
    observed = len(splits["train"])
    if spec.expected_train_observations is not None and observed != spec.expected_train_observations:
        raise DataError(
            f"{dataset_id}: {source_dir} gives {observed:,} training observations, but the published "
            f"dataset has {spec.expected_train_observations:,}; the source text is not the published "
            f"{spec.source}: fetch {spec.source} again (from another mirror) and rerun")
    known = set(classes[2:])
    stats = {
        "dataset": dataset_id,
        "source": spec.source,
        "max_chars": spec.max_chars,
        "vocabulary_words": spec.vocabulary_words,
        "classes": len(classes),
        "input_symbols": len(INPUT_SYMBOLS),
        "vocabulary_cut": cut,
        "observations": {split: len(lines) for split, lines in splits.items()},
        "characters": {split: sum(map(len, lines)) for split, lines in splits.items()},
        "unknown_characters": {split: _unknown_characters(lines, known) for split, lines in splits.items()},
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    for split, lines in splits.items():
        write_text(out_dir / f"{split}.txt", "".join(line + "\n" for line in lines))
    write_text(out_dir / "vocab.txt", "".join(json.dumps(word) + "\n" for word in classes))
    write_text(out_dir / "stats.json", json.dumps(stats, indent=2) + "\n")
    return stats


def _unknown_characters(lines: list[str], known: set[str]) -> int:
    return sum(len(word) + 1 for line in lines for word in line.split() if word not in known)


@dataclass
class EncodedSplit:
    """One split as padded arrays; row i is observation i (line i of the split file)."""

    inputs: np.ndarray  # (observations, longest) uint8 input symbol ids, PAD_ID after the end
    targets: np.ndarray  # (observations, longest) class ids, PAD_ID after the end
    lengths: np.ndarray  # (observations,) characters per observation
    lines: list[str]


def _input_table() -> np.ndarray:
    """Byte -> input symbol id, for the bytes of space and a-z."""
    table = np.zeros(256, dtype=np.uint8)
    for symbol_id, symbol in enumerate(INPUT_SYMBOLS[1:], start=1):
        table[ord(symbol)] = symbol_id
    return table


def load_split(path: Path | str, classes: list[str]) -> EncodedSplit:
    """Encode a split file written by :func:`build` against its vocab.txt ``classes``."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"autocomplete split {path} not found; build it with `python -m rnnrepro.data autocomplete`")
    lines = read_text(path).split("\n")[:-1]
    joined = "".join(lines)
    unexpected = sorted(set(joined) - set(INPUT_SYMBOLS[1:]))
    if unexpected:
        raise DataError(f"{path}: characters {''.join(unexpected)[:20]!r} are not input symbols (space, a-z); "
                        "the file was not written by the autocomplete builder: rebuild it")
    symbols = _input_table()[np.frombuffer(joined.encode("ascii"), dtype=np.uint8)]
    index = {word: class_id for class_id, word in enumerate(classes)}
    words = joined.split(" ")[1:]  # every word follows its space
    word_ids = np.array([index.get(word, UNK_ID) for word in words], dtype=np.int64)
    per_char = np.repeat(word_ids, [len(word) + 1 for word in words])
    lengths = np.array([len(line) for line in lines], dtype=np.int64)
    filled = np.arange(lengths.max(initial=0)) < lengths[:, None]
    inputs = np.zeros(filled.shape, dtype=np.uint8)
    targets = np.zeros(filled.shape, dtype=np.int16 if len(classes) <= np.iinfo(np.int16).max else np.int32)
    inputs[filled] = symbols
    targets[filled] = per_char
    return EncodedSplit(inputs, targets, lengths, lines)


def load_classes(folder: Path | str) -> list[str]:
    path = Path(folder) / "vocab.txt"
    if not path.is_file():
        raise DataError(f"{path} not found: build the autocomplete dataset with `python -m rnnrepro.data autocomplete`")
    classes = read_vocab(path)
    if classes[:2] != [PAD, UNK]:
        raise DataError(f"{path} does not start with {PAD} and {UNK}: it is not an autocomplete vocabulary; rebuild it")
    return classes
