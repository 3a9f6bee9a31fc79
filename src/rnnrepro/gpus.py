"""A GPU slot per training job on a GPU machine: ``python -m rnnrepro.gpus run -- COMMAND ...``.

Snakemake counts GPU slots (the ``gpu`` resource) but does not say which GPU a job should use, so every
job would see all of them and start on GPU 0. This wrapper leases a free slot with a per-slot lock file
(``fcntl.flock`` on ``<lock dir>/gpu-<id>.lock``, and ``gpu-<id>.slot<k>.lock`` for further slots),
sets ``CUDA_VISIBLE_DEVICES`` to that slot's GPU and replaces itself with COMMAND. The lock belongs to
COMMAND's process from then on, so the kernel releases it when the training ends in any way (exit,
crash, SIGKILL) — no stale locks.

Each GPU has ``jobs_per_gpu`` slots (``--jobs-per-gpu``, or the environment variable
``RNNREPRO_JOBS_PER_GPU`` that profiles/default reads too; default 1): with the cells' GPU fast paths one
training process keeps the GPU busy, and on an H200 two or four reduced-budget PTB cells side by side
gave 0.97-1.00x the total throughput of one (benchmarks/gpu_sharing.py; docs/gpu.md), so sharing a GPU
only adds memory. Slots are filled spreading jobs over the GPUs first (every GPU's
first slot, then every GPU's second, ...), so a machine with fewer jobs than GPUs still gives each its
own GPU. Set more for cells that leave the GPU idle, after measuring them.

The wrapper asks the kernel to send COMMAND SIGTERM when the wrapper's parent, the job's shell, ends
(``prctl(PR_SET_PDEATHSIG)``, kept across exec): a shell that is killed would otherwise leave its trainer
running while the Snakemake that ran it removes the cell's files.

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
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import console
from .process_group import end_with_parent

# Per user and machine: GPU numbers only mean something on one host, and another user's lock files
# would not be writable.
DEFAULT_LOCK_DIR = Path(tempfile.gettempdir()) / f"rnnrepro-gpu-locks-{os.getuid()}"
POLL_SECONDS = 2.0
JOBS_PER_GPU_ENV = "RNNREPRO_JOBS_PER_GPU"
# Measured: N jobs side by side on one GPU give no more throughput than one (docs/gpu.md).
DEFAULT_JOBS_PER_GPU = 1


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
    """How many GPUs this machine's jobs share."""
    return len(shared_gpus())


def jobs_per_gpu(environ=os.environ) -> int:
    """Training jobs that may share one GPU: RNNREPRO_JOBS_PER_GPU, else DEFAULT_JOBS_PER_GPU."""
    raw = environ.get(JOBS_PER_GPU_ENV, "").strip()
    if not raw:
        return DEFAULT_JOBS_PER_GPU
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{JOBS_PER_GPU_ENV}={raw!r}: give a whole number >= 1 of training jobs per GPU "
                         f"(default {DEFAULT_JOBS_PER_GPU}), e.g. {JOBS_PER_GPU_ENV}=2")
    return int(raw)


def gpu_job_slots() -> int:
    """How many training jobs may run at once on this machine's GPUs (profiles/default uses it)."""
    return gpu_count() * jobs_per_gpu()


def lock_path(lock_dir: Path, gpu: str, slot: int = 0) -> Path:
    suffix = f".slot{slot}" if slot else ""
    return Path(lock_dir) / f"gpu-{gpu.replace('/', '_')}{suffix}.lock"


def try_lease(lock_dir: Path, gpus: list[str], holder: dict, per_gpu: int = 1) -> tuple[str, int] | None:
    """Lock the first free slot, every GPU's first slot before any second one; returns (gpu, open
    lock fd) or None when all are leased."""
    Path(lock_dir).mkdir(parents=True, exist_ok=True)
    for slot, gpu in ((slot, gpu) for slot in range(per_gpu) for gpu in gpus):
        fd = os.open(lock_path(lock_dir, gpu, slot), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        # Who holds the GPU, for people reading the folder.
        os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(holder) + "\n").encode())
        return gpu, fd
    return None


