"""Safe extraction of the few members a dataset needs from a .tgz or .zip download.

Every entry of the archive is checked before anything is written: an entry whose path, or whose
link target, would land outside the target folder (absolute paths, ``..``, links pointing out)
makes the whole archive refused, because a download that carries one is not the file the
registry describes. Only the requested members are then written, as plain files.
"""

from __future__ import annotations

import hashlib
import posixpath
import shutil
import tarfile
import zipfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from .registry import DataError


class UnsafeArchiveError(DataError):
    pass


def member_key(name: str) -> str:
    """Archive names compare without a leading './' (simple-examples.tgz stores './simple-examples/...')."""
    return posixpath.normpath(name)


def _check_inside(archive: Path, member: str, path: str, target: Path, what: str) -> None:
    if PurePosixPath(path).is_absolute() or (len(path) > 1 and path[1] == ":"):
        raise UnsafeArchiveError(
            f"{archive}: member {member!r} has an absolute {what} {path!r}; refusing to extract this "
            "archive (it is not the file the registry describes: delete it and fetch again)"
        )
    resolved = (target / path).resolve()
    if not resolved.is_relative_to(target.resolve()):
        raise UnsafeArchiveError(
            f"{archive}: member {member!r} has a {what} {path!r} that escapes the extraction folder; "
            "refusing to extract this archive (delete it and fetch again from another mirror)"
        )


def _check_tar(archive: Path, tar: tarfile.TarFile, target: Path) -> None:
    for entry in tar.getmembers():
        _check_inside(archive, entry.name, entry.name, target, "path")
        if entry.issym():
            # A symlink's target is relative to the folder holding the link.
            link = entry.linkname
            if not posixpath.isabs(link):
                link = posixpath.join(posixpath.dirname(entry.name), link)
            _check_inside(archive, entry.name, link, target, "symlink target")
        elif entry.islnk():
            # A hard link's target is another archive path.
            _check_inside(archive, entry.name, entry.linkname, target, "hard-link target")


def _check_zip(archive: Path, zf: zipfile.ZipFile, target: Path) -> None:
    for name in zf.namelist():
        _check_inside(archive, name, name.replace("\\", "/"), target, "path")


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
    wanted = list(dict.fromkeys(members))
    extracted: dict[str, Path] = {}
    try:
        if kind == "tgz":
            with tarfile.open(archive, "r:*") as tar:
                _check_tar(archive, tar, target)
                entries = {member_key(e.name): e for e in tar.getmembers() if e.isfile()}
                for name in wanted:
                    entry = entries.get(member_key(name))
                    if entry is None:
                        raise _missing(archive, name, entries)
                    out = target / member_key(name)
                    out.parent.mkdir(parents=True, exist_ok=True)
                    with tar.extractfile(entry) as src, open(out, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                    extracted[name] = out
        elif kind == "zip":
            with zipfile.ZipFile(archive) as zf:
                _check_zip(archive, zf, target)
                entries = {member_key(i.filename): i for i in zf.infolist() if not i.is_dir()}
                for name in wanted:
                    info = entries.get(member_key(name))
                    if info is None:
                        raise _missing(archive, name, entries)
                    out = target / member_key(name)
                    out.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(info) as src, open(out, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                    extracted[name] = out
        else:
            raise ValueError(f"extract_members handles 'tgz' and 'zip', not {kind!r}")
    except (tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
        raise DataError(
            f"{archive} is not a readable {kind} archive ({exc}); delete it and fetch again"
        ) from None
    return extracted


def member_digests(archive: Path, kind: str, members: Iterable[str]) -> dict[str, str]:
    """sha256 of each requested member that the archive holds (none if it is unreadable)."""
    wanted = {member_key(m): m for m in members}
    digests: dict[str, str] = {}
    try:
        if kind == "tgz":
            with tarfile.open(archive, "r:*") as tar:
                for entry in tar.getmembers():
                    if entry.isfile() and member_key(entry.name) in wanted:
                        with tar.extractfile(entry) as f:
                            digests[wanted[member_key(entry.name)]] = hashlib.file_digest(f, "sha256").hexdigest()
        elif kind == "zip":
            with zipfile.ZipFile(archive) as zf:
                for info in zf.infolist():
                    if member_key(info.filename) in wanted:
                        with zf.open(info) as f:
                            digests[wanted[member_key(info.filename)]] = hashlib.file_digest(f, "sha256").hexdigest()
        else:
            raise ValueError(f"member_digests handles 'tgz' and 'zip', not {kind!r}")
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError):
        return {}
    return digests
