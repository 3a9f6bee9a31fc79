"""``progress.json``: where a training cell stands, written by its trainer as it goes.

rnnrepro.train.loop keeps this small file in the run folder, written atomically (rnnrepro.train.files):
when the cell starts or resumes, at every validation check, at every epoch's start, every
``HEARTBEAT_SECONDS`` from a background thread (through long validations and final evaluations
too), and when the cell ends. ``python -m rnnrepro.status`` reads it; nothing parses the training log.

Keys:
  state            running, interrupted (SIGTERM or Ctrl-C), failed, or done
  phase            starting (reading the data, building the model), training, validating, final
                   evaluation (while running)
  cell             study/corpus/model/fraction/seed
  epoch, epochs    the epoch in progress (1-based) and the recipe's epochs; epochs_done
  batch, batches_per_epoch   batches done in this epoch, and per epoch (language models: estimated
                   from the batches so far, as their BPTT length varies)
  iteration        batches done in all epochs
  train_loss       the mean training loss of the batches since the last validation check (language
                   models, which check once an epoch: of this epoch so far)
  val_loss, val_ppl          the last validation check's (val_ppl for language models only)
  best_val_loss, best_val_ppl  the lowest validation loss so far, and its perplexity
  seconds          wall time of the cell so far, over every attempt
  eta_seconds      about how long training should still take at the speed so far, assuming every
                   planned epoch runs (early stopping may end it sooner; the final evaluation excluded)
  pid, host        the training process and the machine it runs on
  started_at, updated_at     this attempt's start and the last write (ISO 8601, UTC)
  error            when failed: the error
  stopped_by       when interrupted: what stopped it (SIGTERM, Ctrl-C)

Beside it, ``trainer.lock``: the trainer holds an exclusive ``flock`` on it for as long as it runs, and
the kernel lets go of it when the process ends in any way (SIGKILL included). :func:`another_trainer`
asks it (and, for a folder without one, the record's process and heartbeat) before anything touches the
cell: the trainer before it starts, and the workflow when it plans the cell's jobs, before Snakemake
removes a job's outputs.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from .files import RunFolderError, advice, write_text_atomic

NAME = "progress.json"
LOCK = "trainer.lock"
STATES = ("running", "interrupted", "failed", "done")
HEARTBEAT_SECONDS = 30
LOGGER = logging.getLogger(__name__)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class DamagedProgressFile(ValueError):
    """progress.json exists but cannot be read; the message says how and what to do."""


def write(run_dir: Path, record: dict) -> None:
    write_text_atomic(Path(run_dir) / NAME, json.dumps(record, indent=1) + "\n")


def read(run_dir: Path) -> dict | None:
    """The cell's progress record, or None when its trainer has not written one."""
    path = Path(run_dir) / NAME
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        problem = f"is not valid JSON ({e})"
    else:
        if isinstance(record, dict) and record.get("state") in STATES:
            return record
        problem = f"has no state (one of {', '.join(STATES)})"
    raise DamagedProgressFile(f"{NAME} {problem}: the cell's state is unknown. Rerun its target: training "
                              f"resumes from its checkpoint and writes the file anew")


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: nothing is sent, only whether the process exists is checked
    except ProcessLookupError:
        return False
    except OSError:  # another user's process, for one
        return True
    return True


def is_trainer(pid: int) -> bool:
    """Whether process ``pid`` runs this package (its command line names rnnrepro): a progress.json left by
    a killed trainer may name a pid the system has since given to an unrelated process. True where the
    command line cannot be read (no /proc)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return Path("/proc/self").exists() is False  # no such process, or no /proc at all
    except OSError:
        return True
    return b"rnnrepro" in command


def hold_lock(run_dir: Path) -> int | None:
    """Take the cell's trainer.lock for this process: its open descriptor (the lock lasts until it is
    closed or the process ends), or None when another process holds it."""
    path = Path(run_dir) / LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise RunFolderError(f"cannot write {path}: {e.strerror or e}. {advice(path, e)}.") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)  # who holds it, for another_trainer's message
    os.write(fd, f"pid {os.getpid()}, started {now_iso()}\n".encode())
    return fd


def _lock_holder(path: Path) -> str | None:
    """Who holds the lock file ``path`` ("pid N, started T"; "" when it is free; None when there is no
    such file)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError:
        return ""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a free lock is taken and given back at once
        return ""
    except BlockingIOError:
        return os.read(fd, 200).decode(errors="replace").strip() or "a process"
    finally:
        os.close(fd)


