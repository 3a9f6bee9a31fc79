"""The data layer: checked downloads, safe extraction, splits, fractions, synthetic corpora, loading.

Everything runs offline on small files built in tmp_path; mirrors are local folders or file:// URLs.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import http.server
import io
import json
import math
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections import Counter
from pathlib import Path

import pytest
import torch

from rnnrepro.data import registry
from rnnrepro.data.__main__ import main as cli
from rnnrepro.data.archive import UnsafeArchiveError, extract_members
from rnnrepro.data.corpus import batchify, get_batch, load_corpus
from rnnrepro.data.download import (
    MIRROR_ENV,
    ChecksumError,
    DownloadError,
    UnverifiedDatasetError,
    fetch,
    sources,
)
from rnnrepro.data.preprocess import fraction, prepare, read_text, read_vocab, split_lines
from rnnrepro.data.registry import DataError, Digest, SplitByPercent, SplitMembers
from rnnrepro.data.synthetic import synthetic_bytes


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(autouse=True)
def no_mirror_env(monkeypatch):
    monkeypatch.delenv(MIRROR_ENV, raising=False)


@pytest.fixture
def register(monkeypatch):
    """Add a throw-away dataset to the registry for one test."""

    def add(**fields) -> registry.Dataset:
        base = dict(id="toy", description="toy", citation="-", urls=(), file_name="toy.txt",
                    sha256=None, archive="plain", splits=SplitByPercent(None, 80, 10, 10), tokenizer="char")
        dataset = registry.Dataset(**{**base, **fields})
        monkeypatch.setitem(registry.DATASETS, dataset.id, dataset)
        return dataset

    return add


def make_tgz(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def word_dataset(register, tmp_path, train: str, valid: str, test: str, **fields):
    """A word-level toy dataset in a .tgz, as PTB ships (members behind a './' prefix)."""
    members = SplitMembers("d/train.txt", "d/valid.txt", "d/test.txt")
    dataset = register(file_name="toy.tgz", archive="tgz", splits=members, tokenizer="word", **fields)
    raw = make_tgz(tmp_path / "toy.tgz", {"./d/train.txt": train, "./d/valid.txt": valid, "./d/test.txt": test})
    return dataset, raw


# --- download: checksums and mirrors -------------------------------------------------------------

def test_checksum_mismatch_deletes_file_and_names_digests(register, tmp_path):
    good, bad = b"the real corpus\n", b"a tampered copy\n"
    register(sha256=(Digest(sha256(good), "test digest"),))
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "toy.txt").write_bytes(bad)
    dest = tmp_path / "raw"
    with pytest.raises(ChecksumError) as error:
        fetch("toy", dest, mirror=str(mirror))
    message = str(error.value)
    assert sha256(good) in message and sha256(bad) in message
    assert "'toy'" in message and "toy/toy.txt" in message and "mirror" in message
    assert list(dest.iterdir()) == []  # neither the target nor a temporary file is left


def test_mirror_candidates_in_order(register, tmp_path):
    dataset = register()
    mirror = tmp_path / "m"
    mirror.mkdir()
    urls = [s.url for s in sources(dataset, str(mirror))]
    base = mirror.resolve().as_uri()
    assert urls == [f"{base}/toy/toy.txt", f"{base}/toy/toy.txt.gz", f"{base}/toy.txt", f"{base}/toy.txt.gz"]
    assert [s.url for s in sources(dataset, "https://example.org/data/")][0] == "https://example.org/data/toy/toy.txt"


def test_mirror_resolution(register, tmp_path, monkeypatch):
    in_folder, flat, gzipped = b"from the dataset folder\n", b"from the mirror root\n", b"from a gz copy\n"
    register(sha256=tuple(Digest(sha256(c), "test") for c in (in_folder, flat, gzipped)))
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "toy.txt").write_bytes(in_folder)
    (mirror / "toy.txt").write_bytes(flat)
    dest = tmp_path / "raw"

    assert fetch("toy", dest, mirror=str(mirror)).read_bytes() == in_folder  # dataset folder first
    (mirror / "toy" / "toy.txt").unlink()
    (dest / "toy.txt").unlink()
    assert fetch("toy", dest, mirror=str(mirror)).read_bytes() == flat  # then the mirror root
    (mirror / "toy.txt").unlink()
    (mirror / "toy.txt.gz").write_bytes(gzip.compress(gzipped))
    (dest / "toy.txt").unlink()
    assert fetch("toy", dest, mirror=mirror.as_uri()).read_bytes() == gzipped  # .gz copy, via file://

    (dest / "toy.txt").unlink()
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    assert fetch("toy", dest).read_bytes() == gzipped  # the environment variable
    empty = tmp_path / "empty"
    empty.mkdir()
    (dest / "toy.txt").unlink()
    monkeypatch.setenv(MIRROR_ENV, str(empty))
    assert fetch("toy", dest, mirror=str(mirror)).read_bytes() == gzipped  # the argument wins


def test_http_mirror_with_browser_user_agent(register, tmp_path):
    content = b"served over http\n"
    register(sha256=(Digest(sha256(content), "test"),))
    (tmp_path / "site" / "toy").mkdir(parents=True)
    (tmp_path / "site" / "toy" / "toy.txt").write_bytes(content)
    agents = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(tmp_path / "site"), **kwargs)

        def do_GET(self):
            agents.append(self.headers["User-Agent"])
            super().do_GET()

        def log_message(self, *args):
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            path = fetch("toy", tmp_path / "raw", mirror=f"http://127.0.0.1:{server.server_port}/")
        finally:
            server.shutdown()
    assert path.read_bytes() == content
    assert agents and agents[0].startswith("Mozilla/5.0") and "urllib" not in agents[0]


def test_every_source_failing_lists_them(register, tmp_path):
    register(sha256=(Digest("0" * 64, "test"),))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DownloadError) as error:
        fetch("toy", tmp_path / "raw", mirror=str(empty))
    message = str(error.value)
    assert message.count("toy.txt") >= 4 and MIRROR_ENV in message


def test_member_sha256_checks_an_archive_without_a_published_digest(register, tmp_path):
    """PTB's archive has no published sha256: its members are checked instead."""
    members = {"d/train.txt": "a b\n", "d/valid.txt": "a\n", "d/test.txt": "b\n"}
    digests = tuple((m, sha256(text.encode())) for m, text in members.items())
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    make_tgz(mirror / "toy.tgz", members)
    register(file_name="toy.tgz", archive="tgz", splits=SplitMembers(*members), tokenizer="word",
             member_sha256=digests)
    assert fetch("toy", tmp_path / "raw", mirror=str(mirror)).exists()

    make_tgz(mirror / "toy.tgz", {**members, "d/test.txt": "tampered\n"})
    (tmp_path / "raw" / "toy.tgz").unlink()
    with pytest.raises(ChecksumError, match=r"member sha256 mismatch .* d/test.txt") as error:
        fetch("toy", tmp_path / "raw", mirror=str(mirror))
    assert sha256(b"tampered\n") in str(error.value)
    assert list((tmp_path / "raw").iterdir()) == []


