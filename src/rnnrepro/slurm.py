"""Whether this Snakemake run goes through the SLURM executor, and whether SLURM is here to take it.

``snakemake --profile profiles/slurm`` submits every job with ``sbatch`` and follows it with ``squeue``
and ``sacct`` (docs/cluster.md). On a machine without them a dry run planned the whole grid without a
word, and a real run failed at its first status check, naming only ``sacct``. The workflow asks
:func:`slurm_problem` when it is parsed: a dry run warns (planning on a laptop before submitting on
the cluster is fine), a real run stops before planning.

Snakemake 9 hands the workflow its executor only when it executes, after the Snakefile is parsed, and
a dry run gets its ``dryrun`` executor instead of the one asked for; so :func:`command_line_executor`
reads the executor from the command line the way Snakemake itself reads it (rnnrepro.command_line).
"""

from __future__ import annotations

import shutil

from .command_line import snakemake_arguments

SLURM_EXECUTOR = "slurm"
#: what the SLURM executor plugin runs on the submitting machine
SLURM_COMMANDS = ("sbatch", "squeue", "sacct")


def command_line_executor(argv: list[str] | None = None) -> str | None:
    """The executor the ``snakemake`` command line ``argv`` (default: this process's) runs its jobs with:
    ``--executor``, else a profile's ``executor:``, else ``local``. None when the process is not the
    snakemake command (Snakemake driven from Python) or its arguments do not parse."""
    args = snakemake_arguments(argv)
    return None if args is None else args.executor or "local"


def slurm_problem(executor: str | None, path: str | None = None) -> str | None:
    """What stops the SLURM executor on this machine (SLURM's commands not on ``path``, default PATH), or
    None: another executor, or SLURM is here."""
    if executor != SLURM_EXECUTOR:
        return None
    missing = [command for command in SLURM_COMMANDS if shutil.which(command, path=path) is None]
    if not missing:
        return None
    return (f"the SLURM executor (profiles/slurm) submits every job with sbatch and follows it with squeue "
            f"and sacct, but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not on PATH: "
            f"this machine has no SLURM. Run the command on the cluster's login node, or run here without "
            f"the profile: `snakemake --cores N all` (with profiles/default, as every run without a "
            f"profile: this machine's cores and GPUs)")
