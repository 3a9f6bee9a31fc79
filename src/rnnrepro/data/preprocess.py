"""Turn a raw download into the processed splits every training run reads.

``prepare`` writes into the output folder:

- ``train.txt``, ``valid.txt``, ``test.txt``, UTF-8.
  Word level: one line per original line, its tokens joined by single spaces (a blank line stays
  blank); the loader appends ``<eos>`` to every line, as AWD-LSTM's data.py. Valid/test tokens
  missing from the training vocabulary are already replaced by ``<unk>``.
  Character level: the raw characters (after the registry's normalisation); every character,
  newline included, is one token.
- ``vocab.txt``: one JSON string per line (so a space or a newline is one unambiguous entry); the
  line number is the token id. Word level: the training tokens in first-occurrence order, ``<eos>``
  after the first line's tokens (the order of AWD-LSTM's Dictionary). Character level: the
  training characters in first-occurrence order, then any characters first seen in valid, then in
  test (AWD-LSTM builds its dictionary over all three splits; stats.json lists those extra ones).
- ``stats.json``: tokens per split (``<eos>`` included), lines per split (word level), vocabulary
  size, tokenizer, the raw file's name and sha256, and what normalisation or <unk> mapping did.

The raw file is first compared with the digest fetch recorded for it (``download.check_raw``): one
that changed on disk after its check is refused, naming the file and the fix. :func:`read_splits`,
:func:`char_level` and :func:`write_processed` are the steps, for corpora derived from a raw file
(:mod:`.text8style`).

``fraction`` writes the first p % of a training split (a prefix, so smaller fractions are prefixes
of larger ones).
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from bisect import bisect_left
from itertools import accumulate
from pathlib import Path

from .archive import extract_members
from ..train.files import advice
from .download import DiskFullError, check_raw, file_digest
from .registry import EOS, SPLITS, UNK, DataError, Dataset, SplitByPercent, get_dataset


def split_lines(text: str) -> list[str]:
    """Lines as Python's text mode yields them: \\n, \\r\\n and \\r end a line; no empty last line."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def read_text(path: Path) -> str:
    """A processed file's text, exactly (no newline translation)."""
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def write_text(path: Path, text: str) -> None:
    """Write a processed file whole or not at all (a temporary sibling, renamed over it once written):
    a full disk stops with the data layer's disk-full error naming the file, as fetch's does, and leaves
    no half-written file for a later step to read."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass  # the folder itself is unusable; the error below names it
        raise write_error(path, exc) from None


def write_error(path: Path, exc: OSError) -> DataError:
    """The data layer's error for a file it could not write: a full disk in fetch's words, else the
    operating system's reason and what to do."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        folder = path if path.is_dir() else path.parent
        return DiskFullError(f"no space left writing {path} ({exc.strerror}): free space on the disk holding "
                             f"{folder} and rerun; no file was left half-written")
    return DataError(f"cannot write {path}: {exc.strerror or exc}. {advice(path, exc)}")


def read_vocab(path: Path) -> list[str]:
    return [json.loads(line) for line in read_text(path).split("\n") if line]


def _write_vocab(path: Path, vocab: list[str]) -> None:
    write_text(path, "".join(json.dumps(token, ensure_ascii=False) + "\n" for token in vocab))


def _decode(data: bytes, dataset: Dataset, origin: str) -> str:
    try:
        return data.decode(dataset.encoding)
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{origin} is not {dataset.encoding} text ({exc}); it is not the file the registry describes "
            f"for dataset {dataset.id!r}: fetch it again"
        ) from None


def _normalise(text: str, dataset: Dataset) -> tuple[str, dict]:
    done: dict = {}
    for step in dataset.normalise:
        if step == "strip_bom":
            done["bom_removed"] = text.startswith("\ufeff")
            text = text.removeprefix("\ufeff")
        elif step == "newlines_to_lf":
            done["crlf_to_lf"] = text.count("\r\n")
            text = text.replace("\r\n", "\n")
            done["cr_to_lf"] = text.count("\r")
            text = text.replace("\r", "\n")
    return text, done


