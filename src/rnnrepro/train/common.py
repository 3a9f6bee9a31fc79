"""What every trainer shares: the device, the run folder's files and the provenance in metrics.json."""

from __future__ import annotations

import csv
import ctypes
import io
import json
import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import torch

from .. import precision
from ..configuration import ConfigError, project_root
from ..machine import cpu_model
from ..environment_variables import GIT_SHA_ENV
from .files import write_atomic, write_text_atomic

HISTORY = "history.csv"
# glibc's mallopt(3) parameters
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device: cuda was asked for but no CUDA device is visible; use `device: auto` or cpu")
    return torch.device(name)


def git_sha() -> str:
    """The commit of the code that runs (``-dirty`` with uncommitted changes to tracked files). A machine
    that gets a copy of the working tree without its history (a GPU lent for a session) states it in
    RNNREPRO_GIT_SHA instead, as the sending checkout's ``git rev-parse HEAD`` of a clean tree."""
    if os.environ.get(GIT_SHA_ENV, "").strip():
        return os.environ[GIT_SHA_ENV].strip()
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project_root(), capture_output=True, text=True,
                             check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=project_root(),
                               capture_output=True, text=True, check=True).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# The vector extensions that decide which kernels torch and oneDNN run (and so a CPU result's last bits).
VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                "amx_bf16", "amx_tile")


def cpu_identity() -> dict:
    """The CPU beyond its model name: vendor, family, model and stepping (which tell two CPUs of one
    marketing name apart), the vector extensions it has of those that matter here, and the one torch's
    CPU kernels run with (``torch.backends.cpu.get_cpu_capability``: DEFAULT, AVX2, AVX512, ...)."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if not key and fields:
                break  # the first processor's block is enough
            fields.setdefault(key, value.strip())
    except OSError:
        pass
    flags = set(fields.get("flags", "").split())
    return {"cpu_vendor": fields.get("vendor_id"), "cpu_family": fields.get("cpu family"),
            "cpu_model_number": fields.get("model"), "cpu_stepping": fields.get("stepping"),
            "cpu_flags": [flag for flag in VECTOR_FLAGS if flag in flags],
            "cpu_capability": torch.backends.cpu.get_cpu_capability()}


def machine(device: torch.device) -> dict:
    """The hardware a result was measured on: a timing or a wall time means little without it. The
    load average at the end tells whether other work shared the CPU."""
    return {"cpu": cpu_model(), **cpu_identity(), "cpus": os.cpu_count(), "threads": torch.get_num_threads(),
            "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
            "load_average": [round(load, 2) for load in os.getloadavg()]}


def provenance(device: torch.device) -> dict:
    return {
        "git_sha": git_sha(), "torch_version": torch.__version__, "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "machine": machine(device),
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def keep_freed_memory() -> None:
    """Let freed memory serve the next allocation instead of going back to the operating system
    (Linux with glibc; elsewhere nothing changes).

    PyTorch's CPU allocator keeps no cache, and glibc gives every block above 32 MB fresh pages from the
    kernel (mmap) and returns them when the block is freed (munmap). A training step that allocates the
    same large tensors every time (the mixture-of-softmaxes head at the paper's shapes: several of
    504 MB) then pays a page fault for every 4 kB of them, every step: the lrn speed job spent as much
    time in the kernel as in its arithmetic. Served from the heap instead, and with the heap not trimmed
    after each step, the pages are faulted in once. The process keeps its peak memory until it exits.
    """
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return
    libc = ctypes.CDLL(None)
    libc.mallopt(M_MMAP_MAX, 0)
    libc.mallopt(M_TRIM_THRESHOLD, -1)  # -1: never trim (mallopt(3))


def start_run(run_dir: Path, cfg: dict) -> None:
    """Save the resolved config in the run folder; set the seed, the matmul precision and the memory
    reuse (:func:`keep_freed_memory`)."""
    write_text_atomic(run_dir / "config.json", json.dumps(cfg, indent=2) + "\n")
    keep_freed_memory()
    torch.manual_seed(cfg["seed"])
    precision.apply(cfg["precision"])


def write_history(run_dir: Path, history: list[dict]) -> None:
    """history.csv with one row per entry, atomically (the trainer rewrites it after every validation
    check); no rows: no file."""
    path = Path(run_dir) / HISTORY
    if not history:
        path.unlink(missing_ok=True)
        return
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=list(history[0]))
    writer.writeheader()
    writer.writerows(history)
    write_text_atomic(path, table.getvalue())


def write_run_outputs(run_dir: Path, cfg: dict, state_dict: dict, history: list[dict], metrics: dict) -> None:
    """config.json again, model.pt (weights with the config), history.csv and, last, metrics.json (which
    marks the cell done), each atomically. Every output the workflow declares is written here at the end,
    so one that Snakemake removed while the cell trained (another run that planned the same job) is back."""
    write_text_atomic(run_dir / "config.json", json.dumps(cfg, indent=2) + "\n")
    write_atomic(run_dir / "model.pt", lambda f: torch.save({"config": cfg, "state_dict": state_dict}, f))
    write_history(run_dir, history)
    write_text_atomic(run_dir / "metrics.json", json.dumps(metrics, indent=2) + "\n")
