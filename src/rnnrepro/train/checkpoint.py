"""Resumable training state.

The resume checkpoint lives in ``<run dir>/checkpoint/`` — outside the files Snakemake declares as
outputs, which it deletes before re-running a failed or killed job. It is written atomically after
every epoch and, on SIGTERM, at the next batch boundary, and holds everything needed to continue bit
for bit: weights, optimizer, averaging state, RNG states, the position in the epoch and the carried
hidden state. A checkpoint written for a different config is never resumed.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

LAST = "last.pt"
BEST = "best.pt"


def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoint"


def save_atomic(obj, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def load(path: Path, device: torch.device):
    # Our own files, holding plain containers of tensors and numbers.
    return torch.load(path, map_location=device, weights_only=False)


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
