"""Many short `snakemake` command lines (dry runs), each in a process of its own forked from one that
has already imported Snakemake: the import is about half of a dry run's time, so the README test
pays it once instead of once per command. Each run is the `snakemake` program's own entry point
(`snakemake.cli.main`) with its own working directory, environment and output file, as if started
from a shell. Deliberately imports nothing of the project, so each run reads the project copy it
runs in."""

from __future__ import annotations

import multiprocessing
import os
import sys
from pathlib import Path


def _run(job: tuple[str, list[str], dict[str, str], str]) -> int:
    cwd, arguments, env, output = job
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.argv = ["snakemake", *arguments]
    from snakemake.cli import main

    try:
        main(arguments)
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def run_all(jobs: list[tuple[Path, list[str], dict[str, str], Path]], workers: int = 2) -> list[tuple[int, str]]:
    """(exit status, stdout and stderr) of each job (cwd, arguments, environment, output file)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["snakemake.cli"])
    with context.Pool(workers, maxtasksperchild=1) as pool:
        codes = pool.map(_run, [(str(cwd), args, env, str(out)) for cwd, args, env, out in jobs], chunksize=1)
    return [(code, Path(out).read_text(errors="replace")) for code, (_, _, _, out) in zip(codes, jobs)]
