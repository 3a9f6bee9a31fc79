"""The data layer: checked downloads, safe extraction, splits, fractions, synthetic corpora, loading.

Everything runs offline on small files built in tmp_path; mirrors are local folders or file:// URLs.
"""

from __future__ import annotations

import builtins
import dataclasses
import errno
import gzip
import hashlib
import http.server
import io
import json
import re
import math
import os
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
from rnnrepro.data.archive import UnsafeArchiveError, extract_members, pack
from rnnrepro.data.corpus import batchify, get_batch, load_corpus
from rnnrepro.data.download import (
    MIRROR_ENV,
    ChecksumError,
    DiskFullError,
    DownloadError,
    UnverifiedDatasetError,
    check_raw,
    fetch,
    record_path,
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


def test_http_mirror_through_pooch_without_a_browser_user_agent(register, tmp_path):
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
    assert agents and "Mozilla" not in agents[0]  # the HTTP client says what it is


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


# --- mirrors holding an archive's member files -----------------------------------------------------

TOY_MEMBERS = {"d/train.txt": "a b c\nb a\n", "d/valid.txt": "a b\n", "d/test.txt": "c a\n"}


@pytest.fixture(params=["tgz", "zip"])
def member_dataset(request, register):
    """A toy word-level dataset whose archive has no published digest, only its members (as PTB)."""
    kind = request.param
    return register(file_name=f"toy.{kind}", archive=kind, splits=SplitMembers(*TOY_MEMBERS), tokenizer="word",
                    member_sha256=tuple((m, sha256(t.encode())) for m, t in TOY_MEMBERS.items()),
                    member_note="test digests")


def member_mirror(root: Path, folder: str = "toy", members: dict[str, bytes] | None = None) -> Path:
    """A mirror laid out by member files: each member gzipped under <folder>/<member name>.gz."""
    members = {m: t.encode() for m, t in TOY_MEMBERS.items()} if members is None else members
    (root / folder).mkdir(parents=True, exist_ok=True)
    for member, data in members.items():
        (root / folder / f"{Path(member).name}.gz").write_bytes(gzip.compress(data))
    return root


def test_member_files_on_a_mirror_are_checked_and_assembled(member_dataset, tmp_path, capsys):
    mirror = member_mirror(tmp_path / "mirror")
    raw = fetch("toy", tmp_path / "raw", mirror=str(mirror))
    assert raw.name == member_dataset.file_name
    err = capsys.readouterr().err
    # says what was checked, per member, and never that it was accepted unverified
    assert "has its published sha256 (test digests)" in err and "train.txt, valid.txt, test.txt" in err
    assert "unverified" not in err and "warning" not in err
    record = json.loads(record_path(raw).read_text())
    assert record["sha256"] == sha256(raw.read_bytes()) and "train.txt.gz" in record["source"]
    # the assembled archive splits exactly as the original archive does
    stats = prepare("toy", raw, tmp_path / "from_members")
    original = tmp_path / "original"
    original.mkdir()
    if member_dataset.archive == "tgz":
        make_tgz(original / "toy.tgz", TOY_MEMBERS)
    else:
        with zipfile.ZipFile(original / "toy.zip", "w") as zf:
            for member, text in TOY_MEMBERS.items():
                zf.writestr(member, text)
    assert prepare("toy", original / member_dataset.file_name, tmp_path / "from_archive") == {
        **stats, "raw_sha256": sha256((original / member_dataset.file_name).read_bytes())}
    for name in ("train.txt", "valid.txt", "test.txt", "vocab.txt"):
        assert read_text(tmp_path / "from_members" / name) == read_text(tmp_path / "from_archive" / name)
    # the same members give the same archive, byte for byte
    raw.unlink()
    assert sha256(fetch("toy", tmp_path / "raw", mirror=str(mirror)).read_bytes()) == record["sha256"]


def test_members_in_another_folder_of_the_mirror(register, tmp_path):
    """ptb_char reads ptb's member files: its entry names the mirror folder that holds them."""
    register(file_name="toy.tgz", archive="tgz", splits=SplitMembers(*TOY_MEMBERS), tokenizer="word",
             member_sha256=tuple((m, sha256(t.encode())) for m, t in TOY_MEMBERS.items()),
             member_folders=("shared",))
    mirror = member_mirror(tmp_path / "mirror", folder="shared")
    assert fetch("toy", tmp_path / "raw", mirror=str(mirror)).exists()


def assert_nothing_kept(dest: Path) -> None:
    assert not dest.exists() or list(dest.iterdir()) == [], list(dest.iterdir())


@pytest.mark.parametrize("damage", ["altered", "truncated", "truncated_gz", "missing"])
def test_a_bad_member_is_refused_by_name(member_dataset, tmp_path, damage):
    members = {m: t.encode() for m, t in TOY_MEMBERS.items()}
    mirror = member_mirror(tmp_path / "mirror", members=members)
    bad = mirror / "toy" / "valid.txt.gz"
    if damage == "altered":
        bad.write_bytes(gzip.compress(b"a c\n"))
    elif damage == "truncated":
        bad.write_bytes(gzip.compress(members["d/valid.txt"][:-2]))
    elif damage == "truncated_gz":
        bad.write_bytes(gzip.compress(members["d/valid.txt"] * 50)[:-12])
    else:
        bad.unlink()
    dest = tmp_path / "raw"
    error_type = DownloadError if damage == "missing" else ChecksumError
    with pytest.raises(error_type) as error:
        fetch("toy", dest, mirror=str(mirror))
    message = str(error.value)
    assert "d/valid.txt" in message or "valid.txt.gz" in message
    if damage in ("altered", "truncated"):
        assert "sha256 mismatch" in message and "member d/valid.txt" in message and sha256(members["d/valid.txt"]) in message
    elif damage == "truncated_gz":
        assert "truncated or damaged" in message and str(bad.name) in message
    else:
        assert "but not d/valid.txt" in message and "train.txt.gz" in message
    assert_nothing_kept(dest)  # no raw file, no record, no temporary file: nothing downstream can use it


class FullDisk:
    """Files written under ``folder`` share ``room`` bytes; a write beyond them fails as on a full disk.
    Files read under ``mirror`` are listed in ``read``, to see which sources were tried."""

    def __init__(self, monkeypatch, folder: Path, mirror: Path, room: int):
        self.folder, self.mirror, self.room, self.read = folder, mirror, room, []
        real_open = builtins.open

        def open_on_this_disk(file, mode="r", *args, **kwargs):
            handle = real_open(file, mode, *args, **kwargs)
            path = Path(os.fsdecode(file)).resolve() if isinstance(file, (str, bytes, os.PathLike)) else None
            if path is not None and folder.resolve() in path.parents and set(mode) & set("wax+"):
                return _OnFullDisk(handle, self)
            if path is not None and mirror.resolve() in path.parents:
                self.read.append(path.name)
            return handle

        monkeypatch.setattr(builtins, "open", open_on_this_disk)


class _OnFullDisk:
    def __init__(self, handle, disk: FullDisk):
        self.handle, self.disk = handle, disk

    def write(self, data):
        if len(data) > self.disk.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.disk.room -= len(data)
        return self.handle.write(data)

    def __getattr__(self, name):
        return getattr(self.handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.close()


@pytest.mark.parametrize("layout", ["raw file", "member files"])
def test_a_full_disk_stops_the_fetch_at_once(member_dataset, tmp_path, monkeypatch, layout):
    """No space left while a file is written: one error naming the raw file and the fix, no further source
    tried (the mirror is fine), nothing left behind."""
    mirror = tmp_path / "mirror"
    if layout == "raw file":  # the archive at two places of the mirror: the second must not be tried
        archive = pack(member_dataset.archive, {m: t.encode() for m, t in TOY_MEMBERS.items()})
        for folder in (mirror / "toy", mirror):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / member_dataset.file_name).write_bytes(archive)
    else:
        member_mirror(mirror)
    dest = tmp_path / "raw"
    disk = FullDisk(monkeypatch, dest, mirror, room=8)
    with pytest.raises(DiskFullError) as error:
        fetch("toy", dest, mirror=str(mirror))
    message = str(error.value)
    assert message.startswith(f"no space left writing {dest / member_dataset.file_name}")
    assert "free space" in message and "rerun" in message and "nothing was kept" in message
    assert "could not fetch" not in message and "Set a mirror" not in message
    assert disk.read == [member_dataset.file_name if layout == "raw file" else "train.txt.gz"]
    assert_nothing_kept(dest)


@pytest.mark.parametrize("command, room", [("prepare", 8), ("prepare", 200_000), ("fraction", 8)])
def test_a_full_disk_while_preparing_is_named_as_fetch_names_it(tmp_path, monkeypatch, capsys, command, room):
    """prepare (extracting the archive, or writing the splits) and fraction on a full disk: the data layer's
    disk-full message, naming the file and the fix, exit status 2, no traceback, no half-written file."""
    raw = fetch("synth_ptb", tmp_path / "raw")
    source = tmp_path / "prepared"
    assert cli(["prepare", "synth_ptb", "--raw", str(raw), "--out", str(source)]) == 0
    out = tmp_path / "processed"
    out.mkdir()
    FullDisk(monkeypatch, out, tmp_path / "no_mirror", room=room)
    capsys.readouterr()
    if command == "prepare":
        code = cli(["prepare", "synth_ptb", "--raw", str(raw), "--out", str(out)])
    else:
        code = cli(["fraction", "--train", str(source / "train.txt"), "--tokenizer", "word", "--percent", "20",
                    "--out", str(out / "train.fraction20.txt")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"error: no space left writing {out}"), err
    assert f"free space on the disk holding {out}" in err and "rerun" in err
    assert not [path for path in out.rglob("*") if path.is_file() and path.stat().st_size and ".tmp" in path.name]
    assert not [path for path in out.rglob("*.tmp")]


def test_archive_with_a_published_digest_or_published_members(register, tmp_path):
    """WikiText-2: the zip's own digest, or (a repacked zip, or a mirror of the member files) its members'."""
    original = tmp_path / "original.zip"
    with zipfile.ZipFile(original, "w") as zf:
        for member, text in TOY_MEMBERS.items():
            zf.writestr(member, text)
    register(file_name="toy.zip", archive="zip", splits=SplitMembers(*TOY_MEMBERS), tokenizer="word",
             sha256=(Digest(sha256(original.read_bytes()), "test archive digest"),),
             member_sha256=tuple((m, sha256(t.encode())) for m, t in TOY_MEMBERS.items()), member_note="test")
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "toy.zip").write_bytes(original.read_bytes())
    assert fetch("toy", tmp_path / "a", mirror=str(mirror)).read_bytes() == original.read_bytes()

    repacked = mirror / "toy" / "toy.zip"
    with zipfile.ZipFile(repacked, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, text in TOY_MEMBERS.items():
            zf.writestr(member, text)
    assert sha256(repacked.read_bytes()) != sha256(original.read_bytes())
    assert fetch("toy", tmp_path / "b", mirror=str(mirror)).exists()

    with zipfile.ZipFile(repacked, "w") as zf:
        for member, text in {**TOY_MEMBERS, "d/test.txt": "altered\n"}.items():
            zf.writestr(member, text)
    with pytest.raises(ChecksumError, match=r"sha256 \(of the archive, and of its members\) mismatch.*d/test.txt"):
        fetch("toy", tmp_path / "c", mirror=str(mirror))
    assert_nothing_kept(tmp_path / "c")


def test_unverified_download_says_what_was_checked(register, tmp_path, capsys):
    content = b"no published sha256\n"
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "toy.txt").write_bytes(content)
    register(sha256=None, size_bytes=len(content))
    fetch("toy", tmp_path / "raw", mirror=str(mirror), trust_unverified=True)
    err = capsys.readouterr().err
    assert "warning: dataset 'toy'" in err and "accepted unverified (--trust-unverified)" in err
    assert f"its size ({len(content)} bytes)" in err and sha256(content) in err


def test_a_verified_raw_file_is_kept_without_any_source(register, tmp_path):
    """An existing checked file is used as it is: no mirror, no reachable URL needed, nothing deleted."""
    content = b"checked once\n"
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "toy.txt").write_bytes(content)
    register(sha256=(Digest(sha256(content), "test"),), urls=("http://127.0.0.1:9/toy.txt",))
    raw = fetch("toy", tmp_path / "raw", mirror=str(mirror))
    stamp = raw.stat()
    assert fetch("toy", tmp_path / "raw") == raw  # the mirror dropped, the canonical URL unreachable
    assert raw.read_bytes() == content and raw.stat().st_mtime_ns == stamp.st_mtime_ns
    assert raw.stat().st_ino == stamp.st_ino