def test_unverified_dataset_needs_explicit_trust(register, tmp_path):
    content = b"no published sha256\n"
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "toy.txt").write_bytes(content)
    register(sha256=None, size_bytes=len(content))
    with pytest.raises(UnverifiedDatasetError, match="--trust-unverified"):
        fetch("toy", tmp_path / "raw", mirror=str(mirror))
    assert fetch("toy", tmp_path / "raw", mirror=str(mirror), trust_unverified=True).read_bytes() == content

    register(sha256=None, size_bytes=len(content) + 1)  # the weaker published facts are still checked
    (tmp_path / "raw" / "toy.txt").unlink()
    with pytest.raises(ChecksumError, match="size mismatch"):
        fetch("toy", tmp_path / "raw", mirror=str(mirror), trust_unverified=True)


def test_registry_entries_are_consistent():
    for dataset in registry.DATASETS.values():
        assert dataset.tokenizer in ("word", "char")
        assert dataset.urls or dataset.archive == "synthetic"
        for digest in dataset.sha256 or ():
            assert len(digest.sha256) == 64 and int(digest.sha256, 16) >= 0 and digest.note
        splits = dataset.splits
        members = splits.member if isinstance(splits, SplitByPercent) else (splits.train, splits.valid, splits.test)
        for member, digest in dataset.member_sha256:
            assert len(digest) == 64 and int(digest, 16) >= 0
            assert member in members
        if dataset.synthetic and isinstance(dataset.splits, SplitByPercent):
            total = sum(dataset.synthetic.sizes)
            assert [100 * s // total for s in dataset.synthetic.sizes] == [
                dataset.splits.train, dataset.splits.valid, dataset.splits.test]
    # PTB: no published digest of the archive, so its members are verified instead
    assert registry.get_dataset("ptb").sha256 is None and registry.get_dataset("ptb").verified
    assert registry.get_dataset("wt2").sha256 and not registry.get_dataset("text8").verified
    with pytest.raises(DataError, match="unknown dataset 'nope'"):
        registry.get_dataset("nope")


