"""GPU leasing on a simulated multi-GPU host, SIGTERM through the wrapper, and the grid status table.

The GPUs are simulated with CUDA_VISIBLE_DEVICES (the wrapper shares the GPUs it names); the
commands run on the CPU.
"""

import csv
import io
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import copy_project, snakemake

from rnnrepro import gpus, grid, status
from rnnrepro.configuration import REPO_ROOT, load_study
from rnnrepro.data import fetch, prepare

# Records which GPU the command got and when it held it.
RECORD = ("import json, os, sys, time; start = time.time(); time.sleep(float(sys.argv[2])); "
          "open(sys.argv[1], 'w').write(json.dumps([os.environ['CUDA_VISIBLE_DEVICES'], start, time.time()]))")


def host_env(visible: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.pop(gpus.JOBS_PER_GPU_ENV, None)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    return env


def wrapped(lock_dir: Path, command: list[str], env: dict, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rnnrepro.gpus", "run", "--lock-dir", str(lock_dir), "--",
                             *command], env=env, **popen)


def test_one_job_per_gpu_and_every_gpu_used(tmp_path):
    """Eight jobs on a 4-GPU host at one job per GPU: never two at once on one GPU, all four GPUs busy."""
    procs = [wrapped(tmp_path / "locks", [sys.executable, "-c", RECORD, str(tmp_path / f"job{i}.json"), "1.5"],
                     {**host_env("0,1,2,3"), gpus.JOBS_PER_GPU_ENV: "1"}) for i in range(8)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 8
    leases = [json.loads((tmp_path / f"job{i}.json").read_text()) for i in range(8)]
    assert {gpu for gpu, _, _ in leases} == {"0", "1", "2", "3"}
    for gpu in "0123":
        spans = sorted((start, end) for g, start, end in leases if g == gpu)
        assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:])), (gpu, spans)


def test_lock_follows_the_training_process(tmp_path):
    """The lease is held by the command itself and ends with it, even when it is killed."""
    lock_dir = tmp_path / "locks"
    proc = wrapped(lock_dir, ["sleep", "60"], host_env("7"))
    deadline = time.time() + 30
    while not gpus.held_leases(lock_dir):
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.1)
    assert gpus.held_leases(lock_dir)["7"]["argv"] == ["sleep", "60"]
    proc.kill()
    proc.wait()
    assert gpus.held_leases(lock_dir) == {}
    with gpus.gpu_lease(lock_dir, ["7"]) as gpu:
        assert gpu == "7"


@pytest.mark.parametrize("visible, slurm", [("", False), ("0", True)])
def test_command_runs_unchanged_without_a_gpu_choice(tmp_path, visible, slurm):
    """No GPU, or a SLURM job allocated one GPU: no lock, CUDA_VISIBLE_DEVICES left as it was."""
    env = host_env(visible)
    if slurm:
        env["SLURM_JOB_ID"] = "42"
    out = tmp_path / "env.json"
    code = wrapped(tmp_path / "locks", [sys.executable, "-c", f"import json, os; open({str(out)!r}, 'w')"
                                        ".write(json.dumps(os.environ.get('CUDA_VISIBLE_DEVICES')))"], env).wait()
    assert code == 0
    assert json.loads(out.read_text()) == visible
    assert not (tmp_path / "locks").exists()


def test_slurm_allocation_with_several_gpus_has_its_own_locks(tmp_path):
    env = dict(host_env("0,1"), SLURM_JOB_ID="42")
    out = tmp_path / "job.json"
    assert wrapped(tmp_path / "locks", [sys.executable, "-c", RECORD, str(out), "0"], env).wait() == 0
    assert json.loads(out.read_text())[0] == "0"
    assert (tmp_path / "locks" / "slurm-42" / "gpu-0.lock").exists()