# --- a raw file that changes on disk after its check -----------------------------------------------

def test_raw_file_changed_after_fetch_is_refused_by_prepare(register, tmp_path):
    content = "the corpus as fetched\n" * 20
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "toy.txt").write_text(content)
    register(sha256=(Digest(sha256(content.encode()), "test"),))
    raw = fetch("toy", tmp_path / "raw", mirror=str(mirror))
    assert "as recorded when it was fetched" in check_raw("toy", raw)
    prepare("toy", raw, tmp_path / "p")

    raw.write_text(content.replace("fetched", "edited!"))
    with pytest.raises(DataError) as error:
        prepare("toy", raw, tmp_path / "q")
    message = str(error.value)
    assert str(raw) in message and "changed on disk after it was fetched" in message
    assert f"rm {raw} {record_path(raw)}" in message and "run the workflow again" in message
    assert not (tmp_path / "q" / "train.txt").exists()

    # the fix the message names works: fetch again, and prepare accepts the checked copy
    raw.unlink()
    record_path(raw).unlink()
    prepare("toy", fetch("toy", tmp_path / "raw", mirror=str(mirror)), tmp_path / "q")


def test_raw_file_without_a_record(register, tmp_path, capsys):
    content = b"placed by hand\n" * 10
    raw = tmp_path / "toy.txt"
    raw.write_bytes(content)
    register(sha256=(Digest(sha256(content), "test"),))
    assert "registry's digest" in check_raw("toy", raw)  # checked against the registry instead
    raw.write_bytes(content + b"more")
    with pytest.raises(DataError, match=r"is not the file the registry describes.*rm "):
        prepare("toy", raw, tmp_path / "p")

    register(sha256=None)  # nothing to check it against: used, but not silently
    check_raw("toy", raw)
    assert "cannot be checked" in capsys.readouterr().err

    record_path(raw).write_text("{not json")
    with pytest.raises(DataError, match=r"fetch record .*toy.txt.fetch.json is unreadable"):
        check_raw("toy", raw)