def another_trainer(run_dir: Path, stale_seconds: float = 4 * HEARTBEAT_SECONDS) -> str | None:
    """Who else trains this cell now (None when nobody does): the process that holds its trainer.lock,
    else a live process on this machine whose progress.json says running and whose heartbeat is fresh
    (a trainer of a version without the lock, or one whose lock file was deleted under it). Two trainers
    of one cell write the same checkpoint and outputs, and the Snakemake that sees its job fail deletes
    what the other wrote."""
    holder = _lock_holder(Path(run_dir) / LOCK)
    if holder:
        return holder
    try:
        record = read(run_dir)
    except (DamagedProgressFile, OSError):  # unreadable, or no folder there: the cell's own errors say so
        return None
    if not record or record["state"] != "running" or record.get("host") != socket.gethostname():
        return None
    pid = record.get("pid")
    try:
        age = datetime.now(timezone.utc).timestamp() - datetime.fromisoformat(record["updated_at"]).timestamp()
    except (KeyError, TypeError, ValueError):
        return None
    if (not isinstance(pid, int) or pid == os.getpid() or age > stale_seconds or not process_exists(pid)
            or not is_trainer(pid)):
        return None
    return f"pid {pid}, started {record.get('started_at', '?')}"


class ProgressFile:
    """The run folder's progress.json, kept current while the cell runs.

    ``snapshot()`` returns the keys that change (epoch, batch, losses, ...); it is called at every write,
    from the training thread or from the heartbeat thread, so it must only read. The training loop sets
    its own once it exists.
    """

    def __init__(self, run_dir: Path, cell: str, snapshot: Callable[[], dict]):
        self.run_dir, self.snapshot = Path(run_dir), snapshot
        self.identity = {"cell": cell, "pid": os.getpid(), "host": socket.gethostname(), "started_at": now_iso()}
        self.state, self.phase, self.ending = "running", "starting", {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def record(self) -> dict:
        return {"state": self.state, **({"phase": self.phase} if self.state == "running" else {}),
                **self.identity, **self.snapshot(), "updated_at": now_iso(), **self.ending}

    def write(self, phase: str | None = None) -> None:
        with self._lock:
            if phase is not None:
                self.phase = phase
            write(self.run_dir, self.record())

    def end(self, state: str, **why: str) -> None:
        """The last write of this attempt (``why``: error=..., stopped_by=...). A run folder that cannot be
        written is not reported again here: the cell's own error names it."""
        self.stop()
        self.state, self.ending = state, why
        try:
            self.write()
        except RunFolderError:
            pass
        except Exception as e:  # noqa: BLE001 -- never hide the cell's own error behind this one
            LOGGER.warning(f"warning: could not record the cell's end in {self.run_dir / NAME}: {e!r}")

    # ---- the heartbeat -------------------------------------------------------------------
    def start(self) -> None:
        self.write()
        self._heartbeat = threading.Thread(target=self._beat, name="progress.json heartbeat", daemon=True)
        self._heartbeat.start()

    def _beat(self) -> None:
        warned = False
        while not self._stopped.wait(HEARTBEAT_SECONDS):
            try:
                self.write()
            except RunFolderError as e:  # a lasting failure stops the training thread's next write too
                if not warned:
                    LOGGER.warning(f"warning: {e}")
                    warned = True

    def stop(self) -> None:
        self._stopped.set()
        if self._heartbeat is not None and self._heartbeat is not threading.current_thread():
            self._heartbeat.join()
