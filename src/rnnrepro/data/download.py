"""Download a dataset's raw file, from a mirror or its canonical URL, and check it.

Sources: the ``mirror`` argument, else the environment variable ``RNNREPRO_DATA_MIRROR``, else the
registry's canonical URLs. A mirror is a directory or a URL prefix (http://, https://, file://).
In it the raw file is looked for at ``<id>/<file>``, ``<id>/<file>.gz``, ``<file>``, ``<file>.gz``
(a .gz copy is decompressed). Where the registry lists published digests of an archive's members,
a mirror may hold those member files instead (:mod:`.mirror_members`).

Each file is brought by pooch (:mod:`.transfer`) into a scratch folder beside the target, checked
(:func:`verify`), and only then renamed into place, so a target that exists has been checked; a wrong
file is deleted, never used, and the scratch folder goes with it whatever happens. A mirror file that
is there but cannot be read (a truncated or damaged .gz) stops the fetch, as a wrong digest does: a
mirror holding a broken copy needs a person's look, not a silent fall-back. A full disk stops it too,
at once, naming the file being written: the next source would fill the same disk.

Beside the raw file, fetch writes ``<file>.fetch.json``: its sha256, where it came from and what was
checked. ``prepare`` compares the raw file with that record (:func:`check_raw`), so a raw file that
changed on disk after its check is never split silently.
"""

from __future__ import annotations

import errno
import json
import os
import posixpath
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .archive import member_digests
from .mirror_members import fetch_members
from .registry import DataError, Dataset, get_dataset
from .synthetic import synthetic_bytes
from .transfer import (MIRROR_ENV, MIRROR_HINT, TRUST_ENV, ChecksumError, DownloadError, Source, Unavailable,
                       file_digest, mirror_prefix, retrieve, with_gz)

__all__ = ["MIRROR_ENV", "TRUST_ENV", "ChecksumError", "DiskFullError", "DownloadError", "UnverifiedDatasetError",
           "check_raw", "fetch", "file_digest", "record_path", "sources", "verify"]

RECORD_SUFFIX = ".fetch.json"


class UnverifiedDatasetError(DataError):
    pass


class DiskFullError(DownloadError):
    pass


class _Mismatch(Exception):
    """A file that is not the one the registry describes: what was compared, expected and found."""

    def __init__(self, kind: str, expected: str, actual: str):
        super().__init__(f"{kind} mismatch: expected {expected}, got {actual}")
        self.kind, self.expected, self.actual = kind, expected, actual


@dataclass(frozen=True)
class Checked:
    """What a check of a file established, in words, and whether a published digest vouched for it."""

    what: str
    verified: bool


def record_path(raw_file: Path | str) -> Path:
    """Where fetch records the digest of ``raw_file`` (see :func:`check_raw`)."""
    raw_file = Path(raw_file)
    return raw_file.with_name(raw_file.name + RECORD_SUFFIX)


def sources(dataset: Dataset, mirror: str | None = None) -> list[Source]:
    """Where ``dataset``'s raw file is looked for, in order."""
    mirror = mirror or os.environ.get(MIRROR_ENV) or None
    if mirror is None:
        return [Source(url, gzipped=False) for url in dataset.urls]
    prefix = mirror_prefix(mirror)
    return [s for relative in (f"{dataset.id}/{dataset.file_name}", dataset.file_name)
            for s in with_gz(f"{prefix}/{relative}")]