def _raw_split_texts(dataset: Dataset, raw_file: Path, scratch: Path) -> tuple[dict[str, str], dict]:
    """Decoded, normalised text of each split, and a record of the normalisation."""
    rule = dataset.splits
    if isinstance(rule, SplitByPercent):
        if rule.member is None:
            origins = {"all": raw_file}
        else:
            members = (rule.member,) if isinstance(rule.member, str) else rule.member
            files = extract_members(raw_file, dataset.container, members, scratch)
            origins = {member: files[member] for member in members}
    else:
        members = dict(zip(SPLITS, (rule.train, rule.valid, rule.test)))
        files = extract_members(raw_file, dataset.container, members.values(), scratch)
        origins = {split: files[member] for split, member in members.items()}
    decoded = {part: _decode(path.read_bytes(), dataset, f"{raw_file}:{path.name}") for part, path in origins.items()}
    if isinstance(rule, SplitByPercent):
        decoded = {"all": "".join(decoded.values())}  # several members: one text, joined in order
    texts, normalisation = {}, {}
    for part, text in decoded.items():
        texts[part], normalisation[part] = _normalise(text, dataset)
    if isinstance(rule, SplitByPercent):
        text = texts.pop("all")
        n_train, n_valid = len(text) * rule.train // 100, len(text) * rule.valid // 100
        texts = dict(zip(SPLITS, (text[:n_train], text[n_train:n_train + n_valid], text[n_train + n_valid:])))
        normalisation = normalisation["all"]
    return texts, normalisation


def _word_level(dataset: Dataset, texts: dict[str, str]) -> tuple[dict[str, str], list[str], dict]:
    tokenised = {split: [line.split() for line in split_lines(texts[split])] for split in SPLITS}
    vocab = list(dict.fromkeys(token for words in tokenised["train"] for token in (*words, EOS)))
    known = set(vocab)
    replaced = {}
    for split in ("valid", "test"):
        count = 0
        for number, words in enumerate(tokenised[split], start=1):
            for i, token in enumerate(words):
                if token in known:
                    continue
                if UNK not in known:
                    raise DataError(
                        f"dataset {dataset.id!r}: token {token!r} on {split} line {number} is not in the "
                        f"training vocabulary, which has no {UNK} to map it to; the splits do not belong "
                        "together: check the raw file"
                    )
                words[i] = UNK
                count += 1
        replaced[split] = count
    files = {split: "".join(" ".join(words) + "\n" for words in lines) for split, lines in tokenised.items()}
    stats = {
        "tokens": {split: sum(len(words) + 1 for words in lines) for split, lines in tokenised.items()},
        "lines": {split: len(lines) for split, lines in tokenised.items()},
        "unk_replaced": replaced,
    }
    return files, vocab, stats


def _first_seen(text: str, exclude: set[str]) -> list[str]:
    return sorted(set(text) - exclude, key=text.index)


def char_level(texts: dict[str, str]) -> tuple[dict[str, str], list[str], dict]:
    vocab: list[str] = []
    for split in SPLITS:
        vocab += _first_seen(texts[split], set(vocab))
    train_chars = set(texts["train"])
    stats = {
        "tokens": {split: len(texts[split]) for split in SPLITS},
        "chars_not_in_train": [c for c in vocab if c not in train_chars],
    }
    return dict(texts), vocab, stats


def _check_expected(dataset: Dataset, stats: dict, raw_file: Path) -> None:
    expected = dataset.expected
    if expected is None:
        return
    got = (tuple(stats["tokens"][s] for s in SPLITS), stats["vocab_size"])
    if got != (expected.tokens, expected.vocab_size):
        raise DataError(
            f"dataset {dataset.id!r}: {raw_file} gives tokens (train, valid, test) {got[0]} and vocabulary "
            f"{got[1]}, but the papers' corpus has {expected.tokens} and {expected.vocab_size}; this raw "
            "file is not that corpus: fetch it from another mirror"
        )


