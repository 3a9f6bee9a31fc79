"""Download a dataset's raw file, from a mirror or its canonical URL, and check it.

Sources: the ``mirror`` argument, else the environment variable ``RNNREPRO_DATA_MIRROR``, else the
registry's canonical URLs. A mirror is a directory or a URL prefix (http://, https://, file://);
in it the file is looked for at ``<id>/<file>``, ``<id>/<file>.gz``, ``<file>``, ``<file>.gz``
(a .gz copy is decompressed). The file is streamed into a temporary file beside the target, its
sha256 compared with the registry's, and only then renamed into place, so a target that exists
has been checked. A mismatching file is deleted, never used.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from .archive import member_digests
from .registry import DataError, Dataset, get_dataset
from .synthetic import synthetic_bytes

MIRROR_ENV = "RNNREPRO_DATA_MIRROR"
# Some hosts (wikitext.smerity.com among them) refuse urllib's default User-Agent.
USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36"
TIMEOUT_S = 60
_CHUNK = 1 << 20
_MIRROR_HINT = f"--mirror, the environment variable {MIRROR_ENV} or the config key data_mirror"


class ChecksumError(DataError):
    pass


class UnverifiedDatasetError(DataError):
    pass


class DownloadError(DataError):
    pass


@dataclass(frozen=True)
class Source:
    url: str
    gzipped: bool  # a .gz copy on a mirror: decompressed on the way in


def file_digest(path: Path, algorithm: str = "sha256") -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _mirror_prefix(mirror: str) -> str:
    if urllib.parse.urlsplit(mirror).scheme in ("http", "https", "file"):
        return mirror.rstrip("/")
    folder = Path(mirror).expanduser()
    if not folder.is_dir():
        raise DataError(f"data mirror {mirror!r} is neither a directory nor an http(s):// or file:// URL; "
                        f"fix {_MIRROR_HINT}")
    return folder.resolve().as_uri()


def sources(dataset: Dataset, mirror: str | None = None) -> list[Source]:
    """Where ``dataset`` is looked for, in order."""
    mirror = mirror or os.environ.get(MIRROR_ENV) or None
    if mirror is None:
        return [Source(url, gzipped=False) for url in dataset.urls]
    prefix = _mirror_prefix(mirror)
    found = []
    for relative in (f"{dataset.id}/{dataset.file_name}", dataset.file_name):
        found += [Source(f"{prefix}/{relative}", False), Source(f"{prefix}/{relative}.gz", True)]
    return found


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


def _failure(exc: Exception) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return f"{type(exc).__name__}: {exc}"


def _check(dataset: Dataset, path: Path, origin: str) -> None:
    """Raise ChecksumError (deleting ``path``) unless the file is the one the registry describes."""
    if dataset.sha256 is not None:
        actual = file_digest(path)
        if actual in {d.sha256 for d in dataset.sha256}:
            return
        expected = "; or ".join(f"{d.sha256} ({d.note})" for d in dataset.sha256)
        kind = "sha256"
    elif dataset.member_sha256:
        digests = member_digests(path, dataset.archive, [member for member, _ in dataset.member_sha256])
        wrong = [(m, want, digests.get(m)) for m, want in dataset.member_sha256 if digests.get(m) != want]
        if not wrong:
            return
        kind = "member sha256"
        expected = "; ".join(f"{m} {want}" for m, want, _ in wrong)
        actual = "; ".join(f"{m} {got or 'missing'}" for m, _, got in wrong)
    else:
        # Unverified entry the user chose to trust: check the weaker published facts we have.
        size = path.stat().st_size
        if dataset.size_bytes is not None and size != dataset.size_bytes:
            expected, actual, kind = f"{dataset.size_bytes} bytes", f"{size} bytes", "size"
        elif dataset.md5 is not None and (md5 := file_digest(path, "md5")) != dataset.md5:
            expected, actual, kind = dataset.md5, md5, "md5"
        else:
            return
    path.unlink(missing_ok=True)
    raise ChecksumError(
        f"{kind} mismatch for dataset {dataset.id!r} from {origin}: expected {expected}, got {actual}; "
        f"the file was deleted. Try another mirror ({_MIRROR_HINT}), or check whether upstream "
        "changed the file and, if the new file is right, add its digest to "
        "src/rnnrepro/data/registry.py"
    )


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


def fetch(dataset_id: str, dest_dir: Path | str, mirror: str | None = None,
          trust_unverified: bool = False) -> Path:
    """Make ``dest_dir/<file name>`` the dataset's checked raw file; returns its path."""
    dataset = get_dataset(dataset_id)
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / dataset.file_name
    if dataset.archive == "synthetic":
        _write_atomically(target, synthetic_bytes(dataset))
        return target
    if not dataset.verified and not trust_unverified:
        published = ", ".join(f"{k} {v}" for k, v in (("md5", dataset.md5), ("size", dataset.size_bytes)) if v)
        raise UnverifiedDatasetError(
            f"dataset {dataset.id!r} has no verified sha256 in the registry"
            f"{f' (only {published})' if published else ''}, so its download cannot be checked; "
            "refusing to fetch it. Pass --trust-unverified (config trust_unverified_downloads: true) to "
            "accept it unchecked, or add a confirmed sha256 to src/rnnrepro/data/registry.py"
        )
    if target.exists():
        try:
            _check(dataset, target, f"the existing file {target}")
            return target
        except ChecksumError:
            pass  # a stale or damaged earlier copy (now deleted): fetch it again
    failures = []
    for source in sources(dataset, mirror):
        try:
            tmp = _download(source, dest_dir, dataset.file_name)
        except (OSError, http.client.HTTPException, EOFError, zlib.error, ValueError) as exc:
            failures.append(f"{source.url} ({_failure(exc)})")
            continue
        # A wrong file stops the fetch instead of falling through to the next source: it means a
        # mirror or upstream changed, which a person has to look at.
        _check(dataset, tmp, source.url)
        if dataset.sha256 is None:
            print(f"warning: dataset {dataset.id!r} accepted unverified (--trust-unverified); its sha256 is "
                  f"{file_digest(tmp)}", file=sys.stderr)
        _publish(tmp, target)
        return target
    raise DownloadError(
        f"could not fetch dataset {dataset.id!r}; tried: {'; '.join(failures) or 'no sources'}. "
        f"Set a mirror holding {dataset.id}/{dataset.file_name} (or a .gz copy) with {_MIRROR_HINT}"
    )