def verify(dataset: Dataset, path: Path) -> Checked:
    """What a check established if ``path`` is the file the registry describes; else raise _Mismatch.

    An archive passes when its own sha256 is a published one, or when each member the splits are read
    from has its published sha256 (a repacked archive, or one assembled from a mirror's member files).
    """
    if dataset.archive == "synthetic":
        if path.read_bytes() != synthetic_bytes(dataset):
            raise _Mismatch("content", "the generator's output", "other bytes")
        return Checked("the bytes rnnrepro.data.synthetic generates for it", verified=True)
    expected, actual = [], []
    if dataset.sha256 is not None:
        digest = file_digest(path)
        for published in dataset.sha256:
            if digest == published.sha256:
                return Checked(f"its sha256 {digest} is the registry's digest ({published.note})", verified=True)
        expected.append(" or ".join(f"{d.sha256} ({d.note})" for d in dataset.sha256))
        actual.append(digest)
    if dataset.member_sha256:
        digests = member_digests(path, dataset.container, [member for member, _ in dataset.member_sha256])
        wrong = [(m, want, digests.get(m)) for m, want in dataset.member_sha256 if digests.get(m) != want]
        if not wrong:
            names = ", ".join(posixpath.basename(m) for m, _ in dataset.member_sha256)
            return Checked(f"each member it is read from ({names}) has its published sha256 "
                           f"({dataset.member_note})", verified=True)
        expected.append("; ".join(f"{m} {want}" for m, want, _ in wrong))
        actual.append("; ".join(f"{m} {got or 'missing'}" for m, _, got in wrong))
    if expected:
        kind = "sha256" if not dataset.member_sha256 else (
            "member sha256" if dataset.sha256 is None else "sha256 (of the archive, and of its members)")
        raise _Mismatch(kind, "; or ".join(expected), "; ".join(actual))
    # An unverified entry the user chose to trust: check the weaker published facts we have.
    checked = []
    if dataset.size_bytes is not None:
        size = path.stat().st_size
        if size != dataset.size_bytes:
            raise _Mismatch("size", f"{dataset.size_bytes} bytes", f"{size} bytes")
        checked.append(f"its size ({size:,} bytes)")
    if dataset.md5 is not None:
        md5 = file_digest(path, "md5")
        if md5 != dataset.md5:
            raise _Mismatch("md5", dataset.md5, md5)
        checked.append(f"its md5 ({md5})")
    return Checked(f"no published sha256, so accepted unverified (--trust-unverified) after checking "
                   f"{' and '.join(checked) or 'nothing'}; its sha256 is {file_digest(path)}", verified=False)


def _check(dataset: Dataset, path: Path, origin: str) -> Checked:
    """:func:`verify`, deleting ``path`` and raising ChecksumError when it is not the described file."""
    try:
        return verify(dataset, path)
    except _Mismatch as mismatch:
        path.unlink(missing_ok=True)
        raise ChecksumError(
            f"{mismatch.kind} mismatch for dataset {dataset.id!r} from {origin}: expected {mismatch.expected}, "
            f"got {mismatch.actual}; the file was deleted. Try another mirror ({MIRROR_HINT}), or check whether "
            "upstream changed the file and, if the new file is right, add its digest to "
            "src/rnnrepro/data/registry.py"
        ) from None


