"""Bring one file from a URL into a scratch folder, through pooch; and where a mirror is looked in.

pooch (``pooch.retrieve``, as SciPy and scikit-image fetch their data) does the transfer: HTTP(S) and
FTP with a progress bar, into a temporary file that is moved into place only when it is complete, and
``pooch.Decompress`` for a mirror's .gz copy. A mirror that is a local folder or a ``file://`` URL is
read by :func:`copy_local_file`, a pooch downloader (pooch itself knows no ``file://``).

pooch's ``known_hash`` is not used: the registry accepts a file by any of several digests, or an
archive by the digests of its members, and a .gz copy is checked after it is decompressed, none of
which one hash of the downloaded bytes can say. So every file comes with ``known_hash=None`` and is
checked right after by ``download.verify`` (or, for a member file, ``mirror_members``), whose errors
name what was expected and what came.
"""

from __future__ import annotations

import errno
import gzip
import logging
import shutil
import urllib.parse
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path

import pooch

from .registry import DataError

MIRROR_ENV = "RNNREPRO_DATA_MIRROR"
# `fetch --trust-unverified` where it is not empty (the workflow sets it from trust_unverified_downloads)
TRUST_ENV = "RNNREPRO_TRUST_UNVERIFIED"
MIRROR_HINT = f"--mirror, the environment variable {MIRROR_ENV} or the config key data_mirror"
_CHUNK = 1 << 20
# A file that is there but whose compressed stream breaks off or is corrupt.
_DAMAGED = (EOFError, zlib.error, gzip.BadGzipFile)

# pooch logs each transfer at INFO and, with known_hash=None, advises pinning the hash it saw; the
# registry's checks follow every transfer, so only pooch's warnings are shown.
pooch.get_logger().setLevel(logging.WARNING)


class ChecksumError(DataError):
    """A file that is there but is not the one the registry describes; nothing of it is kept."""


class DownloadError(DataError):
    pass


class Unavailable(Exception):
    """Sources that are not there or cannot be reached, as 'url (why)'; the next source is tried."""

    def __init__(self, tried: list[str]):
        super().__init__("; ".join(tried))
        self.tried = tried


@dataclass(frozen=True)
class Source:
    url: str
    gzipped: bool  # a .gz copy on a mirror: decompressed on the way in


def mirror_prefix(mirror: str) -> str:
    """A mirror setting (directory or URL prefix) as a URL prefix without a trailing slash."""
    if urllib.parse.urlsplit(mirror).scheme in ("http", "https", "file"):
        return mirror.rstrip("/")
    folder = Path(mirror).expanduser()
    if not folder.is_dir():
        raise DataError(f"data mirror {mirror!r} is neither a directory nor an http(s):// or file:// URL; "
                        f"fix {MIRROR_HINT}")
    return folder.resolve().as_uri()


def file_digest(path: Path | str, algorithm: str = "sha256") -> str:
    return pooch.file_hash(str(path), alg=algorithm)


def with_gz(url: str) -> list[Source]:
    """A mirror file and its .gz copy, in this order."""
    return [Source(url, gzipped=False), Source(f"{url}.gz", gzipped=True)]


def copy_local_file(url: str, output_file: str, pooch_instance: pooch.Pooch | None) -> None:
    """pooch downloader for ``file://`` URLs: a mirror on a local or network file system."""
    path = urllib.request.url2pathname(urllib.parse.urlsplit(url).path)
    with open(path, "rb") as src, open(output_file, "wb") as dst:
        shutil.copyfileobj(src, dst, _CHUNK)


def retrieve(dataset_id: str, source: Source, folder: Path, name: str) -> Path:
    """``source`` downloaded into ``folder`` as ``name`` (a .gz copy decompressed); returns its path.

    Raises :class:`Unavailable` when the source is not there or cannot be reached, ChecksumError when it
    is there but cannot be decompressed, and lets a full disk's OSError (ENOSPC) through: the caller
    stops at once, since another source would fill the same disk.
    """
    try:
        path = pooch.retrieve(
            source.url,
            known_hash=None,
            fname=f"{name}.gz" if source.gzipped else name,
            path=folder,
            processor=pooch.Decompress(method="gzip", name=name) if source.gzipped else None,
            downloader=copy_local_file if source.url.startswith("file:") else None,
            progressbar=True,
        )
    except _DAMAGED as exc:
        raise ChecksumError(
            f"dataset {dataset_id!r}: {source.url} is there but cannot be read ({type(exc).__name__}: {exc}): the "
            f"file is truncated or damaged, and nothing was kept. Replace it on the mirror with a complete copy, "
            f"or use another mirror ({MIRROR_HINT})"
        ) from None
    except (OSError, ValueError) as exc:  # requests' errors are OSErrors; pooch refuses a scheme with ValueError
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            raise
        raise Unavailable([f"{source.url} ({type(exc).__name__}: {exc})"]) from None
    return Path(path)
