"""What every trainer shares: the device and the provenance recorded in metrics.json."""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone

import torch

from ..configuration import REPO_ROOT, ConfigError


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