def _publish(tmp: Path, target: Path) -> None:
    """Rename into place; a temporary file's owner-only mode would hide the data from the rest of the group."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, target)


def _write_atomically(target: Path, data: bytes) -> None:
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        _publish(Path(tmp_name), target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _record(target: Path, origin: str, checked: Checked) -> None:
    record = {"file": target.name, "sha256": file_digest(target), "source": origin, "checked": checked.what}
    _write_atomically(record_path(target), (json.dumps(record, indent=2) + "\n").encode())


def _recorded_sha256(raw_file: Path) -> str | None:
    """The digest fetch recorded for ``raw_file``; None without a record. Unreadable: DataError."""
    record = record_path(raw_file)
    if not record.is_file():
        return None
    try:
        digest = json.loads(record.read_text(encoding="utf-8"))["sha256"]
        if not isinstance(digest, str):
            raise TypeError(f"sha256 is {digest!r}")
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(
            f"the fetch record {record} is unreadable ({type(exc).__name__}: {exc}); delete it and {raw_file} "
            "and run the workflow again, which fetches and checks the file anew"
        ) from None
    return digest


def _matches_record(raw_file: Path) -> bool:
    """Whether a readable record beside ``raw_file`` holds its sha256."""
    try:
        recorded = _recorded_sha256(raw_file)
    except DataError:
        return False
    return recorded is not None and recorded == file_digest(raw_file)


def _install(path: Path, target: Path, origin: str, dataset: Dataset, checked: Checked) -> Path:
    record_path(target).unlink(missing_ok=True)  # never a record describing another file
    _publish(path, target)
    try:
        _record(target, origin, checked)
    except BaseException:
        target.unlink(missing_ok=True)  # a checked file is never left without its record
        raise
    prefix = "warning: " if not checked.verified else ""
    print(f"{prefix}dataset {dataset.id!r} from {origin}: {checked.what}", file=sys.stderr)
    return target


def _existing(dataset: Dataset, target: Path) -> Checked | None:
    """What a check of an existing raw file established; None (and the file deleted) if it is stale."""
    try:
        checked = verify(dataset, target)
    except _Mismatch:
        checked = None
    if checked is not None and not checked.verified and record_path(target).exists() and not _matches_record(target):
        checked = None  # no published digest: the record is the only evidence this is the accepted file
    if checked is None:  # a stale or damaged earlier copy: fetch it again
        target.unlink()
        record_path(target).unlink(missing_ok=True)
    return checked


def _bring(dataset: Dataset, mirror: str | None, folder: Path) -> tuple[Path, str]:
    """The raw file, brought into ``folder`` from the first source that has it, and where it came from.

    Only a source that is not there or cannot be reached lets the next one be tried; a file that is
    there but wrong, or a full disk, stops the fetch.
    """
    if dataset.archive == "synthetic":
        path = folder / dataset.file_name
        path.write_bytes(synthetic_bytes(dataset))
        return path, "rnnrepro.data.synthetic"
    tried = []
    for source in sources(dataset, mirror):
        try:
            return retrieve(dataset.id, source, folder, dataset.file_name), source.url
        except Unavailable as unavailable:
            tried += unavailable.tried
    if mirror is not None and dataset.member_sha256:
        try:
            return fetch_members(dataset, mirror, folder)
        except Unavailable as unavailable:
            tried += unavailable.tried
    members = ""
    if dataset.member_sha256:
        names = ", ".join(posixpath.basename(m) for m, _ in dataset.member_sha256)
        members = f", or its member files {names} (each also as .gz) in {dataset.id}/"
    raise DownloadError(
        f"could not fetch dataset {dataset.id!r}; tried: {'; '.join(tried) or 'no sources'}. "
        f"Set a mirror holding {dataset.id}/{dataset.file_name} (or a .gz copy){members} with {MIRROR_HINT}"
    )


def fetch(dataset_id: str, dest_dir: Path | str, mirror: str | None = None,
          trust_unverified: bool = False) -> Path:
    """Make ``dest_dir/<file name>`` the dataset's checked raw file (and its record); returns its path."""
    dataset = get_dataset(dataset_id)
    dest_dir = Path(dest_dir)
    target = dest_dir / dataset.file_name
    if not dataset.verified and not trust_unverified:
        published = ", ".join(f"{k} {v}" for k, v in (("md5", dataset.md5), ("size", dataset.size_bytes)) if v)
        raise UnverifiedDatasetError(
            f"dataset {dataset.id!r} has no verified sha256 in the registry"
            f"{f' (only {published})' if published else ''}, so its download cannot be checked; "
            "refusing to fetch it. Pass --trust-unverified (config trust_unverified_downloads: true) to "
            "accept it unchecked, or add a confirmed sha256 to src/rnnrepro/data/registry.py"
        )
    try:
        dest_dir.mkdir(parents=True, exist_ok=True)
        if target.exists() and (checked := _existing(dataset, target)) is not None:
            if not _matches_record(target):  # fetched by an older version, or checked anew just now
                _record(target, f"the existing file {target}", checked)
            return target
        record_path(target).unlink(missing_ok=True)  # a record left beside no file describes nothing
        with tempfile.TemporaryDirectory(dir=dest_dir, prefix=f".{dataset.file_name}.") as scratch:
            path, origin = _bring(dataset, mirror or os.environ.get(MIRROR_ENV) or None, Path(scratch))
            return _install(path, target, origin, dataset, _check(dataset, path, origin))
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        raise DiskFullError(
            f"no space left writing {target} ({exc.strerror}): free space on the disk holding {dest_dir} and "
            "rerun; nothing was kept"
        ) from None


def check_raw(dataset_id: str, raw_file: Path | str) -> str:
    """Raise DataError unless ``raw_file`` is still the file fetch checked; returns what was compared.

    With fetch's record beside it, the file must have the recorded sha256. Without one (a file put
    there by hand, or fetched by an older version) it is checked against the registry instead; a
    dataset with no published digest then cannot be checked, which is said on stderr.
    """
    dataset = get_dataset(dataset_id)
    raw_file = Path(raw_file)
    fix = (f"Delete it (rm {raw_file} {record_path(raw_file)}) and run the workflow again, which fetches "
           "and checks it anew")
    recorded = _recorded_sha256(raw_file)
    if recorded is not None:
        actual = file_digest(raw_file)
        if actual != recorded:
            raise DataError(
                f"{raw_file} changed on disk after it was fetched and checked (sha256 then {recorded}, now "
                f"{actual}); nothing was built from it. {fix}"
            )
        return f"sha256 {actual}, as recorded when it was fetched ({record_path(raw_file).name})"
    if not dataset.verified:
        print(f"warning: {raw_file} has no fetch record and dataset {dataset.id!r} no published digest, so it "
              "cannot be checked; using it as it is", file=sys.stderr)
        return "nothing (no record, no published digest)"
    try:
        return verify(dataset, raw_file).what
    except _Mismatch as mismatch:
        raise DataError(
            f"{raw_file} is not the file the registry describes for dataset {dataset.id!r} ({mismatch}); nothing "
            f"was built from it. {fix}"
        ) from None
