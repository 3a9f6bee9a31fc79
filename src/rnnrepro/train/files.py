"""Writing a run's files so that a failed write loses nothing.

Every file (config.json, checkpoints, model.pt, history.csv, metrics.json) is written to a temporary
sibling, flushed to disk, and only then renamed over the old one (``os.replace`` is atomic on POSIX):
a full disk, a folder that cannot be written or a kill mid-write leaves the previous good file as it
was, and a write that fails with an error removes its ``.tmp`` file. A write that fails for a reason of the operating system (an
OSError, or an error raised from one: torch wraps a full disk in a RuntimeError) is reported as
:class:`RunFolderError`, naming the path and what to do, instead of torch's "unexpected pos" or
"PytorchStreamWriter failed writing file" or a bare OSError.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


class RunFolderError(RuntimeError):
    """A run file could not be written (full disk, no permission, a file where a folder should be)."""


def advice(path: Path, error: OSError) -> str:
    """What to do about ``error`` raised while writing ``path``."""
    folder = path.parent
    if error.errno == errno.ENOSPC or error.errno == errno.EDQUOT:
        return (f"Free space on the disk that holds {folder} (or point results/ at a bigger one) and rerun; "
                f"the files written before, the resume checkpoint included, are intact")
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"Make {folder} writable by this user (e.g. `chmod -R u+w {folder}`) and rerun"
    if error.errno in (errno.ENOTDIR, errno.EEXIST):
        return (f"A file stands where a folder of {path} should be: move that file away (or choose another "
                f"results folder) and rerun")
    if error.errno == errno.EISDIR:
        return f"A folder stands where the file {path} should be: move it away and rerun"
    return "Fix the cause above and rerun"


def os_error_in(error: BaseException) -> OSError | None:
    """The first OSError in ``error``'s chain (itself, then what it was raised from or while handling).

    A writer may wrap the operating system's error in its own: ``torch.save`` on a full disk raises
    RuntimeError("... unexpected pos 175232 vs 175184") with the ENOSPC only as its ``__context__``.
    """
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, OSError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def write_atomic(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write ``path`` through ``write(file)``: all of it, or (on any error) none of it."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:  # a half-written .tmp is removed whatever stopped the write, Ctrl-C included
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass  # the folder itself is unusable; the error below names it
        cause = os_error_in(e) if isinstance(e, Exception) else None
        if cause is None:
            raise
        raise RunFolderError(f"cannot write {path}: {cause.strerror or cause}. {advice(path, cause)}.") from None


def write_text_atomic(path: Path, text: str) -> None:
    write_atomic(path, lambda f: f.write(text.encode()))
