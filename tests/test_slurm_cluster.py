"""The test SLURM's own housekeeping, which needs no SLURM: its daemons end with the test process
that started them, however that process ends (tests/slurm_cluster.py)."""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import slurm_cluster


def alive(pid: int) -> bool:
    """Running, not ended (a process whose parent has gone may stay a zombie until it is reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs util-linux's setpriv")
def test_a_daemon_ends_when_the_test_process_that_started_it_is_killed():
    starter = textwrap.dedent(f"""
        import subprocess, sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import slurm_cluster
        daemon = subprocess.Popen(slurm_cluster.ending_with_this_process(["sleep", "120"]))
        print(daemon.pid, flush=True)
        time.sleep(120)
    """)
    test_process = subprocess.Popen([sys.executable, "-c", starter], stdout=subprocess.PIPE, text=True)
    daemon = int(test_process.stdout.readline())
    time.sleep(0.2)  # setpriv has set the signal and exec'd sleep
    assert alive(daemon)
    test_process.kill()  # as an interrupted run's worker ends: no teardown
    test_process.wait()
    deadline = time.time() + 10
    while alive(daemon) and time.time() < deadline:
        time.sleep(0.05)
    ended = not alive(daemon)
    if not ended:
        os.kill(daemon, signal.SIGKILL)
    assert ended, "the daemon outlived the process that started it"


def test_without_setpriv_the_daemon_runs_as_it_is(monkeypatch):
    monkeypatch.setattr(slurm_cluster.shutil, "which", lambda name: None)
    assert slurm_cluster.ending_with_this_process(["slurmd", "-D"]) == ["slurmd", "-D"]
