"""One GPU per training job on a multi-GPU machine: ``python -m rnnrepro.gpus run -- COMMAND ...``.

Snakemake counts GPUs (the ``gpu`` resource) but does not say which GPU a job should use, so every
job would see all of them and start on GPU 0. This wrapper leases a free GPU with a per-GPU lock file
(``fcntl.flock`` on ``<lock dir>/gpu-<id>.lock``), sets ``CUDA_VISIBLE_DEVICES`` to that GPU and
replaces itself with COMMAND. The lock belongs to COMMAND's process from then on, so the kernel
releases it when the training ends in any way (exit, crash, SIGKILL) — no stale locks.

The GPUs to share are those of ``CUDA_VISIBLE_DEVICES`` when it is set (to reserve some GPUs for a
run), else every GPU ``nvidia-smi`` lists. With no GPU, or in a SLURM job allocated one GPU (SLURM
chose it already), COMMAND runs unchanged; within a larger SLURM allocation (``salloc --gpus=4``
and a local Snakemake) the jobs lease its GPUs among themselves. When every GPU is leased the
wrapper waits for one to be released.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Per user and machine: GPU numbers only mean something on one host, and another user's lock files
# would not be writable.
DEFAULT_LOCK_DIR = Path(tempfile.gettempdir()) / f"rnnrepro-gpu-locks-{os.getuid()}"
POLL_SECONDS = 2.0


def detected_gpus() -> list[str]:
    """Indices of the GPUs the NVIDIA driver reports; empty without a driver."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def shared_gpus(environ=os.environ) -> list[str]:
    """The GPUs jobs may lease: CUDA_VISIBLE_DEVICES if set (ids or UUIDs), else all detected."""
    if "CUDA_VISIBLE_DEVICES" in environ:
        return [d.strip() for d in environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
    return detected_gpus()


def gpu_count() -> int:
    """How many training jobs may run at once on this machine's GPUs (profiles/default uses it)."""
    return len(shared_gpus())


def lock_path(lock_dir: Path, gpu: str) -> Path:
    return Path(lock_dir) / f"gpu-{gpu.replace('/', '_')}.lock"


def try_lease(lock_dir: Path, gpus: list[str], holder: dict) -> tuple[str, int] | None:
    """Lock the first free GPU; returns (gpu, open lock fd) or None when all are leased."""
    Path(lock_dir).mkdir(parents=True, exist_ok=True)
    for gpu in gpus:
        fd = os.open(lock_path(lock_dir, gpu), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        # Who holds the GPU, for `python -m rnnrepro.status` and for people reading the folder.
        os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(holder) + "\n").encode())
        return gpu, fd
    return None


def lease(lock_dir: Path, gpus: list[str], holder: dict) -> tuple[str, int]:
    """Wait until a GPU is free and lock it."""
    announced = False
    while (leased := try_lease(lock_dir, gpus, holder)) is None:
        if not announced:
            print(f"[rnnrepro] all GPUs ({', '.join(gpus)}) are leased (locks in {lock_dir}); waiting",
                  file=sys.stderr, flush=True)
            announced = True
        time.sleep(POLL_SECONDS)
    return leased


@contextlib.contextmanager
def gpu_lease(lock_dir: Path = DEFAULT_LOCK_DIR, gpus: list[str] | None = None, holder: dict | None = None):
    """``with gpu_lease() as gpu:`` — a free GPU's id (None without GPUs), locked until the block ends."""
    gpus = shared_gpus() if gpus is None else gpus
    if not gpus:
        yield None
        return
    gpu, fd = lease(lock_dir, gpus, holder or {"pid": os.getpid()})
    try:
        yield gpu
    finally:
        os.close(fd)


def held_leases(lock_dir: Path = DEFAULT_LOCK_DIR) -> dict[str, dict]:
    """GPU id ("slurm-<job>/<id>" within a SLURM allocation) -> holder, for every lock a live process holds."""
    held = {}
    for path in sorted(Path(lock_dir).rglob("gpu-*.lock")):
        gpu = str(path.relative_to(lock_dir).parent / path.stem.removeprefix("gpu-"))
        with open(path) as f:
            try:  # a free lock is taken (shared) and given back at once
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                try:
                    held[gpu] = json.loads(f.read() or "{}")
                except json.JSONDecodeError:
                    held[gpu] = {}
    return held


def allocation_lock_dir(lock_dir: Path, environ=os.environ) -> Path:
    """Jobs share locks only within one SLURM allocation: another allocation's GPU 0 is another GPU."""
    if "SLURM_JOB_ID" in environ:
        return Path(lock_dir) / f"slurm-{environ['SLURM_JOB_ID']}"
    return Path(lock_dir)


def run(command: list[str], lock_dir: Path) -> None:
    """Lease a GPU for COMMAND and exec it (never returns)."""
    gpus = shared_gpus()
    # Nothing to choose: no GPU, or SLURM allocated exactly this job's GPU.
    if not gpus or ("SLURM_JOB_ID" in os.environ and len(gpus) == 1):
        os.execvp(command[0], command)
    lock_dir = allocation_lock_dir(lock_dir)
    holder = {"pid": os.getpid(), "cwd": os.getcwd(), "argv": command}
    gpu, fd = lease(lock_dir, gpus, holder)
    os.set_inheritable(fd, True)  # the lock stays held by COMMAND after exec
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    print(f"[rnnrepro] running on GPU {gpu} (lock {lock_path(lock_dir, gpu)})", file=sys.stderr, flush=True)
    os.execvp(command[0], command)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnrepro.gpus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    run_parser = sub.add_parser("run", help="lease a free GPU and run COMMAND on it")
    run_parser.add_argument("--lock-dir", type=Path, default=DEFAULT_LOCK_DIR,
                            help=f"folder of the per-GPU lock files, shared by all jobs (default {DEFAULT_LOCK_DIR})")
    run_parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("run: give the command after --, e.g. python -m rnnrepro.gpus run -- python -m rnnrepro.train ...")
    try:
        run(command, args.lock_dir)
    except OSError as e:
        print(f"[rnnrepro] error: cannot run {command[0]!r} ({e.strerror}); check the command after --",
              file=sys.stderr)
        return 127
    return 0


if __name__ == "__main__":
    sys.exit(main())