def test_missing_command_is_named(tmp_path):
    proc = wrapped(tmp_path / "locks", ["no-such-program"], host_env(""), stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 127 and "no-such-program" in err


def test_default_profile_limits_gpu_jobs_to_the_gpu_slots():
    from snakemake.profiles import ProfileConfigFileParser

    def gpu_limit(visible, per_gpu=None):
        saved = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", gpus.JOBS_PER_GPU_ENV)}
        os.environ["CUDA_VISIBLE_DEVICES"] = visible
        os.environ.pop(gpus.JOBS_PER_GPU_ENV, None)
        if per_gpu is not None:
            os.environ[gpus.JOBS_PER_GPU_ENV] = per_gpu
        try:
            with open(REPO_ROOT / "profiles" / "default" / "config.yaml") as f:
                return ProfileConfigFileParser().parse(f)["resources"]
        finally:
            for key, value in saved.items():
                os.environ.pop(key, None)
                if value is not None:
                    os.environ[key] = value

    assert gpu_limit("0,1,2,3") == [f"gpu={4 * gpus.DEFAULT_JOBS_PER_GPU}"]
    assert gpu_limit("0,1,2,3", "1") == ["gpu=4"]
    assert gpu_limit("0", "2") == ["gpu=2"]
    assert gpu_limit("") == [f"gpu={os.cpu_count()}"]  # no GPU: the cores are the limit


def test_jobs_share_a_gpu_up_to_jobs_per_gpu(tmp_path):
    """Six jobs, two GPUs, two jobs per GPU: at most two at once on a GPU, and the first two jobs
    (started one after the other) land on different GPUs (slots fill GPU by GPU first)."""
    env = {**host_env("0,1"), gpus.JOBS_PER_GPU_ENV: "2"}
    lock_dir = tmp_path / "locks"
    procs = []
    for i in range(6):
        procs.append(wrapped(lock_dir, [sys.executable, "-c", RECORD, str(tmp_path / f"job{i}.json"),
                                        "4" if i < 2 else "1.5"], env))
        deadline = time.time() + 60
        while i < 2 and len(gpus.held_leases(lock_dir)) < i + 1:  # jobs 0 and 1 lease one after the other
            assert time.time() < deadline and procs[-1].poll() is None
            time.sleep(0.05)
    assert [p.wait(timeout=120) for p in procs] == [0] * 6
    leases = [json.loads((tmp_path / f"job{i}.json").read_text()) for i in range(6)]
    assert [leases[0][0], leases[1][0]] == ["0", "1"]
    for gpu in "01":
        spans = [(start, end) for g, start, end in leases if g == gpu]
        for start, _ in spans:  # jobs running on this GPU at each job's start, itself included
            assert sum(s <= start < e for s, e in spans) <= 2, (gpu, spans)
    assert max(sum(s <= start < e for _, s, e in leases) for _, start, _ in leases) > 2  # GPUs were shared


def test_jobs_per_gpu_setting_is_checked(tmp_path):
    assert gpus.jobs_per_gpu({}) == gpus.DEFAULT_JOBS_PER_GPU
    assert gpus.jobs_per_gpu({gpus.JOBS_PER_GPU_ENV: "4"}) == 4
    with pytest.raises(ValueError, match=f"{gpus.JOBS_PER_GPU_ENV}='0'.*whole number >= 1"):
        gpus.jobs_per_gpu({gpus.JOBS_PER_GPU_ENV: "0"})
    proc = wrapped(tmp_path / "locks", ["true"], {**host_env("0"), gpus.JOBS_PER_GPU_ENV: "two"},
                   stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "RNNREPRO_JOBS_PER_GPU='two'" in err


def test_train_rule_runs_training_through_the_gpu_wrapper(tmp_path):
    project = copy_project(tmp_path)
    out = snakemake(project, "-n", "-p", "results/runs/pru/synth_ptb/lstm_m1000/frac100/seed1111/metrics.json",
                    "--config", "budget=smoke")
    assert out.returncode == 0, out.stderr
    assert "python -m rnnrepro.gpus run -- python -m rnnrepro.train --run-dir" in out.stdout


# ---- SIGTERM through the wrapper ---------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_cell(tmp_path_factory):
    """A small smoke-budget cell on the synthetic PTB stand-in."""
    root = tmp_path_factory.mktemp("data")
    corpus = root / "processed"
    prepare("synth_ptb", fetch("synth_ptb", root / "raw"), corpus)
    run_config = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    run_config.update(budget="smoke", device="cpu", threads=1)
    cfg = grid.resolve_cell(load_study("pru"), run_config, grid.Cell("pru", "synth_ptb", "lstm_m1000", 100, 5, "smoke"))
    cfg["data"] = {"dir": str(corpus), "train_file": str(corpus / "train.txt")}
    cfg["architecture"].update(hidden_size=32, embedding_size=16)
    cfg["recipe"]["epochs"] = 2
    return cfg


def test_sigterm_reaches_training_through_the_wrapper(tmp_path, tiny_cell):
    """The wrapper execs training: SLURM's SIGTERM lands in training, which checkpoints, exits 143
    (the lock is released), and the rerun resumes mid-epoch."""
    train = [sys.executable, "-m", "rnnrepro.train", "--run-dir", str(tmp_path / "run"),
             "--config", json.dumps(tiny_cell), "--device", "cpu", "--threads", "1"]
    lock_dir = tmp_path / "locks"
    proc = wrapped(lock_dir, train, host_env("0,1"), stderr=subprocess.PIPE, text=True)
    while "epoch 1:" not in proc.stderr.readline():
        assert proc.poll() is None, "training ended before it could be stopped"
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 143, err
    assert "stopped by SIGTERM" in err and gpus.held_leases(lock_dir) == {}
    rerun = wrapped(lock_dir, train, host_env("0,1"), stderr=subprocess.PIPE, text=True)
    _, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    assert "resuming from" in err and "row 0" not in err
    assert (tmp_path / "run" / "metrics.json").exists()


# ---- status table ------------------------------------------------------------------------------

OLD = time.time() - 3 * status.RECENT_SECONDS


def make_cell(root: Path, model: str, *, metrics=None, log=None, checkpoint=False, old=False) -> Path:
    cell = grid.Cell("pru", "synth_ptb", model, 100, 1111, "smoke")
    run_dir = root / cell.run_dir
    run_dir.mkdir(parents=True)
    touched = []
    if metrics:
        (run_dir / "metrics.json").write_text(json.dumps(metrics))
    if checkpoint:
        (run_dir / "checkpoint").mkdir()
        (run_dir / "checkpoint" / "last.pt").write_bytes(b"")
        touched.append(run_dir / "checkpoint" / "last.pt")
    if log is not None:
        path = root / status.log_path(cell)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(log)
        touched.append(path)
    for path in touched if old else []:
        os.utime(path, (OLD, OLD))
    return run_dir


def lm_metrics(model: str, **values) -> dict:
    """A language-model cell's metrics.json as the trainer writes it (the keys the metrics schema needs)."""
    return {"study": "pru", "dataset": "ptb", "corpus": "synth_ptb", "model": model, "fraction": 100, "seed": 1111,
            "budget": "smoke", "params": 1000, "epochs": 4, "wall_seconds": 3725.0, "val_loss": math.log(50.0),
            "val_ppl": 50.0, "test_loss": math.log(48.0), "test_ppl": 48.0, **values}


EPOCH_1 = "[rnnrepro] epoch 1: train ppl 90.00, val ppl 80.00, 5.0s, 1000 tok/s\n"
EPOCH_2 = "[rnnrepro] epoch 2: train ppl 70.00, val ppl 60.00, 6.0s, 1000 tok/s\n"


# the models of the results tree's run folders
MADE = {"lstm_m1000", "lstm_m1200", "lstm_m1400", "pru_g1_k2_m1000", "pru_g2_k2_m1200"}


def grid_models(root: Path, corpus: str) -> set[str]:
    config = dict(yaml.safe_load((root / "config" / "config.yaml").read_text()), budget="smoke")
    return {cell.model for cell in status.grid_cells(config, {"pru": load_study("pru", root=root)})
            if cell.corpus == corpus}


@pytest.fixture
def results_tree(tmp_path, monkeypatch):
    """The PRU smoke grid (4 models x 2 corpora) plus run folders of models outside it (listed too), with
    a cell in every state; the working directory is its root."""
    shutil.copytree(REPO_ROOT / "config", tmp_path / "config")
    config = yaml.safe_load((tmp_path / "config" / "config.yaml").read_text())
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump(dict(config, studies=["pru"])))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(status, "DEFAULT_LOCK_DIR", tmp_path / "locks")
    make_cell(tmp_path, "lstm_m1000", metrics=lm_metrics("lstm_m1000"))
    # A Snakemake runs here, its jobs elsewhere (as on SLURM): a recent log is the sign of a live cell.
    (tmp_path / ".snakemake" / "locks").mkdir(parents=True)
    (tmp_path / ".snakemake" / "locks" / "0.output.lock").write_text("")
    make_cell(tmp_path, "lstm_m1200", log=EPOCH_1, checkpoint=True)
    live = make_cell(tmp_path, "lstm_m1400", log=EPOCH_1 + EPOCH_2, checkpoint=True, old=True)
    make_cell(tmp_path, "pru_g1_k2_m1000", log=EPOCH_1 + "[rnnrepro] error: cell ...: the training loss is nan\n")
    make_cell(tmp_path, "pru_g2_k2_m1200", log="[rnnrepro] resuming from x: epoch 3, row 40\n", checkpoint=True,
              old=True)
    holder = {"pid": os.getpid(), "cwd": str(tmp_path), "argv": ["python", "-m", "rnnrepro.train", "--run-dir",
                                                                 str(live.relative_to(tmp_path)), "--config", "{}"]}
    with gpus.gpu_lease(tmp_path / "locks", ["3"], holder):
        yield tmp_path


def test_status_has_one_cell_in_each_state(results_tree):
    rows = {r.model: r for r in status.collect(results_tree, budget="smoke") if r.corpus == "synth_ptb"}
    assert set(rows) == grid_models(results_tree, "synth_ptb") | MADE  # the smoke grid and the other run folders
    done, recent, locked, crashed, stale = (rows[m] for m in ("lstm_m1000", "lstm_m1200", "lstm_m1400",
                                                              "pru_g1_k2_m1000", "pru_g2_k2_m1200"))
    assert (done.state, done.epochs, done.val_ppl, done.test_ppl, done.wall_seconds) == ("done", 4, 50.0, 48.0, 3725.0)
    assert (recent.state, recent.epochs, recent.val_ppl) == ("running", 1, 80.0)
    assert (locked.state, locked.epochs, locked.val_ppl, locked.wall_seconds) == ("running", 2, 60.0, 11.0)
    assert locked.val_loss == pytest.approx(math.log(60.0))
    assert crashed.state == "failed" and "training loss is nan" in crashed.note
    assert stale.state == "interrupted" and stale.epochs == 2 and "a rerun resumes from" in stale.note
    assert rows["pru_g4_k2_m1400"].state == "pending"
    assert rows["pru_g4_k2_m1400"].dataset == "ptb"


def test_status_cli_table_and_csv(results_tree):
    def cli(*args):
        out = subprocess.run([sys.executable, "-m", "rnnrepro.status", "--budget", "smoke", *args],
                             cwd=results_tree, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout

    table = cli()
    assert table.splitlines()[0].split()[:7] == ["study", "dataset", "corpus", "model", "fraction", "seed", "state"]
    assert "1h02m" in table  # the finished cell's wall time
    # Without this process's lock table the locked cell looks stale: the CLI reads the real lock folder.
    cells = len(grid_models(results_tree, "synth_ptb") | MADE) + len(grid_models(results_tree, "synth_wt2"))
    assert table.rstrip().endswith(f"{cells} cells: 1 done, 1 running, 1 failed, 2 interrupted, {cells - 5} pending")
    rows = list(csv.DictReader(io.StringIO(cli("--format", "csv", "--study", "pru"))))
    assert len(rows) == cells
    assert {r["state"] for r in rows} == {"done", "running", "failed", "interrupted", "pending"}


def test_status_names_an_unknown_study(results_tree):
    out = subprocess.run([sys.executable, "-m", "rnnrepro.status", "--study", "prx"], cwd=results_tree,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "--study prx: no such study; the studies are " in out.stderr


def test_status_reads_autocomplete_logs(tmp_path):
    log = tmp_path / "cell.log"
    log.write_text("[rnnrepro] resuming from x/checkpoint/last.pt: iteration 200, epoch 3, batch 4\n"
                   "[rnnrepro] iteration 300/1000: val loss 2.5000, val accuracy 0.4000, 90.5s\n"
                   "[rnnrepro] iteration 400/1000: val loss 2.7000, val accuracy 0.3900, 120.0s\n")
    progress = status.read_log(log)
    assert (progress["epochs"], progress["val_loss"], progress["val_ppl"]) == (2, 2.5, None)
    assert (progress["seconds"], progress["progress"], progress["ended"]) == (120.0, "iteration 400/1000", None)


def fake_training_process(root: Path, run_dir: Path) -> subprocess.Popen:
    """A process whose command line is a training job's (`python ... -m rnnrepro.train --run-dir X`)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "-m", "rnnrepro.train",
                             "--run-dir", str(run_dir.relative_to(root))], cwd=root)


def test_killed_cell_is_interrupted_not_running(tmp_path):
    """A log written a moment ago but no training process: the cell was killed (SIGKILL, OOM, Ctrl-C)."""
    killed = make_cell(tmp_path, "lstm_m1200", log=EPOCH_1, checkpoint=True)
    cell = grid.Cell("pru", "synth_ptb", "lstm_m1200", 100, 1111, "smoke")

    def state(snakemake_runs: bool, processes: set) -> status.CellStatus:
        return status.cell_status(tmp_path, cell, "ptb", status.Liveness(set(), processes, snakemake_runs, time.time()))

    alone = state(False, set())
    assert alone.state == "interrupted" and alone.epochs == 1
    assert "no training process" in alone.note and "a rerun resumes from" in alone.note
    # Snakemake still runs, its other cells train on this machine: this one's process is gone.
    other = tmp_path / grid.runs_dir("smoke") / "pru/synth_ptb/lstm_m1400/frac100/seed1111"
    assert state(True, {other.resolve()}).state == "interrupted"
    # ... its jobs run elsewhere (SLURM): a recent log is all there is to go by.
    assert state(True, set()).state == "running"
    assert state(False, {killed.resolve()}).state == "running"
    # The process table of this machine, as status reads it.
    other.mkdir(parents=True)
    proc = fake_training_process(tmp_path, other)
    try:
        deadline = time.time() + 30
        while other.resolve() not in status.training_processes(tmp_path) and time.time() < deadline:
            time.sleep(0.1)
        assert status.training_processes(tmp_path) == {other.resolve()}
    finally:
        proc.kill()
        proc.wait()
    assert status.training_processes(tmp_path) == set()


def test_stopped_cell_is_interrupted_and_error_line_shown_whole(tmp_path):
    bar = "epoch 2/6:  45%|████▌     | 10/22 [00:01<00:02,  8.10it/s]"
    error = ("[rnnrepro] error: results/runs/pru/synth_ptb/pru_g1_k2_m1000/frac100/seed1111, epoch 2, batch 10: "
             "the training loss is nan; the checkpoint keeps the last good epoch. Lower the recipe's lr or set clip, "
             "then rerun the same target")
    log = tmp_path / "error.log"
    log.write_text(EPOCH_1 + bar + "\r" + bar + error + "\n")
    assert status.read_log(log)["ended"] == error and not status.read_log(log)["stopped"]
    log.write_text(EPOCH_1 + "Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\n"
                   "    main()\nRuntimeError: DataLoader worker (pid 4) is killed by signal: Killed.\n" + bar + "\r\n")
    assert status.read_log(log)["ended"] == "RuntimeError: DataLoader worker (pid 4) is killed by signal: Killed."
    stop = "[rnnrepro] results/runs/x, epoch 2, batch 10: stopped by SIGTERM; resume checkpoint written"
    log.write_text(EPOCH_1 + bar + stop + "\n")
    assert status.read_log(log) | {} and status.read_log(log)["ended"] == stop and status.read_log(log)["stopped"]
    log.write_text(EPOCH_1 + "Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\nKeyboardInterrupt\n")
    assert status.read_log(log)["ended"] == "KeyboardInterrupt" and status.read_log(log)["stopped"]


def test_corrupt_metrics_is_flagged_and_the_grid_still_listed(results_tree):
    damaged = results_tree / grid.runs_dir("smoke") / "pru/synth_ptb/lstm_m1000/frac100/seed1111/metrics.json"
    damaged.write_text(damaged.read_text()[:40])
    out = subprocess.run([sys.executable, "-m", "rnnrepro.status", "--budget", "smoke", "--format", "csv"],
                         cwd=results_tree, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = {r["model"]: r for r in csv.DictReader(io.StringIO(out.stdout)) if r["corpus"] == "synth_ptb"}
    assert rows["lstm_m1000"]["state"] == "failed"
    assert "metrics.json is not valid JSON" in rows["lstm_m1000"]["note"] and "--force" in rows["lstm_m1000"]["note"]
    assert rows["pru_g1_k2_m1000"]["state"] == "failed"  # the others are read as before
    damaged.write_text(json.dumps(lm_metrics("lstm_m1000", test_ppl="48.0")))
    row = next(r for r in status.collect(results_tree, budget="smoke") if r.model == "lstm_m1000")
    assert row.state == "failed" and "key 'test_ppl': '48.0' is not of type 'number'" in row.note
