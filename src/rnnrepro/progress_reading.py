"""A cell's progress.json as another process reads it (rnnrepro.train.progress_file writes it): whether
it is well formed, whether the process it names is still training, and times in words. Read by
``status`` and its ``--watch`` view alike.
"""

from __future__ import annotations

import math
import socket
from datetime import datetime

from .train import progress_file

# A running cell's progress.json not rewritten for this long has no live process: the trainer rewrites it
# every HEARTBEAT_SECONDS; the margin covers a loaded machine and a shared file system's delays.
STALE_SECONDS = 4 * progress_file.HEARTBEAT_SECONDS
WATCH_SECONDS = 10.0  # --watch without SECONDS: seconds between refreshes


# progress.json's keys and their types (rnnrepro.train.progress_file); anything else is a damaged file
PROGRESS_NUMBERS = ("epoch", "epochs", "epochs_done", "batch", "batches_per_epoch", "iteration", "train_loss",
                    "val_loss", "val_ppl", "best_val_loss", "best_val_ppl", "seconds", "eta_seconds")
PROGRESS_TEXTS = ("phase", "cell", "host", "started_at", "updated_at", "error", "stopped_by")


def progress_problem(record: dict) -> str | None:
    """How a progress record that parsed as JSON is still unusable (a number written as a string, an
    infinite time left, a pid that is not an integer), or None."""
    for key in PROGRESS_NUMBERS:
        value = record.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value)):
            return f"key {key!r} is {value!r}, not a finite number"
    for key in PROGRESS_TEXTS:
        if record.get(key) is not None and not isinstance(record[key], str):
            return f"key {key!r} is {record[key]!r}, not text"
    pid = record.get("pid")
    if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int)):
        return f"key 'pid' is {pid!r}, not a process id"
    return None


def process_gone(record: dict, now: float) -> str | None:
    """Why a cell whose progress.json says running has no live training process (None while it has one)."""
    try:
        age = now - datetime.fromisoformat(record["updated_at"]).timestamp()
    except (KeyError, TypeError, ValueError):
        age = math.inf
    if age > STALE_SECONDS:
        why = f"progress.json not rewritten for {wall_time(age)}" if math.isfinite(age) else "no heartbeat"
    elif record.get("host") == socket.gethostname() and isinstance(record.get("pid"), int) \
            and not progress_file.process_exists(record["pid"]):
        why = f"its process (pid {record['pid']}) is gone"
    else:
        return None
    return f"no training process ({why}): killed (SIGKILL, out of memory, a lost node) or ended with its Snakemake"


def wall_time(seconds: float | None) -> str:
    if seconds is None:
        return ""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