def test_trusted_unverified_file_changed_on_disk_is_fetched_again(register, tmp_path):
    """Without a published digest only the record shows the file is the one accepted: a changed one
    (same size) is replaced by a fresh fetch, and prepare refuses it until then."""
    content = b"abcdefgh\n"
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "toy.txt").write_bytes(content)
    register(sha256=None, size_bytes=len(content))
    raw = fetch("toy", tmp_path / "raw", mirror=str(mirror), trust_unverified=True)
    raw.write_bytes(b"ABCDEFGH\n")
    with pytest.raises(DataError, match="changed on disk"):
        check_raw("toy", raw)
    assert fetch("toy", tmp_path / "raw", mirror=str(mirror), trust_unverified=True).read_bytes() == content
    check_raw("toy", raw)


REAL_MIRROR = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.mark.skipif(not (REAL_MIRROR / "MANIFEST.md").exists(), reason=f"no real data mirror at {REAL_MIRROR}")
@pytest.mark.parametrize("dataset_id, tokens, vocab", [
    ("ptb", (929_589, 73_760, 82_430), 10_000),
    ("wt2", (2_088_628, 217_646, 245_569), 33_278),
    ("ptb_char", None, 50),
    ("warpeace", None, None),
])
def test_the_real_mirror_as_it_is_laid_out(tmp_path, capsys, dataset_id, tokens, vocab):
    """../shared/data holds gzipped split files, not the archives: every dataset of the LRU and PRU
    studies is fetched from it and checked (MANIFEST.md lists the digests)."""
    raw = fetch(dataset_id, tmp_path / "raw", mirror=str(REAL_MIRROR))
    err = capsys.readouterr().err
    assert "unverified" not in err and "warning" not in err
    stats = prepare(dataset_id, raw, tmp_path / "p")
    if tokens is not None:
        assert tuple(stats["tokens"].values()) == tokens
    if vocab is not None:
        assert stats["vocab_size"] == vocab


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
    ("data/link", tarfile.SYMTYPE, "../../outside"),
    ("data/abs-link", tarfile.SYMTYPE, "/etc/passwd"),
    ("data/hard", tarfile.LNKTYPE, "../outside"),
    ("data/device", tarfile.CHRTYPE, ""),
])
def test_tar_member_refused_by_the_data_filter(tmp_path, name, kind, link):
    evil = tarfile.TarInfo(name)
    evil.type, evil.linkname = kind, link
    evil.size = 4 if kind == tarfile.REGTYPE else 0
    archive = crafted_tar(tmp_path / "evil.tgz", evil)
    target = tmp_path / "a" / "b"
    with pytest.raises(UnsafeArchiveError) as error:
        extract_members(archive, "tgz", ["data/ok.txt"], target)
    assert repr(name) in str(error.value) and "data filter" in str(error.value)
    assert not (tmp_path / "a" / "evil").exists()
    assert not (target / "data" / "ok.txt").exists()  # nothing is written from a refused archive


