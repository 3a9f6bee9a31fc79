"""What every trainer shares: the device, the run folder's files and the provenance in metrics.json."""

from __future__ import annotations

import csv
import io
import json
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


def provenance(device: torch.device) -> dict:
    return {
        "git_sha": git_sha(), "torch_version": torch.__version__, "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def start_run(run_dir: Path, cfg: dict) -> torch.device:
    """Save the resolved config in the run folder; set threads, the seed and the matmul precision;
    returns the device."""
    write_text_atomic(run_dir / "config.json", json.dumps(cfg, indent=2) + "\n")
    torch.set_num_threads(cfg["threads"])
    torch.manual_seed(cfg["seed"])
    precision.apply(cfg["precision"])
    return pick_device(cfg["device"])


def write_run_outputs(run_dir: Path, cfg: dict, state_dict: dict, history: list[dict], metrics: dict) -> None:
    """model.pt (weights with the config), history.csv (one row per entry) and metrics.json, each atomically."""
    write_atomic(run_dir / "model.pt", lambda f: torch.save({"config": cfg, "state_dict": state_dict}, f))
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=list(history[0]))
    writer.writeheader()
    writer.writerows(history)
    write_text_atomic(run_dir / "history.csv", table.getvalue())
    write_text_atomic(run_dir / "metrics.json", json.dumps(metrics, indent=2) + "\n")