# --- archives ------------------------------------------------------------------------------------

def crafted_tar(path: Path, evil: tarfile.TarInfo) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        ok = tarfile.TarInfo("data/ok.txt")
        ok.size = 2
        tar.addfile(ok, io.BytesIO(b"ok"))
        tar.addfile(evil, io.BytesIO(b"evil"[: evil.size]))
    return path


@pytest.mark.parametrize("name, kind, link", [
    ("../evil", tarfile.REGTYPE, ""),
    ("/tmp/rnnrepro-absolute-evil", tarfile.REGTYPE, ""),
    ("data/link", tarfile.SYMTYPE, "../../outside"),
    ("data/hard", tarfile.LNKTYPE, "../outside"),
])
def test_tar_escaping_member_is_refused(tmp_path, name, kind, link):
    evil = tarfile.TarInfo(name)
    evil.type, evil.linkname = kind, link
    evil.size = 4 if kind == tarfile.REGTYPE else 0
    archive = crafted_tar(tmp_path / "evil.tgz", evil)
    target = tmp_path / "a" / "b"
    with pytest.raises(UnsafeArchiveError) as error:
        extract_members(archive, "tgz", ["data/ok.txt"], target)
    assert repr(name) in str(error.value)
    assert not (tmp_path / "a" / "evil").exists() and not Path("/tmp/rnnrepro-absolute-evil").exists()
    assert not (target / "data" / "ok.txt").exists()  # nothing is written from a refused archive


def test_zip_escaping_member_is_refused(tmp_path):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("data/ok.txt", "ok")
        zf.writestr("../evil", "evil")
    with pytest.raises(UnsafeArchiveError, match=r"'\.\./evil'"):
        extract_members(archive, "zip", ["data/ok.txt"], tmp_path / "out")
    assert not (tmp_path / "evil").exists()


def test_only_requested_members_are_extracted(tmp_path):
    archive = make_tgz(tmp_path / "ok.tgz", {"./d/a.txt": "a", "./d/b.txt": "b"})
    files = extract_members(archive, "tgz", ["d/a.txt"], tmp_path / "out")
    assert files["d/a.txt"].read_text() == "a" and not (tmp_path / "out" / "d" / "b.txt").exists()
    with pytest.raises(DataError, match="no member 'd/c.txt'"):
        extract_members(archive, "tgz", ["d/c.txt"], tmp_path / "out")


# --- word level ----------------------------------------------------------------------------------

def test_word_splits_eos_and_vocabulary(register, tmp_path):
    train = " the cat sat \n\n the  dog\tsat\n"  # a blank line, ragged whitespace
    dataset, raw = word_dataset(register, tmp_path, train, "the cat\n", "dog sat the\n")
    stats = prepare(dataset.id, raw, tmp_path / "p")
    assert read_text(tmp_path / "p" / "train.txt") == "the cat sat\n\nthe dog sat\n"
    vocab = read_vocab(tmp_path / "p" / "vocab.txt")
    assert vocab == ["the", "cat", "sat", "<eos>", "dog"]  # train only, first occurrence
    assert stats["tokens"] == {"train": 4 + 1 + 4, "valid": 3, "test": 4}
    assert stats["lines"] == {"train": 3, "valid": 1, "test": 1} and stats["vocab_size"] == 5
    assert stats["raw_sha256"] == sha256(raw.read_bytes())
    corpus = load_corpus(tmp_path / "p")
    assert [vocab[i] for i in corpus.train] == "the cat sat <eos> <eos> the dog sat <eos>".split()
    assert corpus.train.dtype == torch.long and corpus.test.tolist() == [4, 2, 0, 3]


