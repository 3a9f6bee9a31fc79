"""Where and how wide a job runs: ``--device`` and ``--threads`` of the train, evaluation and speed
commands.

They are not part of a cell's or an evaluation's config, because they do not change what is computed:
the workflow passes the run config's ``device`` in the jobs' environment (``RNNREPRO_DEVICE``) and the
job's threads on its command line, never as rule params, so changing either neither reruns a finished
job (Snakemake compares params) nor discards a resume checkpoint (it compares the cell's config).
This module imports no torch until a job starts: the Snakefile reads ``DEVICE_ENV`` at parse time.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
from pathlib import Path

from .environment_variables import DEVICE_ENV, GIT_SHA_ENV  # noqa: F401 (the names the workflow imports here)

DEVICES = ("auto", "cpu", "cuda")

# what a write past the file-size limit leaves in a log: Python's error (it ignores SIGXFSZ), or the shell's
FILE_TOO_LARGE = re.compile(r"File too large|Errno 27\b|File size limit exceeded")


def file_size_limit_problem() -> str | None:
    """What the shell's limit on the size of a file a process writes (``ulimit -f``) stops, where it sets
    one: a cell's model.pt and checkpoints, and the copy Snakemake makes of a job's outputs before it
    reruns the job (``.snakemake/backups/``), are each written whole. None where there is no limit."""
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit == resource.RLIM_INFINITY:
        return None
    return (f"this shell limits each file a process writes to {limit} bytes (`ulimit -f` is {limit // 1024}): "
            f"a larger model.pt, checkpoint or Snakemake's backup of a job's outputs (.snakemake/backups/) "
            f"fails with 'File too large'. Raise it (`ulimit -f unlimited`, or ask your administrator) and run "
            f"again")


def add_runtime_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=DEVICES, default=os.environ.get(DEVICE_ENV) or None,
                        help=f"auto: CUDA when available, else the CPU (default: ${DEVICE_ENV}, which the "
                             f"workflow sets from the run config's `device`)")
    parser.add_argument("--threads", required=True, type=int, help="CPU threads (torch.set_num_threads)")


def start_runtime(args: argparse.Namespace):
    """Apply ``--threads``; returns the torch device of ``--device``."""
    import torch

    from .configuration import ConfigError
    from .train.common import pick_device

    if args.device is None:
        raise ConfigError(f"no device given: pass --device ({', '.join(DEVICES)}) or set {DEVICE_ENV}")
    if args.device not in DEVICES:
        raise ConfigError(f"{DEVICE_ENV}={args.device!r}: use one of {', '.join(DEVICES)}")
    if args.threads < 1:
        raise ConfigError(f"--threads {args.threads}: give at least 1 (the run config's `threads`)")
    torch.set_num_threads(args.threads)
    return pick_device(args.device)
