"""The .tgz and .zip archives of datasets: safe extraction of the few members a dataset needs, and
archives packed so that their bytes depend only on their members.

Both formats are read through one listing (:func:`_entries`: each entry as a ``tarfile.TarInfo`` and a
way to open its bytes), so extraction and digests have one code path. Before anything is written,
every entry of the archive goes through ``tarfile.data_filter``, the policy of
``extractall(filter="data")``: an entry whose path, or whose link target, would land outside the
target folder (``..``, links pointing out, absolute link targets) or that is a device file makes the
whole archive refused, because a download that carries one is not the file the registry describes. A
zip entry is judged by the same filter under its name. A leading ``/`` is stripped, as the filter
does, so such an entry lands inside the folder. Only the requested members are then written, as
plain files.

:func:`pack` writes an archive with no timestamps, owners or writer's names in it: the archive a
mirror's member files are assembled into, and a synthetic corpus's raw file.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import posixpath
import shutil
import tarfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import IO

from .registry import DataError

_CHUNK = 1 << 20
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can hold


class UnsafeArchiveError(DataError):
    pass


def member_key(name: str) -> str:
    """Archive names compare without a leading './' (simple-examples.tgz stores './simple-examples/...')."""
    return posixpath.normpath(name)


def _zip_entry(info: zipfile.ZipInfo) -> tarfile.TarInfo:
    """A zip entry described as a tar entry of the same name, for ``tarfile.data_filter``."""
    entry = tarfile.TarInfo(info.filename)
    entry.type = tarfile.DIRTYPE if info.is_dir() else tarfile.REGTYPE
    entry.size = info.file_size
    return entry


@contextmanager
def _entries(archive: Path, kind: str) -> Iterator[list[tuple[tarfile.TarInfo, Callable[[], IO[bytes]]]]]:
    """Every entry of a 'tgz' or 'zip' archive, with a function opening its bytes; unreadable: DataError."""
    try:
        if kind == "tgz":
            with tarfile.open(archive, "r:*") as tar:
                yield [(entry, partial(tar.extractfile, entry)) for entry in tar.getmembers()]
        elif kind == "zip":
            with zipfile.ZipFile(archive) as zf:
                yield [(_zip_entry(info), partial(zf.open, info)) for info in zf.infolist()]
        else:
            raise ValueError(f"archives are 'tgz' or 'zip', not {kind!r}")
    except (tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
        raise DataError(f"{archive} is not a readable {kind} archive ({exc}); delete it and fetch again") from None


def _files(archive: Path, entries, target: Path) -> dict[str, tuple[tarfile.TarInfo, Callable[[], IO[bytes]]]]:
    """The archive's regular files by member key, after every entry has passed the data filter."""
    files = {}
    for entry, open_entry in entries:
        try:
            safe = tarfile.data_filter(entry, str(target))
        except tarfile.FilterError as exc:
            raise UnsafeArchiveError(
                f"{archive}: member {entry.name!r} is refused by tarfile's data filter ({exc}); refusing to "
                "extract this archive (it is not the file the registry describes: delete it and fetch again "
                "from another mirror)"
            ) from None
        if safe.isfile():
            files[member_key(entry.name)] = (safe, open_entry)
    return files


def _missing(archive: Path, wanted: str, present: Iterable[str]) -> DataError:
    sample = ", ".join(sorted(present)[:8])
    return DataError(
        f"{archive} has no member {wanted!r} (it holds e.g. {sample}); the download is not the "
        "expected archive: delete it and fetch again"
    )


def extract_members(archive: Path, kind: str, members: Iterable[str], target: Path) -> dict[str, Path]:
    """Write each requested member under ``target``; returns member name -> extracted file."""
    archive, target = Path(archive), Path(target)
    target.mkdir(parents=True, exist_ok=True)
    extracted: dict[str, Path] = {}
    with _entries(archive, kind) as entries:
        files = _files(archive, entries, target)
        for name in dict.fromkeys(members):
            if member_key(name) not in files:
                raise _missing(archive, name, files)
            entry, open_entry = files[member_key(name)]
            out = target / entry.name
            out.parent.mkdir(parents=True, exist_ok=True)
            with open_entry() as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst, _CHUNK)
            extracted[name] = out
    return extracted


def member_digests(archive: Path, kind: str, members: Iterable[str]) -> dict[str, str]:
    """sha256 of each requested member that the archive holds (none if it is unreadable)."""
    wanted = {member_key(m): m for m in members}
    digests: dict[str, str] = {}
    try:
        with _entries(archive, kind) as entries:
            for entry, open_entry in entries:
                if entry.isfile() and member_key(entry.name) in wanted:
                    with open_entry() as f:
                        digests[wanted[member_key(entry.name)]] = hashlib.file_digest(f, "sha256").hexdigest()
    except (DataError, OSError):
        return {}
    return digests


def pack(kind: str, members: dict[str, bytes]) -> bytes:
    """A 'tgz' or 'zip' archive holding exactly ``members`` (name -> bytes), in this order."""
    buffer = io.BytesIO()
    if kind == "tgz":
        with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for name, data in members.items():
                    info = tarfile.TarInfo(name)
                    info.size, info.mtime, info.mode = len(data), 0, 0o644
                    tar.addfile(info, io.BytesIO(data))
    elif kind == "zip":
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in members.items():
                zf.writestr(zipfile.ZipInfo(name, date_time=_ZIP_EPOCH), data, zipfile.ZIP_DEFLATED)
    else:
        raise ValueError(f"archives are 'tgz' or 'zip', not {kind!r}")
    return buffer.getvalue()