def test_out_of_vocabulary_maps_to_unk_or_fails(register, tmp_path):
    dataset, raw = word_dataset(register, tmp_path, "a <unk> b\n", "a zebra\n", "b\n")
    stats = prepare(dataset.id, raw, tmp_path / "p")
    assert read_text(tmp_path / "p" / "valid.txt") == "a <unk>\n" and stats["unk_replaced"] == {"valid": 1, "test": 0}

    dataset, raw = word_dataset(register, tmp_path, "a b\n", "a zebra\n", "b\n")
    with pytest.raises(DataError, match=r"'zebra' on valid line 1.*no <unk>"):
        prepare(dataset.id, raw, tmp_path / "q")


def test_counts_differing_from_the_papers_corpus_are_refused(tmp_path):
    # The real ptb entry: members behind './' as in simple-examples.tgz, but not the real text.
    raw = make_tgz(tmp_path / "simple-examples.tgz",
                   {f"./simple-examples/data/ptb.{s}.txt": " a b \n" for s in registry.SPLITS})
    with pytest.raises(DataError, match="not that corpus"):
        prepare("ptb", raw, tmp_path / "p")
    assert not (tmp_path / "p" / "train.txt").exists()


def test_fractions_nest(tmp_path):
    lines = [" ".join(["w"] * (i % 7)) for i in range(200)]  # varying lengths, blank lines too
    train = tmp_path / "train.txt"
    train.write_text("".join(line + "\n" for line in lines))
    total = sum(len(line.split()) + 1 for line in lines)
    previous = ""
    for percent in (20, 40, 60, 80, 100):
        out = tmp_path / f"train.fraction{percent}.txt"
        kept = fraction(train, percent, out, tokenizer="word")
        text = read_text(out)
        assert text.startswith(previous) and len(text) > len(previous)
        counts = [len(line.split()) + 1 for line in split_lines(text)]
        assert kept["tokens"] == sum(counts) >= total * percent / 100 > sum(counts[:-1])  # fewest lines
        previous = text
    assert previous == read_text(train)

    chars = tmp_path / "chars.txt"
    chars.write_text("ab c\nde" * 31, newline="")
    pieces = []
    for percent in (20, 40, 60, 80, 100):
        fraction(chars, percent, tmp_path / f"c{percent}.txt", tokenizer="char")
        pieces.append(read_text(tmp_path / f"c{percent}.txt"))
        assert len(pieces[-1]) == math.ceil(len(read_text(chars)) * percent / 100)
    assert all(b.startswith(a) for a, b in zip(pieces, pieces[1:])) and pieces[-1] == read_text(chars)
    with pytest.raises(DataError, match="1 to 100"):
        fraction(chars, 0, tmp_path / "c0.txt", tokenizer="char")


# --- character level -----------------------------------------------------------------------------

def test_char_level_bom_and_bare_cr_normalised(register, tmp_path):
    body = "Well, Prince,\rso Genoa\r\nand Lucca. \rAre now\r" * 10
    raw = tmp_path / "warpeace_input.txt"
    raw.write_bytes(("\ufeff" + body).encode("utf-8"))
    register(normalise=("strip_bom", "newlines_to_lf"), file_name=raw.name)
    stats = prepare("toy", raw, tmp_path / "p")
    expected = body.replace("\r\n", "\n").replace("\r", "\n")
    splits = [read_text(tmp_path / "p" / f"{s}.txt") for s in registry.SPLITS]
    assert "".join(splits) == expected and len(splits[0]) == len(expected) * 80 // 100
    assert stats["normalisation"] == {"bom_removed": True, "crlf_to_lf": 10, "cr_to_lf": 30}
    vocab = read_vocab(tmp_path / "p" / "vocab.txt")
    assert " " in vocab and "\n" in vocab and "\r" not in vocab and "\ufeff" not in vocab
    assert len(vocab) == len(set(expected)) == stats["vocab_size"]
    corpus = load_corpus(tmp_path / "p")
    assert "".join(corpus.vocab[i] for i in corpus.valid) == splits[1]
    assert corpus.train.numel() == stats["tokens"]["train"]