def read_splits(dataset: Dataset, raw_file: Path, work_dir: Path) -> tuple[dict[str, str], dict]:
    """The decoded, normalised text of each split of ``dataset``'s raw file, and what normalisation did.

    Before anything is read, the raw file is compared with fetch's record (a file that changed on disk
    since its check is refused); archive members are extracted into a scratch folder in ``work_dir``.
    """
    if not raw_file.is_file():
        raise DataError(
            f"raw file {raw_file} for dataset {dataset.id!r} not found; fetch it first: "
            f"python -m rnnrepro.data fetch {dataset.id} --dest {raw_file.parent}"
        )
    check_raw(dataset.id, raw_file)
    work_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work_dir, prefix=".extract-") as scratch:
        return _raw_split_texts(dataset, raw_file, Path(scratch))


def write_processed(out_dir: Path, files: dict[str, str], vocab: list[str], stats: dict) -> None:
    """The files every training run reads: the three splits, vocab.txt and stats.json."""
    for split in SPLITS:
        write_text(out_dir / f"{split}.txt", files[split])
    _write_vocab(out_dir / "vocab.txt", vocab)
    write_text(out_dir / "stats.json", json.dumps(stats, indent=2, ensure_ascii=False) + "\n")


def prepare(dataset_id: str, raw_file: Path | str, out_dir: Path | str) -> dict:
    """Write the processed splits, vocab.txt and stats.json of a dataset; returns the stats."""
    dataset = get_dataset(dataset_id)
    raw_file, out_dir = Path(raw_file), Path(out_dir)
    texts, normalisation = read_splits(dataset, raw_file, out_dir)
    if dataset.tokenizer == "word":
        files, vocab, counts = _word_level(dataset, texts)
    else:
        files, vocab, counts = char_level(texts)
    stats = {
        "dataset": dataset.id,
        "tokenizer": dataset.tokenizer,
        "raw_file": raw_file.name,
        "raw_sha256": file_digest(raw_file),
        "vocab_size": len(vocab),
        **counts,
    }
    if dataset.normalise:
        stats["normalisation"] = normalisation
    _check_expected(dataset, stats, raw_file)
    write_processed(out_dir, files, vocab, stats)
    return stats


def fraction(train_file: Path | str, percent: int, out_file: Path | str, *, tokenizer: str) -> dict:
    """Write the first ``percent`` % of a processed training split to ``out_file``.

    Word level: the fewest whole lines holding at least that share of the tokens (<eos> included).
    Character level: the first ceil(percent % of the characters).
    """
    train_file, out_file = Path(train_file), Path(out_file)
    if not isinstance(percent, int) or not 1 <= percent <= 100:
        raise DataError(f"fraction percent must be a whole number from 1 to 100, not {percent!r}")
    if tokenizer not in ("word", "char"):
        raise DataError(f"tokenizer must be 'word' or 'char', not {tokenizer!r}")
    if not train_file.is_file():
        raise DataError(f"training split {train_file} not found; run `python -m rnnrepro.data prepare` first")
    text = read_text(train_file)
    if tokenizer == "word":
        lines = split_lines(text)
        cumulative = list(accumulate(len(line.split()) + 1 for line in lines))
        total = cumulative[-1] if cumulative else 0
        kept_lines = bisect_left(cumulative, -(-total * percent // 100)) + 1 if total else 0
        kept_text = "".join(line + "\n" for line in lines[:kept_lines])
        kept = cumulative[kept_lines - 1] if kept_lines else 0
    else:
        total = len(text)
        kept = -(-total * percent // 100)
        kept_text = text[:kept]
    out_file.parent.mkdir(parents=True, exist_ok=True)
    write_text(out_file, kept_text)
    return {"percent": percent, "tokens": kept, "of_tokens": total}
