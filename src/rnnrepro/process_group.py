"""Work that ends with the process that started it: ``python -m rnnrepro.process_group -- COMMAND ...``.

Runs COMMAND as its child, in a process group of its own, and sends SIGTERM to that whole group (COMMAND
and everything COMMAND started) when its own parent ends in any way, SIGKILL included (Linux's
parent-death signal, ``prctl(PR_SET_PDEATHSIG)``), or when it gets SIGTERM or SIGINT itself. Why a group:
told to stop, Snakemake stops starting jobs but waits for the running ones, and a job's shell that is
killed leaves its trainer running. ``records grow`` starts each unit's Snakemake through this, so a grow
that is killed stops its units as its deadline does: each trainer writes its resume checkpoint and exits.

:func:`end_with_parent` is the parent-death signal alone, for a process that replaces itself with
another (``python -m rnnrepro.gpus run`` before it becomes the trainer): the signal outlives exec.
Elsewhere than Linux there is no such signal, and a killed parent leaves its children running.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

from . import console

PR_SET_PDEATHSIG = 1  # prctl(2)


def end_with_parent(signum: int = signal.SIGTERM) -> bool:
    """Have the kernel send ``signum`` to this process when its parent ends (kept across exec); False
    where the system cannot (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = argv[1:] if argv[:1] == ["--"] else argv
    if not command:
        print("usage: python -m rnnrepro.process_group -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    parent = os.getppid()
    if os.getpgrp() != os.getpid():
        os.setpgid(0, 0)  # a group of its own, so that SIGTERM to the group reaches nobody else

    def stop_the_group(signum=None, frame=None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group's SIGTERM reaches this process too
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        os.killpg(os.getpgrp(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop_the_group)
    signal.signal(signal.SIGINT, stop_the_group)
    end_with_parent(signal.SIGTERM)
    if os.getppid() != parent:  # the parent ended before the signal was asked for
        return 128 + signal.SIGTERM
    try:
        child = subprocess.Popen(command)
    except OSError as e:
        print(f"[rnnrepro] error: cannot run {command[0]!r} ({e.strerror})", file=sys.stderr)
        return 127
    code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(console.run_command(main))