def test_tar_absolute_member_stays_inside_the_target(tmp_path):
    """The data filter strips a leading '/', as extractall(filter="data") does: nothing lands outside."""
    evil = tarfile.TarInfo("/tmp/rnnrepro-absolute-evil")
    evil.size = 4
    archive = crafted_tar(tmp_path / "evil.tgz", evil)
    target = tmp_path / "out"
    files = extract_members(archive, "tgz", ["data/ok.txt", "/tmp/rnnrepro-absolute-evil"], target)
    assert files["/tmp/rnnrepro-absolute-evil"] == target / "tmp" / "rnnrepro-absolute-evil"
    assert not Path("/tmp/rnnrepro-absolute-evil").exists() and files["data/ok.txt"].read_text() == "ok"


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


def test_counts_differing_from_the_papers_corpus_are_refused(register, tmp_path):
    dataset, raw = word_dataset(register, tmp_path, "a b\n", "a\n", "b\n",
                                expected=registry.ExpectedCounts(tokens=(3, 2, 2), vocab_size=4))
    with pytest.raises(DataError, match="not that corpus"):
        prepare(dataset.id, raw, tmp_path / "p")
    assert not (tmp_path / "p" / "train.txt").exists()
    # The real ptb entry, members behind './' as in simple-examples.tgz, but not the real text: its
    # members' published digests refuse it before any split is read.
    raw = make_tgz(tmp_path / "simple-examples.tgz",
                   {f"./simple-examples/data/ptb.{s}.txt": " a b \n" for s in registry.SPLITS})
    with pytest.raises(DataError, match="not the file the registry describes for dataset 'ptb'"):
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