def lease(lock_dir: Path, gpus: list[str], holder: dict, per_gpu: int = 1) -> tuple[str, int]:
    """Wait until a GPU slot is free and lock it."""
    announced = False
    while (leased := try_lease(lock_dir, gpus, holder, per_gpu)) is None:
        if not announced:
            print(f"[rnnrepro] all {per_gpu} slot(s) of every GPU ({', '.join(gpus)}) are leased "
                  f"(locks in {lock_dir}); waiting",
                  file=sys.stderr, flush=True)
            announced = True
        time.sleep(POLL_SECONDS)
    return leased


@contextlib.contextmanager
def gpu_lease(lock_dir: Path = DEFAULT_LOCK_DIR, gpus: list[str] | None = None, holder: dict | None = None,
              per_gpu: int = 1):
    """``with gpu_lease() as gpu:`` — the id of a GPU with a free slot (None without GPUs), its slot
    locked until the block ends."""
    gpus = shared_gpus() if gpus is None else gpus
    if not gpus:
        yield None
        return
    gpu, fd = lease(lock_dir, gpus, holder or {"pid": os.getpid()}, per_gpu)
    try:
        yield gpu
    finally:
        os.close(fd)


def held_leases(lock_dir: Path = DEFAULT_LOCK_DIR) -> dict[str, dict]:
    """Slot ("<id>" for a GPU's first slot, "<id>.slot<k>" for others, prefixed "slurm-<job>/" within a
    SLURM allocation) -> holder, for every lock a live process holds."""
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


def run(command: list[str], lock_dir: Path, per_gpu: int = 1) -> None:
    """Lease a GPU slot for COMMAND and exec it (never returns). COMMAND gets SIGTERM when this
    wrapper's parent (the job's shell) ends: killed, the job would leave its trainer running while the
    Snakemake that ran it removes the cell's files."""
    parent = os.getppid()
    end_with_parent(signal.SIGTERM)
    if os.getppid() != parent:  # the parent ended before the signal was asked for
        sys.exit(128 + signal.SIGTERM)
    gpus = shared_gpus()
    # Nothing to choose: no GPU, or SLURM allocated exactly this job's GPU.
    if not gpus or ("SLURM_JOB_ID" in os.environ and len(gpus) == 1):
        os.execvp(command[0], command)
    lock_dir = allocation_lock_dir(lock_dir)
    holder = {"pid": os.getpid(), "cwd": os.getcwd(), "argv": command}
    gpu, fd = lease(lock_dir, gpus, holder, per_gpu)
    os.set_inheritable(fd, True)  # the lock stays held by COMMAND after exec
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    print(f"[rnnrepro] running on GPU {gpu} (locks in {lock_dir}, {per_gpu} job(s) per GPU)",
          file=sys.stderr, flush=True)
    os.execvp(command[0], command)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnrepro.gpus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    run_parser = sub.add_parser("run", help="lease a free GPU slot and run COMMAND on it")
    run_parser.add_argument("--lock-dir", type=Path, default=DEFAULT_LOCK_DIR,
                            help=f"folder of the per-slot lock files, shared by all jobs (default {DEFAULT_LOCK_DIR})")
    run_parser.add_argument("--jobs-per-gpu", type=int, default=None,
                            help=f"training jobs that may share one GPU (default: ${JOBS_PER_GPU_ENV}, else "
                                 f"{DEFAULT_JOBS_PER_GPU}); every job of a run must use the same value")
    run_parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("run: give the command after --, e.g. python -m rnnrepro.gpus run -- python -m rnnrepro.train ...")
    if args.jobs_per_gpu is not None and args.jobs_per_gpu < 1:
        parser.error(f"--jobs-per-gpu {args.jobs_per_gpu}: give a whole number >= 1")
    try:
        per_gpu = args.jobs_per_gpu or jobs_per_gpu()
    except ValueError as e:
        parser.error(str(e))
    try:
        run(command, args.lock_dir, per_gpu)
    except OSError as e:
        print(f"[rnnrepro] error: cannot run {command[0]!r} ({e.strerror}); check the command after --",
              file=sys.stderr)
        return 127
    return 0


if __name__ == "__main__":
    sys.exit(console.run_command(main))
