"""A real single-node SLURM for tests: munged, MariaDB + slurmdbd (so sacct works, as on a real
cluster), slurmctld and slurmd on loopback, every file in one temporary folder.

The node has the partitions profiles/slurm expects, ``cpu`` (the default) and ``gpu``, plus
``urgent``, whose jobs preempt the others (those are requeued), and two stand-in GPUs (gres backed
by /dev/null and /dev/zero: SLURM allocates them and sets CUDA_VISIBLE_DEVICES; the tests train on
the CPU). Each daemon runs in the foreground as a child of the test process, so stopping the
cluster ends exactly the processes it started.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ["munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd"]
CLIENTS = ["sbatch", "srun", "squeue", "sacct", "sacctmgr", "scancel", "sinfo"]
INSTALL_HINT = "apt-get install slurm-wlm slurmdbd munge mariadb-server (what .ci/run does)"
NODE_MEMORY_MB = 64000  # declared, not enforced: the profile's memory requests must fit


def unavailable_reason() -> str | None:
    """Why a test SLURM cannot be started here, or None."""
    missing = [b for b in DAEMONS + CLIENTS if shutil.which(b) is None]
    if not (shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")):
        missing.append("mariadb-install-db")
    if missing:
        return f"SLURM test cluster needs {', '.join(missing)}: {INSTALL_HINT}"
    if os.geteuid() != 0:
        return "SLURM test cluster needs root (slurmd starts jobs as their owner)"
    return None


def ending_with_this_process(argv: list[str]) -> list[str]:
    """``argv`` run so that it gets SIGTERM when the process that started it ends, however it ends: a
    test run interrupted or killed runs no teardown, and its daemons would otherwise outlive it
    (util-linux's setpriv sets the parent-death signal, which survives the exec; without setpriv the
    daemon runs as it is)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--", *argv] if setpriv else argv


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def wait_for(condition, what: str, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise TimeoutError(f"test SLURM: {what} not ready after {timeout:.0f}s")
        time.sleep(0.3)


def port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


class SlurmCluster:
    def __init__(self, root: Path, name: str = "rnnrepro-test"):
        self.root, self.name = Path(root), name
        self.node = socket.gethostname().split(".")[0]
        self.conf = self.root / "etc" / "slurm.conf"
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.env = dict(os.environ, SLURM_CONF=str(self.conf), PATH=f"{self.root / 'bin'}:{os.environ['PATH']}")

    # ---- configuration --------------------------------------------------------------------
    def write_config(self) -> None:
        r = self.root
        for d in ("etc", "state", "spool", "log", "munge", "db"):
            (r / d).mkdir(parents=True, exist_ok=True)
        (r / "munge").chmod(0o700)
        self.ctld_port, self.slurmd_port, self.dbd_port, self.db_port = free_ports(4)
        self.munge_socket = r / "munge" / "munge.socket"
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        cpus = max(2, os.cpu_count() or 2)
        self.conf.write_text(f"""\
ClusterName={self.name}
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={self.ctld_port}
SlurmdPort={self.slurmd_port}
SlurmUser=root
AuthType=auth/munge
# cred_expire also delays a requeued job's restart (default 120 s); short keeps the tests short.
AuthInfo=socket={self.munge_socket},cred_expire=10
CredType=cred/munge
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
ReturnToService=2
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={self.dbd_port}
AccountingStoragePass={self.munge_socket}
AccountingStorageTRES=gres/gpu
AccountingStoreFlags=job_comment
GresTypes=gpu
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={NODE_MEMORY_MB} Gres=gpu:2 State=UNKNOWN
# A preempted job's step that outlives SIGTERM (the trainer has checkpointed and exited in under a
# second; the job step's own process sometimes lingers) is killed after 5 s, not the default 30.
KillWait=5
# A requeued job waits for a scheduling pass: every 2 s here (the defaults, 60 s and backfill's 30 s,
# only make the preemption test wait).
SchedulerParameters=sched_interval=2,bf_interval=1
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
PartitionName=cpu Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes={self.node} MaxTime=INFINITE State=UP
PartitionName=urgent Nodes={self.node} MaxTime=INFINITE State=UP PriorityTier=10
""")
        (r / "etc" / "gres.conf").write_text("AutoDetect=off\nName=gpu File=/dev/null\nName=gpu File=/dev/zero\n")
        dbd = r / "etc" / "slurmdbd.conf"
        dbd.write_text(f"""\
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={self.dbd_port}
SlurmUser=root
LogFile={r}/log/slurmdbd.log
PidFile={r}/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={self.db_port}
StorageUser=root
StorageLoc=slurm_acct_db
""")
        dbd.chmod(0o600)  # slurmdbd refuses a config others can read (it may hold a password)
        # snakemake-executor-plugin-slurm-jobstep calls srun with every SLURM_* variable removed,
        # SLURM_CONF included, so srun would look for /etc/slurm/slurm.conf. A real cluster keeps its
        # config there (or serves it configless); this one lives in a temporary folder, so srun is
        # reached through a shim that sets SLURM_CONF again.
        (r / "bin").mkdir(exist_ok=True)
        shim = r / "bin" / "srun"
        shim.write_text(f"#!/bin/sh\nexport SLURM_CONF={self.conf}\nexec {shutil.which('srun')} \"$@\"\n")
        shim.chmod(0o755)

    # ---- processes ------------------------------------------------------------------------
    def spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.out", "w")
        self.procs.append((name, subprocess.Popen(ending_with_this_process(argv), stdout=log,
                                                  stderr=subprocess.STDOUT, env=self.env)))

    def check_alive(self) -> None:
        for name, proc in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"test SLURM: {name} exited with {proc.returncode}; see {self.root}/log")

    def run(self, *argv: str, check: bool = True) -> str:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, check=check, timeout=60).stdout

    def start(self) -> "SlurmCluster":
        self.write_config()
        r = self.root
        self.spawn("munged", ["munged", "--foreground", "--force", f"--socket={self.munge_socket}",
                              f"--key-file={r}/munge/munge.key", f"--log-file={r}/log/munged.log",
                              f"--pid-file={r}/munge/munged.pid", f"--seed-file={r}/munge/munged.seed"])
        wait_for(lambda: self.munge_socket.exists(), "munged")
        install_db = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
        subprocess.run([install_db, "--no-defaults", f"--datadir={r}/db", "--user=root",
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       check=True, capture_output=True, timeout=120)
        self.spawn("mariadbd", ["mariadbd", "--no-defaults", f"--datadir={r}/db", f"--socket={r}/db/mysqld.sock",
                                f"--port={self.db_port}", "--bind-address=127.0.0.1", "--user=root",
                                f"--pid-file={r}/db/mariadbd.pid", "--skip-log-bin", "--innodb-buffer-pool-size=32M"])
        wait_for(lambda: self.check_alive() or port_open(self.db_port), "MariaDB")
        self.spawn("slurmdbd", ["slurmdbd", "-D"])
        wait_for(lambda: self.check_alive() or port_open(self.dbd_port), "slurmdbd")
        self.spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
        self.spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", self.node])
        wait_for(lambda: self.check_alive() or self.run("sinfo", "-h", "-o", "%T", check=False).strip() == "idle",
                 "the node (sinfo)")
        wait_for(lambda: self.name in self.run("sacctmgr", "-n", "-P", "list", "cluster", "format=cluster",
                                               check=False), "the cluster in slurmdbd")
        return self

    def stop(self) -> None:
        if any(name == "slurmctld" and proc.poll() is None for name, proc in self.procs):
            self.run("scancel", "--full", "--user=root", check=False)
            try:
                wait_for(lambda: not self.run("squeue", "-h", check=False).strip(), "job cancellation", 60)
            except TimeoutError:
                pass  # the daemons are stopped below all the same
        for _, proc in reversed(self.procs):
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        # slurmstepd kills a cancelled job's processes, but a job's Snakemake that is still handing its
        # SIGTERM on when the daemons stop is left behind, its parent gone: killed here, so that no test
        # leaves a process on the machine.
        for pid in self.job_processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def job_processes(self) -> list[int]:
        """The processes of this cluster's jobs still running: a job's environment names the job and
        this cluster's slurm.conf."""
        mine = f"SLURM_CONF={self.conf}".encode()
        found = []
        for environ in Path("/proc").glob("[0-9]*/environ"):
            try:
                variables = environ.read_bytes().split(b"\0")
            except OSError:
                continue  # ended meanwhile, or not ours to read
            if mine in variables and any(v.startswith(b"SLURM_JOB_ID=") for v in variables):
                found.append(int(environ.parent.name))
        return [pid for pid in found if pid != os.getpid()]

    # ---- queries --------------------------------------------------------------------------
    def jobs(self) -> list[dict]:
        """Every job the cluster ran (sacct): id, state, comment, exit code, allocated resources."""
        fields = ["JobIDRaw", "State", "Comment", "ExitCode", "AllocTRES"]
        out = self.run("sacct", "-X", "-P", "-n", "--allusers", "--starttime=2000-01-01",
                       f"--format={','.join(fields)}")
        return [dict(zip(fields, line.split("|"))) for line in out.splitlines() if line]

    def queue(self) -> list[dict]:
        """Jobs queued or running (squeue): id, state, comment."""
        out = self.run("squeue", "-h", "-o", "%i|%T|%k")
        return [dict(zip(["JobID", "State", "Comment"], line.split("|"))) for line in out.splitlines() if line]
