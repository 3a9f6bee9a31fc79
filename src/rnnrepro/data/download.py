"""Download a dataset's raw file, from a mirror or its canonical URL, and check it.

Sources: the ``mirror`` argument, else the environment variable ``RNNREPRO_DATA_MIRROR``, else the
registry's canonical URLs. A mirror is a directory or a URL prefix (http://, https://, file://).
In it the raw file is looked for at ``<id>/<file>``, ``<id>/<file>.gz``, ``<file>``, ``<file>.gz``
(a .gz copy is decompressed). Where the registry lists published digests of an archive's members,
a mirror may hold those member files instead, at ``<folder>/<member name>`` or ``.gz`` (folder: the
dataset id, then the entry's ``member_folders``); each is checked against its own digest and the
archive is then assembled locally from the checked members.

Every file is streamed into a temporary file beside the target, checked, and only then renamed into
place, so a target that exists has been checked; a wrong file is deleted, never used. A mirror file
that is there but cannot be read (a truncated or damaged .gz) stops the fetch, as a wrong digest does:
a mirror holding a broken copy needs a person's look, not a silent fall-back.

Beside the raw file, fetch writes ``<file>.fetch.json``: its sha256, where it came from and what was
checked. ``prepare`` compares the raw file with that record (:func:`check_raw`), so a raw file that
changed on disk after its check is never split silently.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import json
import os
import posixpath
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from .archive import member_digests
from .registry import DataError, Dataset, get_dataset
from .synthetic import synthetic_bytes

MIRROR_ENV = "RNNREPRO_DATA_MIRROR"
RECORD_SUFFIX = ".fetch.json"
# Some hosts (wikitext.smerity.com among them) refuse urllib's default User-Agent.
USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36"
TIMEOUT_S = 60
_CHUNK = 1 << 20
_MIRROR_HINT = f"--mirror, the environment variable {MIRROR_ENV} or the config key data_mirror"
# A file that is there but whose compressed stream breaks off or is corrupt.
_DAMAGED = (EOFError, zlib.error, gzip.BadGzipFile)
# Fixed metadata for an archive assembled from members: the same members give the same bytes.
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


class ChecksumError(DataError):
    pass


class UnverifiedDatasetError(DataError):
    pass


class DownloadError(DataError):
    pass


class _Mismatch(Exception):
    """A file that is not the one the registry describes: what was compared, expected and found."""

    def __init__(self, kind: str, expected: str, actual: str):
        super().__init__(f"{kind} mismatch: expected {expected}, got {actual}")
        self.kind, self.expected, self.actual = kind, expected, actual


@dataclass(frozen=True)
class Source:
    url: str
    gzipped: bool  # a .gz copy on a mirror: decompressed on the way in


@dataclass(frozen=True)
class Checked:
    """What a check of a file established, in words, and whether a published digest vouched for it."""

    what: str
    verified: bool


def file_digest(path: Path, algorithm: str = "sha256") -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def record_path(raw_file: Path | str) -> Path:
    """Where fetch records the digest of ``raw_file`` (see :func:`check_raw`)."""
    raw_file = Path(raw_file)
    return raw_file.with_name(raw_file.name + RECORD_SUFFIX)


def _mirror_prefix(mirror: str) -> str:
    if urllib.parse.urlsplit(mirror).scheme in ("http", "https", "file"):
        return mirror.rstrip("/")
    folder = Path(mirror).expanduser()
    if not folder.is_dir():
        raise DataError(f"data mirror {mirror!r} is neither a directory nor an http(s):// or file:// URL; "
                        f"fix {_MIRROR_HINT}")
    return folder.resolve().as_uri()


def _with_gz(url: str) -> list[Source]:
    return [Source(url, gzipped=False), Source(f"{url}.gz", gzipped=True)]


def sources(dataset: Dataset, mirror: str | None = None) -> list[Source]:
    """Where ``dataset``'s raw file is looked for, in order."""
    mirror = mirror or os.environ.get(MIRROR_ENV) or None
    if mirror is None:
        return [Source(url, gzipped=False) for url in dataset.urls]
    prefix = _mirror_prefix(mirror)
    return [s for relative in (f"{dataset.id}/{dataset.file_name}", dataset.file_name)
            for s in _with_gz(f"{prefix}/{relative}")]


