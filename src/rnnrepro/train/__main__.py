"""Train one cell: ``python -m rnnrepro.train --run-dir DIR --config CONFIG --device auto --threads 2``.

CONFIG is the cell's resolved config (JSON text or a path to a JSON file), as the train rule builds it
from the study file; its ``task`` picks the trainer. ``--device`` and ``--threads`` say where it runs. Outputs: see the trainer's module
(rnnrepro.train.language_model for `lm`, rnnrepro.train.autocomplete for `autocomplete`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

from .. import console, gpus, precision
from ..cells import is_outside_cell
from ..custom_cells import where_it_failed
from ..configuration import ConfigError, check_checkout, read_json_argument, validate_cell_config
from ..data.registry import DataError
from .autocomplete import train_autocomplete
from .checkpoint import DamagedCheckpoint, checkpoint_dir
from ..runtime import add_runtime_arguments, start_runtime
from .files import RunFolderError
from .language_model import train_language_model
from .loop import TrainingDiverged, TrainingInterrupted

EXIT_INTERRUPTED = 143  # 128 + SIGTERM, what a scheduler expects from a job it terminated
EXIT_CTRL_C = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C
TRAINERS = {"lm": train_language_model, "autocomplete": train_autocomplete}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m rnnrepro.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", required=True, type=Path, help="the cell's run folder")
    parser.add_argument("--config", required=True, help="resolved cell config: JSON text or a .json file")
    add_runtime_arguments(parser)
    return parser.parse_args(argv)


def read_config(text: str) -> dict:
    cfg, source = read_json_argument(text)
    return validate_cell_config(cfg, source)


def check_precision(cfg: dict, device: torch.device) -> None:
    """Before anything is written: can this machine run the cell at the config's precision?"""
    a = cfg["architecture"]
    try:
        precision.check_runs(a["cell"], a["cell_options"], a["embedding_size"], a["hidden_size"], cfg["precision"],
                             device)
    except precision.PrecisionUnsupported as e:
        raise precision.PrecisionUnsupported(f"model {cfg['model']} of study {cfg['study']}: {e}") from None


def out_of_memory_advice(run_dir: Path, error: BaseException) -> str:
    """What to do when the GPU ran out of memory: fewer cells on it, or, alone, a larger GPU."""
    try:
        per_gpu = gpus.jobs_per_gpu()
    except ValueError:
        per_gpu = gpus.DEFAULT_JOBS_PER_GPU
    shared = os.environ.get(gpus.JOBS_PER_GPU_ENV, "").strip() or f"{gpus.DEFAULT_JOBS_PER_GPU} (the default)"
    fix = (f"Run again with fewer jobs per GPU, e.g. {gpus.JOBS_PER_GPU_ENV}=1 (the default; and `--resources "
           f"gpu=1` per GPU where you set it yourself)" if per_gpu > 1 else
           "This cell alone does not fit the GPU: run it on one with more memory, or lower the recipe's "
           "batch_size in its study file (a changed recipe starts the cell afresh)")
    return (f"cell {run_dir}: the GPU ran out of memory ({str(error).splitlines()[0]}). Training jobs that "
            f"share one GPU: {gpus.JOBS_PER_GPU_ENV}={shared}. At the paper's sizes one job holds about 6-14 GiB "
            f"(its CUDA graphs, one per BPTT length; docs/gpu.md): on an 80 GB H100 eight jobs ran out of memory "
            f"and three did not. {fix}; the cell resumes from its last checkpoint in {checkpoint_dir(run_dir)}.")


def is_cpu_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is the host running out of memory: Python's MemoryError, or torch's CPU allocator
    ("DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes")."""
    return isinstance(error, MemoryError) or (isinstance(error, RuntimeError) and (
        "DefaultCPUAllocator" in str(error) or "can't allocate memory" in str(error)))


def cpu_out_of_memory_advice(cfg: dict | None, run_dir: Path, error: BaseException) -> str:
    """What to do when the machine's memory ran out: the cell, its size, and what to lower."""
    cfg = cfg or {}
    a, r = cfg.get("architecture") or {}, cfg.get("recipe") or {}
    size = ", ".join(f"{key} {value}" for key, value in (
        ("layers", a.get("layers")), ("hidden_size", a.get("hidden_size")), ("embedding_size", a.get("embedding_size")),
        ("batch_size", r.get("batch_size")), ("bptt", r.get("bptt")), ("eval_batch_size", r.get("eval_batch_size")))
        if value is not None)
    said = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return (f"cell {run_dir} (model {cfg.get('model', '?')} of study {cfg.get('study', '?')}): the machine ran out "
            f"of memory ({said}). Its size: {size or 'unknown'}. Run fewer jobs side by side (a lower --cores or "
            f"--jobs: each job holds its own model, batches and activations), or lower the recipe's batch_size "
            f"or bptt (or the model's width) in its study file's budget (a changed recipe starts the cell "
            f"afresh); the cell resumes from its last checkpoint in {checkpoint_dir(run_dir)}.")


def main(argv=None) -> int:
    args = parse_args(argv)
    console.setup_logging()
    cfg = None
    try:
        check_checkout()
        cfg = read_config(args.config)
        device = start_runtime(args)
        check_precision(cfg, device)
        TRAINERS[cfg["task"]](args.run_dir, cfg, device)
    except (ConfigError, DataError, TrainingDiverged, RunFolderError, DamagedCheckpoint, FileNotFoundError,
            precision.PrecisionUnsupported) as e:
        print(f"[rnnrepro] error: {e}", file=sys.stderr)
        return 1
    except torch.OutOfMemoryError as e:
        print(f"[rnnrepro] error: {out_of_memory_advice(args.run_dir, e)}", file=sys.stderr)
        return 1
    except TrainingInterrupted as e:
        print(f"[rnnrepro] {e}", file=sys.stderr)
        return EXIT_CTRL_C if e.by == "Ctrl-C" else EXIT_INTERRUPTED
    except KeyboardInterrupt:
        print(f"[rnnrepro] {args.run_dir}: stopped by Ctrl-C; a rerun resumes from its last checkpoint "
              f"({checkpoint_dir(args.run_dir)})", file=sys.stderr)
        return EXIT_CTRL_C
    except (MemoryError, RuntimeError) as e:
        if not is_cpu_out_of_memory(e):
            failed = custom_cell_failure(cfg, args.run_dir, e)
            if failed is None:
                raise
            print(f"[rnnrepro] error: {failed}", file=sys.stderr)
            return 1
        print(f"[rnnrepro] error: {cpu_out_of_memory_advice(cfg, args.run_dir, e)}", file=sys.stderr)
        return 1
    except Exception as e:
        failed = custom_cell_failure(cfg, args.run_dir, e)
        if failed is None:
            raise
        print(f"[rnnrepro] error: {failed}", file=sys.stderr)
        return 1
    return 0


def custom_cell_failure(cfg: dict | None, run_dir: Path, error: Exception) -> str | None:
    """One line for an error raised inside a cell of your own (``module:Class``): the cell, the line of
    its file and the error, instead of a traceback through the package; None for any other error."""
    cell = ((cfg or {}).get("architecture") or {}).get("cell", "")
    if not is_outside_cell(cell) or (where := where_it_failed(cell, error)) is None:
        return None
    said = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return (f"cell {run_dir}: the cell of your own {cfg['model']!r} ({cell}) raised {type(error).__name__}"
            f"{': ' + said if said else ''} at {where}, while training. Fix it there: the dry run tries it on a "
            f"short window and one as long as the recipe's (docs/custom_cells.md)")


if __name__ == "__main__":
    sys.exit(console.run_command(main))