def test_batchify_and_get_batch():
    data = torch.arange(23)
    batches = batchify(data, 4)
    assert batches.shape == (5, 4) and batches[:, 1].tolist() == [5, 6, 7, 8, 9]
    x, y = get_batch(batches, 0, 3)
    assert x.shape == y.shape == (3, 4) and torch.equal(y, batches[1:4])
    x, y = get_batch(batches, 3, 35)  # cut short at the end
    assert x.shape == (1, 4) and torch.equal(y[0], batches[4])


# --- synthetic corpora ---------------------------------------------------------------------------

def test_synthetic_is_deterministic_per_seed():
    for dataset_id in ("synth_ptb", "synth_char"):
        dataset = registry.get_dataset(dataset_id)
        assert synthetic_bytes(dataset) == synthetic_bytes(dataset)
        reseeded = dataclasses.replace(dataset, synthetic=dataclasses.replace(dataset.synthetic, seed=99))
        assert synthetic_bytes(reseeded) != synthetic_bytes(dataset)


def _tokens(path: Path) -> list[str]:
    return [t for line in split_lines(read_text(path)) for t in (*line.split(), "<eos>")]


def _unigram_bigram_perplexity(train: list[str], valid: list[str], vocab_size: int) -> tuple[float, float]:
    unigrams, bigrams, contexts = Counter(train), Counter(zip(train, train[1:])), Counter(train[:-1])

    def p_unigram(w):
        return (unigrams[w] + 1) / (len(train) + vocab_size)

    def p_bigram(a, b):  # interpolated with the unigram so that unseen pairs keep mass
        seen = contexts[a]
        return (0.8 * bigrams[(a, b)] / seen + 0.2 * p_unigram(b)) if seen else p_unigram(b)

    unigram = math.exp(-sum(math.log(p_unigram(w)) for w in valid[1:]) / (len(valid) - 1))
    bigram = math.exp(-sum(math.log(p_bigram(a, b)) for a, b in zip(valid, valid[1:])) / (len(valid) - 1))
    return unigram, bigram


@pytest.mark.parametrize("dataset_id", ["synth_ptb", "synth_wt2"])
def test_synthetic_corpus_has_structure(tmp_path, dataset_id):
    raw = fetch(dataset_id, tmp_path / "raw")
    stats = prepare(dataset_id, raw, tmp_path / "p")
    spec = registry.get_dataset(dataset_id).synthetic
    assert all(stats["tokens"][s] >= size for s, size in zip(registry.SPLITS, spec.sizes))
    assert 0.9 * spec.vocab_size <= stats["vocab_size"] <= 1.05 * spec.vocab_size
    unigram, bigram = _unigram_bigram_perplexity(
        _tokens(tmp_path / "p" / "train.txt"), _tokens(tmp_path / "p" / "valid.txt"), stats["vocab_size"])
    assert bigram < 0.6 * unigram, (unigram, bigram)


# --- command line --------------------------------------------------------------------------------

def test_cli_pipeline_on_synthetic_char(tmp_path, capsys):
    raw_dir, out = tmp_path / "raw", tmp_path / "processed"
    assert cli(["fetch", "synth_char", "--dest", str(raw_dir)]) == 0
    assert cli(["prepare", "synth_char", "--raw", str(raw_dir / "synth_char.txt"), "--out", str(out)]) == 0
    assert cli(["fraction", "--train", str(out / "train.txt"), "--tokenizer", "char", "--percent", "40",
                "--out", str(out / "train.fraction40.txt")]) == 0
    corpus = load_corpus(out, train_file=out / "train.fraction40.txt")
    assert corpus.train.numel() == math.ceil(json.loads(read_text(out / "stats.json"))["tokens"]["train"] * 0.4)
    assert cli(["info"]) == 0
    assert "synth_char" in capsys.readouterr().out


def test_cli_missing_raw_file_is_one_line_and_exit_2(tmp_path):
    missing = tmp_path / "raw" / "simple-examples.tgz"
    result = subprocess.run(
        [sys.executable, "-m", "rnnrepro.data", "prepare", "ptb", "--raw", str(missing), "--out", str(tmp_path / "p")],
        capture_output=True, text=True,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert str(missing) in result.stderr and "fetch ptb" in result.stderr