def member_sources(dataset: Dataset, mirror: str, member: str) -> list[Source]:
    """Where a mirror may hold one archive member of ``dataset`` as a file of its own, in order."""
    prefix = _mirror_prefix(mirror)
    name = posixpath.basename(member)
    return [s for folder in (dataset.id, *dataset.member_folders) for s in _with_gz(f"{prefix}/{folder}/{name}")]


def _download(source: Source, dest_dir: Path, name: str) -> Path:
    """Stream ``source`` into a temporary file in ``dest_dir``; removed again on any failure."""
    request = urllib.request.Request(source.url, headers={"User-Agent": USER_AGENT})
    fd, tmp_name = tempfile.mkstemp(dir=dest_dir, prefix=f".{name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response, os.fdopen(fd, "wb") as out:
            length = response.headers.get("Content-Length")
            total = int(length) if length and not source.gzipped else None
            stream = gzip.GzipFile(fileobj=response) if source.gzipped else response
            with tqdm(total=total, unit="B", unit_scale=True, desc=name, mininterval=1.0) as bar:
                while chunk := stream.read(_CHUNK):
                    out.write(chunk)
                    bar.update(len(chunk))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _failure(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return f"{type(exc).__name__}: {exc}"


def _damaged(dataset: Dataset, url: str, exc: BaseException) -> ChecksumError:
    return ChecksumError(
        f"dataset {dataset.id!r}: {url} is there but cannot be read ({_failure(exc)}): the file is truncated "
        f"or damaged, and nothing was kept. Replace it on the mirror with a complete copy, or use another "
        f"mirror ({_MIRROR_HINT})"
    )


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
            f"got {mismatch.actual}; the file was deleted. Try another mirror ({_MIRROR_HINT}), or check whether "
            "upstream changed the file and, if the new file is right, add its digest to "
            "src/rnnrepro/data/registry.py"
        ) from None


def _publish(tmp: Path, target: Path) -> None:
    """Rename into place; mkstemp's owner-only mode would hide the data from the rest of the group."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, target)


def _write_atomically(target: Path, data: bytes) -> None:
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    _publish(Path(tmp_name), target)


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


def _install(tmp: Path, target: Path, origin: str, dataset: Dataset, checked: Checked) -> Path:
    record_path(target).unlink(missing_ok=True)  # never a record describing another file
    _publish(tmp, target)
    _record(target, origin, checked)
    prefix = "warning: " if not checked.verified else ""
    print(f"{prefix}dataset {dataset.id!r} from {origin}: {checked.what}", file=sys.stderr)
    return target


def _assemble(dataset: Dataset, members: dict[str, Path], dest_dir: Path) -> Path:
    """The dataset's archive (its registry container) holding exactly ``members``, as a temporary file."""
    fd, tmp_name = tempfile.mkstemp(dir=dest_dir, prefix=f".{dataset.file_name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            if dataset.container == "tgz":
                with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
                    for name, path in members.items():
                        info = tarfile.TarInfo(name)
                        info.size, info.mode = path.stat().st_size, 0o644
                        with open(path, "rb") as f:
                            tar.addfile(info, f)
            elif dataset.container == "zip":
                with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
                    for name, path in members.items():
                        info = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
                        info.compress_type = zipfile.ZIP_DEFLATED
                        with open(path, "rb") as src, zf.open(info, "w") as dst:
                            shutil.copyfileobj(src, dst, _CHUNK)
            else:
                raise ValueError(f"member files assemble a 'tgz' or 'zip', not {dataset.container!r}")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _fetch_members(dataset: Dataset, mirror: str, dest_dir: Path, failures: list[str]) -> tuple[Path, str] | None:
    """The archive assembled from the mirror's member files, each checked, and where they came from.

    None when the mirror holds none of them (their URLs are added to ``failures``). A member that is
    missing while others are there, wrong, truncated or damaged stops the fetch with its name.
    """
    fetched: dict[str, Path] = {}
    origins: dict[str, str] = {}
    missing: dict[str, list[str]] = {}
    try:
        for member, published in dataset.member_sha256:
            tried = []
            for source in member_sources(dataset, mirror, member):
                try:
                    fetched[member] = _download(source, dest_dir, posixpath.basename(member))
                except _DAMAGED as exc:
                    raise _damaged(dataset, source.url, exc) from None
                except (OSError, http.client.HTTPException, ValueError) as exc:
                    tried.append(f"{source.url} ({_failure(exc)})")
                    continue
                origins[member] = source.url
                break
            if member not in fetched:
                missing[member] = tried
                continue
            digest = file_digest(fetched[member])
            if digest != published:
                raise ChecksumError(
                    f"sha256 mismatch for dataset {dataset.id!r}, member {member}, from {source.url}: expected "
                    f"{published} ({dataset.member_note}), got {digest}; nothing was kept. Replace that file on "
                    f"the mirror with the published one (uncompressed, or gzipped as {posixpath.basename(member)}"
                    f".gz), or use another mirror ({_MIRROR_HINT})"
                )
        if not fetched:
            failures += [url for urls in missing.values() for url in urls]
            return None
        if missing:
            looked = "; ".join(f"{m}: {', '.join(urls)}" for m, urls in missing.items())
            raise DownloadError(
                f"the mirror holds member file(s) {', '.join(sorted(origins.values()))} of dataset {dataset.id!r} "
                f"but not {', '.join(missing)} (looked for {looked}); nothing was kept. Add the missing file(s) to "
                f"the mirror, or use another mirror ({_MIRROR_HINT})"
            )
        archive = _assemble(dataset, fetched, dest_dir)
    finally:
        for path in fetched.values():
            path.unlink(missing_ok=True)
    return archive, f"the member files {', '.join(origins.values())} (assembled into {dataset.file_name})"


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


def fetch(dataset_id: str, dest_dir: Path | str, mirror: str | None = None,
          trust_unverified: bool = False) -> Path:
    """Make ``dest_dir/<file name>`` the dataset's checked raw file (and its record); returns its path."""
    dataset = get_dataset(dataset_id)
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / dataset.file_name
    if dataset.archive == "synthetic":
        record_path(target).unlink(missing_ok=True)
        _write_atomically(target, synthetic_bytes(dataset))
        _record(target, "rnnrepro.data.synthetic", verify(dataset, target))
        return target
    if not dataset.verified and not trust_unverified:
        published = ", ".join(f"{k} {v}" for k, v in (("md5", dataset.md5), ("size", dataset.size_bytes)) if v)
        raise UnverifiedDatasetError(
            f"dataset {dataset.id!r} has no verified sha256 in the registry"
            f"{f' (only {published})' if published else ''}, so its download cannot be checked; "
            "refusing to fetch it. Pass --trust-unverified (config trust_unverified_downloads: true) to "
            "accept it unchecked, or add a confirmed sha256 to src/rnnrepro/data/registry.py"
        )
    if target.exists() and (checked := _existing(dataset, target)) is not None:
        if not _matches_record(target):  # fetched by an older version, or checked anew just now
            _record(target, f"the existing file {target}", checked)
        return target
    record_path(target).unlink(missing_ok=True)  # a record left beside no file describes nothing
    mirror = mirror or os.environ.get(MIRROR_ENV) or None
    failures = []
    for source in sources(dataset, mirror):
        try:
            tmp = _download(source, dest_dir, dataset.file_name)
        except _DAMAGED as exc:
            raise _damaged(dataset, source.url, exc) from None
        except (OSError, http.client.HTTPException, ValueError) as exc:
            failures.append(f"{source.url} ({_failure(exc)})")
            continue
        # A wrong file stops the fetch instead of falling through to the next source: it means a
        # mirror or upstream changed, which a person has to look at.
        return _install(tmp, target, source.url, dataset, _check(dataset, tmp, source.url))
    if mirror is not None and dataset.member_sha256:
        assembled = _fetch_members(dataset, mirror, dest_dir, failures)
        if assembled is not None:
            tmp, origin = assembled
            return _install(tmp, target, origin, dataset, _check(dataset, tmp, origin))
    members = ""
    if dataset.member_sha256:
        names = ", ".join(posixpath.basename(m) for m, _ in dataset.member_sha256)
        members = f", or its member files {names} (each also as .gz) in {dataset.id}/"
    raise DownloadError(
        f"could not fetch dataset {dataset.id!r}; tried: {'; '.join(failures) or 'no sources'}. "
        f"Set a mirror holding {dataset.id}/{dataset.file_name} (or a .gz copy){members} with {_MIRROR_HINT}"
    )


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
