"""Resumable training state.

The resume checkpoint lives in ``<run dir>/checkpoint/`` -- outside the files Snakemake declares as
outputs, which it deletes before re-running a failed or killed job. It is written atomically
(rnnrepro.train.files) after every validation check and, on SIGTERM, at the next batch boundary, and
holds everything needed to continue bit for bit: weights, optimizer, RNG states, the progress and the
task's own state (averaging, BPTT draws, the carried hidden state). A checkpoint written for a
different config is never resumed. A file that cannot be read back (truncated, overwritten, written
by another version of the code) is a :class:`DamagedCheckpoint`, which names it.

A finished cell's ``model.pt`` (its config and best weights) is read by whatever builds on it (a
finetuning cell, the evaluations, the notebooks that read weights) through :func:`load_weights`,
whose error for a damaged one names the file, what reads it and the fix.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch

from ..analysis.run_files import REBUILD_WEIGHTS
from .files import write_atomic

LAST = "last.pt"
BEST = "best.pt"
DAMAGED_SUFFIX = ".damaged"


class DamagedCheckpoint(RuntimeError):
    """A checkpoint or weights file exists but cannot be loaded."""

    def __init__(self, path: Path, cause: str):
        super().__init__(f"{path} is damaged ({cause})")
        self.path, self.cause = Path(path), cause


def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoint"


def save_atomic(obj, path: Path) -> None:
    write_atomic(path, lambda f: torch.save(obj, f))


def load(path: Path, device: torch.device, required: tuple[str, ...] = ()):
    """A file we wrote (plain containers of tensors and numbers); a dict holding ``required`` if given."""
    try:
        saved = torch.load(path, map_location=device, weights_only=False)
    except FileNotFoundError:
        raise
    except Exception as e:  # noqa: BLE001 -- truncation and garbage surface as many exception types
        said = str(e).strip().splitlines()[0].split(". ")[0] if str(e).strip() else ""  # torch adds paragraphs
        raise DamagedCheckpoint(path, f"{type(e).__name__}: {said}") from None
    missing = [key for key in required if not isinstance(saved, dict) or key not in saved]
    if missing:
        raise DamagedCheckpoint(path, f"it holds no {', '.join(missing)}")
    return saved


def load_weights(path: Path, device: torch.device | str, reader: str) -> dict:
    """A cell's model.pt: ``{"config": ..., "state_dict": ...}``. ``reader`` says what reads it, for the
    error when it is damaged ("the cell this one finetunes")."""
    try:
        return load(path, torch.device(device), ("config", "state_dict"))
    except DamagedCheckpoint as e:
        raise DamagedCheckpoint(path, f"{e.cause}; it is the weights of {reader}: {REBUILD_WEIGHTS}") from None


def weights_digest(path: Path, reader: str) -> str:
    """sha256 of the weights in a cell's model.pt: names, dtypes, shapes and values, not the config saved
    beside them (a parent whose outputs were rewritten with the same weights keeps its digest)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(load_weights(path, "cpu", reader)["state_dict"].items()):
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        digest.update(tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def move_aside(path: Path) -> Path:
    """Rename a damaged file to ``<name>.damaged`` (kept for inspection, never read again)."""
    aside = path.with_name(path.name + DAMAGED_SUFFIX)
    path.replace(aside)
    return aside


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore :func:`rng_state`. The states are byte tensors that torch wants on the CPU, while a
    checkpoint loaded onto a GPU (map_location) brings every tensor there, these too."""
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([generator_state.cpu() for generator_state in state["cuda"]])
