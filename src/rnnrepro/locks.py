"""Who else is working in this directory: the project's own locks (one ``records grow`` and one ``records
render`` of a budget at a time) and Snakemake's directory lock, each named in words when another process
holds it, with what to do.

The project's locks are ``flock`` on a file under the budget's log folder: they last exactly as long as the
process that took them (ended, killed or crashed, it holds none), and the file names the holder's pid.
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from pathlib import Path

# what Snakemake says when its directory lock is held (snakemake.exceptions.LockException)
SNAKEMAKE_LOCKED = re.compile(r"LockException|Directory cannot be locked")


def hold(path: Path, busy: str) -> int:
    """Take the lock ``path`` for as long as this process runs; returns its open descriptor. Held by another
    process: RuntimeError ``busy`` with ``{holder}`` replaced by what the lock file says of it (its pid and
    start), and nothing done."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = path.read_text().strip() or "another process"
        os.close(fd)
        raise RuntimeError(busy.format(holder=holder)) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
    return fd


def snakemake_processes(directory: Path = Path(".")) -> list[str]:
    """Snakemake processes working in ``directory`` (Linux's /proc; none found elsewhere), as "pid N"."""
    here, found = str(Path(directory).resolve()), []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            words = (proc / "cmdline").read_bytes().split(b"\0")
            if os.readlink(proc / "cwd") == here and any(w.endswith(b"snakemake") for w in words[:3]):
                found.append(f"pid {proc.name}")
        except OSError:  # gone, or another user's
            continue
    return found


def snakemake_lock_problem(log_text: str, directory: Path = Path(".")) -> str | None:
    """What to do where a Snakemake run stopped because another holds the directory lock, or None."""
    if not SNAKEMAKE_LOCKED.search(log_text):
        return None
    running = snakemake_processes(directory)
    where = f"{Path(directory).resolve()}; " + (", ".join(running) if running else "none seen running now")
    return (f"another Snakemake run is working in this directory ({where}; its lock: .snakemake/locks/): wait "
            f"for it, or run `snakemake --unlock` if none is (a run that was killed leaves its lock behind). "
            f"Nothing was changed")