# --- the workflow: where a file comes from is not what it is ------------------------------------

TOY_ENTRY = '''
DATASETS["toy_mirrored"] = Dataset(
    id="toy_mirrored", description="test fixture", citation="-",
    urls=("http://127.0.0.1:9/toy.tgz",),  # unreachable: only a mirror can provide it
    file_name="toy.tgz", sha256=None, archive="tgz",
    splits=SplitMembers("d/train.txt", "d/valid.txt", "d/test.txt"), tokenizer="word",
    member_sha256={digests!r}, member_note="test digests",
)
'''


@pytest.mark.slow
def test_changing_or_dropping_the_mirror_retrains_nothing(tmp_path):
    """After a finished run, setting, changing or dropping data_mirror (or trust_unverified_downloads)
    plans no job at all, and a real run without the mirror leaves the checked raw file in place
    (Snakemake used to rerun the fetch on the changed setting, delete the file and fail to download it)."""
    from conftest import copy_project, snakemake

    (tmp_path / "project").mkdir()
    project = copy_project(tmp_path / "project")
    digests = tuple((m, sha256(t.encode())) for m, t in TOY_MEMBERS.items())
    with open(project / "src/rnnrepro/data/registry.py", "a") as f:
        f.write(TOY_ENTRY.format(digests=digests))
    members_mirror = member_mirror(tmp_path / "members", folder="toy_mirrored")
    archive_mirror = tmp_path / "archive"
    (archive_mirror / "toy_mirrored").mkdir(parents=True)
    make_tgz(archive_mirror / "toy_mirrored" / "toy.tgz", TOY_MEMBERS)
    smoke = ["budget=smoke", "device=cpu", "threads=1"]
    # one training cell of the smoke grid (the first one the lru accuracy table needs) and the toy corpus
    plan = snakemake(project, "-n", "results/smoke/tables/lru_accuracy.csv", "--config", *smoke)
    assert plan.returncode == 0, plan.stderr
    cell = re.search(r"results/smoke/runs/lru/\S+?/metrics\.json", plan.stdout).group(0)
    targets = [cell, "data/processed/toy_mirrored/stats.json"]

    run = snakemake(project, "--cores", "2", *targets, "--config", *smoke, f"data_mirror={members_mirror}")
    assert run.returncode == 0, run.stderr[-3000:]
    raw = project / "data/raw/toy_mirrored/toy.tgz"
    before = raw.stat()
    for settings in ([f"data_mirror={archive_mirror}"], [], ["trust_unverified_downloads=true"]):
        plan = snakemake(project, "-n", *targets, "--config", *smoke, *settings)
        assert plan.returncode == 0, plan.stderr
        assert "Nothing to be done" in plan.stdout + plan.stderr, (settings, plan.stdout[-3000:])
    rerun = snakemake(project, "--cores", "2", *targets, "--config", *smoke)  # the mirror dropped
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    after = raw.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert json.loads(record_path(raw).read_text())["sha256"] == sha256(raw.read_bytes())
