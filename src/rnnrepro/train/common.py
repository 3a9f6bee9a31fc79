"""What every trainer shares: the device, the run folder's files and the provenance in metrics.json."""

from __future__ import annotations

import csv
import io
import json
import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import torch

from .. import precision
from ..configuration import REPO_ROOT, ConfigError
from .files import write_atomic, write_text_atomic


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device: cuda was asked for but no CUDA device is visible; use `device: auto` or cpu")
    return torch.device(name)


def git_sha() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (``platform.processor()`` is empty on Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(device: torch.device) -> dict:
    """The hardware a result was measured on: a timing or a wall time means little without it. The
    load average at the end tells whether other work shared the CPU."""
    return {"cpu": cpu_model(), "cpus": os.cpu_count(), "threads": torch.get_num_threads(),
            "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
            "load_average": [round(load, 2) for load in os.getloadavg()]}


def provenance(device: torch.device) -> dict:
    return {
        "git_sha": git_sha(), "torch_version": torch.__version__, "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "machine": machine(device),
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def start_run(run_dir: Path, cfg: dict) -> None:
    """Save the resolved config in the run folder; set the seed and the matmul precision."""
    write_text_atomic(run_dir / "config.json", json.dumps(cfg, indent=2) + "\n")
    torch.manual_seed(cfg["seed"])
    precision.apply(cfg["precision"])


def write_run_outputs(run_dir: Path, cfg: dict, state_dict: dict, history: list[dict], metrics: dict) -> None:
    """model.pt (weights with the config), history.csv (one row per entry) and metrics.json, each atomically."""
    write_atomic(run_dir / "model.pt", lambda f: torch.save({"config": cfg, "state_dict": state_dict}, f))
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=list(history[0]))
    writer.writeheader()
    writer.writerows(history)
    write_text_atomic(run_dir / "history.csv", table.getvalue())
    write_text_atomic(run_dir / "metrics.json", json.dumps(metrics, indent=2) + "\n")
