"""GPU leasing on a simulated multi-GPU host, SIGTERM through the wrapper, and the grid status table
(read from the trainer's progress.json and metrics.json: there are no log files in these tests).

The GPUs are simulated with CUDA_VISIBLE_DEVICES (the wrapper shares the GPUs it names); the
commands run on the CPU.
"""

import csv
import io
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import copy_project, snakemake, train_cli, train_here

from rnnrepro import gpus, grid, status
from rnnrepro.configuration import REPO_ROOT, load_run_config, load_study, load_yaml
from rnnrepro.data import fetch, prepare
from rnnrepro.train.progress_file import ProgressFile

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
    out = snakemake(project, "-n", "-p", "results/smoke/runs/pru/synth_ptb/lstm_m1000/frac100/seed1111/metrics.json",
                    "--config", "budget=smoke")
    assert out.returncode == 0, out.stderr
    assert "python -m rnnrepro.gpus run -- python -m rnnrepro.train --run-dir" in out.stdout


# ---- SIGTERM through the wrapper, and what status reads meanwhile --------------------------------

TINY = grid.Cell("pru", "synth_ptb", "lstm_m1000", 100, 5, "smoke")


@pytest.fixture(scope="module")
def tiny_cell(tmp_path_factory):
    """A small smoke-budget cell on the synthetic PTB stand-in."""
    root = tmp_path_factory.mktemp("data")
    corpus = root / "processed"
    prepare("synth_ptb", fetch("synth_ptb", root / "raw"), corpus)
    run_config = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    run_config.update(budget="smoke", device="cpu", threads=1)
    cfg = grid.resolve_cell(load_study("pru"), run_config, TINY)
    cfg["data"] = {"dir": str(corpus), "train_file": str(corpus / "train.txt")}
    cfg["architecture"].update(hidden_size=32, embedding_size=16)
    cfg["recipe"]["epochs"] = 2
    return cfg


def history_rows(run_dir: Path) -> int:
    path = run_dir / "history.csv"
    return len(path.read_text().splitlines()) - 1 if path.exists() else 0


def wait_until(done, proc: subprocess.Popen) -> None:
    deadline = time.time() + 300
    while not done():
        assert proc.poll() is None, "training ended before it could be stopped"
        assert time.time() < deadline
        time.sleep(0.1)


def first_epoch_done(root: Path) -> bool:
    """The trainer has written epoch 1's row of history.csv (after its checkpoint) and begun epoch 2."""
    return history_rows(root / TINY.run_dir) == 1 and status.cell_status(root, TINY, "ptb").epochs == 1


@pytest.mark.slow
def test_sigterm_reaches_training_through_the_wrapper(tmp_path, tiny_cell):
    """The wrapper execs training: SLURM's SIGTERM lands in training, which checkpoints, exits 143
    (the lock is released), and the rerun resumes mid-epoch. history.csv grows by a row per epoch, and
    status follows the cell from progress.json alone (there is no log file): running, interrupted, done."""
    run_dir = tmp_path / TINY.run_dir
    train = [sys.executable, "-m", "rnnrepro.train", "--run-dir", str(run_dir), "--config", json.dumps(tiny_cell),
             "--device", "cpu", "--threads", "1"]
    lock_dir = tmp_path / "locks"
    proc = wrapped(lock_dir, train, host_env("0,1"), stderr=subprocess.PIPE, text=True)
    wait_until(lambda: first_epoch_done(tmp_path), proc)
    running = status.cell_status(tmp_path, TINY, "ptb")
    assert running.state == "running" and running.note.startswith("epoch 2/2, batch 0/")
    assert running.val_ppl == pytest.approx(pd.read_csv(run_dir / "history.csv")["val_ppl"].min())
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 143, err
    assert "stopped by SIGTERM" in err and gpus.held_leases(lock_dir) == {}
    stopped = status.cell_status(tmp_path, TINY, "ptb")
    assert stopped.state == "interrupted" and "stopped by SIGTERM" in stopped.note
    assert "a rerun resumes from" in stopped.note and history_rows(run_dir) == 1
    rerun = wrapped(lock_dir, train, host_env("0,1"), stderr=subprocess.PIPE, text=True)
    _, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    assert "resuming from" in err and "row 0" not in err
    assert (run_dir / "metrics.json").exists() and history_rows(run_dir) == 2
    assert status.cell_status(tmp_path, TINY, "ptb").state == "done"
    assert json.loads((run_dir / "progress.json").read_text())["state"] == "done"
    assert not list(tmp_path.glob("**/*.log"))


@pytest.mark.slow
def test_killed_and_failed_cells_from_the_trainers_own_files(tmp_path, tiny_cell):
    """SIGKILL leaves progress.json saying running: its process is gone, so status says interrupted; a
    cell whose loss diverges records its error, which status shows."""
    run_dir = tmp_path / TINY.run_dir
    proc = train_cli(run_dir, tiny_cell)
    wait_until(lambda: first_epoch_done(tmp_path), proc)
    proc.kill()
    proc.wait()
    assert json.loads((run_dir / "progress.json").read_text())["state"] == "running"
    killed = status.cell_status(tmp_path, TINY, "ptb")
    assert killed.state == "interrupted" and f"its process (pid {proc.pid}) is gone" in killed.note
    assert killed.epochs == 1 and "a rerun resumes from" in killed.note

    diverging = dict(tiny_cell, recipe=dict(tiny_cell["recipe"], lr=1e38, clip=1e38, ar_alpha=0.0, tar_beta=0.0))
    failing = grid.Cell("pru", "synth_ptb", "lstm_m1200", 100, 5, "smoke")
    code, err = train_here(tmp_path / failing.run_dir, diverging)
    assert code == 1, err
    failed = status.cell_status(tmp_path, failing, "ptb")
    assert failed.state == "failed" and "TrainingDiverged" in failed.note
    assert "the training loss is nan" in failed.note or "the training loss is inf" in failed.note


# ---- status table ------------------------------------------------------------------------------

OTHER_HOST = "node17"  # a SLURM compute node: status runs on the login node


def make_cell(root: Path, model: str, *, metrics=None, progress=None, end=None, age=0.0, checkpoint=False) -> Path:
    """A run folder as the trainer leaves it: ``progress`` (the trainer's snapshot) written by the trainer's
    own writer, ended as ``end`` (state, why) if given, its last write ``age`` seconds ago."""
    cell = grid.Cell("pru", "synth_ptb", model, 100, 1111, "smoke")
    run_dir = root / cell.run_dir
    run_dir.mkdir(parents=True)
    if metrics:
        (run_dir / "metrics.json").write_text(json.dumps(metrics))
    if checkpoint:
        (run_dir / "checkpoint").mkdir()
        (run_dir / "checkpoint" / "last.pt").write_bytes(b"")
    if progress is not None:
        record = ProgressFile(run_dir, str(cell.run_dir), snapshot=lambda: progress)
        if end:
            state, why = end
            record.end(state, **why)
        else:
            record.write(phase="training")
        if age:
            written = json.loads((run_dir / "progress.json").read_text())
            written["updated_at"] = datetime.fromtimestamp(time.time() - age, timezone.utc).isoformat()
            (run_dir / "progress.json").write_text(json.dumps(written))
    return run_dir


def on_host(record_file: Path, host: str, pid: int) -> None:
    written = json.loads(record_file.read_text())
    record_file.write_text(json.dumps(dict(written, host=host, pid=pid)))


def lm_metrics(model: str, **values) -> dict:
    """A language-model cell's metrics.json as the trainer writes it (the keys the metrics schema needs)."""
    return {"study": "pru", "dataset": "ptb", "corpus": "synth_ptb", "model": model, "fraction": 100, "seed": 1111,
            "budget": "smoke", "params": 1000, "epochs": 4, "wall_seconds": 3725.0, "val_loss": math.log(50.0),
            "val_ppl": 50.0, "test_loss": math.log(48.0), "test_ppl": 48.0, **values}


def snapshot(epochs_done: int, best_ppl: float, seconds: float, **more) -> dict:
    """The numbers the training loop puts in progress.json (TrainingLoop.snapshot)."""
    return {"epoch": epochs_done + 1, "epochs": 6, "epochs_done": epochs_done, "batch": 10, "batches_per_epoch": 22,
            "iteration": 22 * epochs_done + 10, "val_loss": math.log(best_ppl), "val_ppl": best_ppl,
            "best_val_loss": math.log(best_ppl), "best_val_ppl": best_ppl, "seconds": seconds,
            "eta_seconds": 600, **more}


# the models of the results tree's run folders
MADE = {"lstm_m1000", "lstm_m1200", "lstm_m1400", "pru_g1_k2_m1000", "pru_g2_k2_m1200", "pru_g4_k2_m1000",
        "pru_g4_k2_m1200"}


def grid_models(root: Path, corpus: str) -> set[str]:
    config = dict(yaml.safe_load((root / "config" / "config.yaml").read_text()), budget="smoke")
    return {cell.model for cell in status.grid_cells(config, {"pru": load_study("pru", root=root)})
            if cell.corpus == corpus}


@pytest.fixture
def results_tree(tmp_path, monkeypatch):
    """The PRU smoke grid (4 models x 2 corpora) plus run folders of models outside it (listed too), with
    a cell in every state, as the trainer's files say; no log files; the working directory is its root."""
    shutil.copytree(REPO_ROOT / "config", tmp_path / "config")
    config = yaml.safe_load((tmp_path / "config" / "config.yaml").read_text())
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump(dict(config, studies=["pru"])))
    monkeypatch.chdir(tmp_path)
    make_cell(tmp_path, "lstm_m1000", metrics=lm_metrics("lstm_m1000"))
    # Trained on this machine, by this very process: alive.
    make_cell(tmp_path, "lstm_m1200", progress=snapshot(1, 80.0, 5.0), checkpoint=True)
    # Trained on a SLURM node, heard from a minute ago: alive (its process is not on this machine to look for).
    remote = make_cell(tmp_path, "lstm_m1400", progress=snapshot(2, 60.0, 11.0), age=60, checkpoint=True)
    on_host(remote / "progress.json", OTHER_HOST, 4242)
    make_cell(tmp_path, "pru_g1_k2_m1000", progress=snapshot(1, 80.0, 5.0),
              end=("failed", {"error": "TrainingDiverged: cell ...: the training loss is nan"}))
    # On a node, not heard from for 10 minutes: killed with its node, or with its Snakemake.
    stale = make_cell(tmp_path, "pru_g2_k2_m1200", progress=snapshot(2, 70.0, 12.0), age=600, checkpoint=True)
    on_host(stale / "progress.json", OTHER_HOST, 4242)
    make_cell(tmp_path, "pru_g4_k2_m1000", progress=snapshot(3, 65.0, 20.0), checkpoint=True,
              end=("interrupted", {"stopped_by": "SIGTERM (a resume checkpoint was written)"}))
    damaged = make_cell(tmp_path, "pru_g4_k2_m1200", checkpoint=True)
    (damaged / "progress.json").write_text('{"state": "runn')
    return tmp_path


def test_status_has_one_cell_in_each_state(results_tree):
    rows = {r.model: r for r in status.collect(results_tree, budget="smoke") if r.corpus == "synth_ptb"}
    assert set(rows) == grid_models(results_tree, "synth_ptb") | MADE  # the smoke grid and the other run folders
    done, local, remote, crashed, stale, stopped, damaged = (rows[m] for m in (
        "lstm_m1000", "lstm_m1200", "lstm_m1400", "pru_g1_k2_m1000", "pru_g2_k2_m1200", "pru_g4_k2_m1000",
        "pru_g4_k2_m1200"))
    assert (done.state, done.epochs, done.val_ppl, done.test_ppl, done.wall_seconds) == ("done", 4, 50.0, 48.0, 3725.0)
    assert (local.state, local.epochs, local.val_ppl) == ("running", 1, 80.0)
    assert local.note == "epoch 2/6, batch 10/22, about 10m00s left"
    assert (remote.state, remote.epochs, remote.val_ppl, remote.wall_seconds) == ("running", 2, 60.0, 11.0)
    assert remote.val_loss == pytest.approx(math.log(60.0))
    assert crashed.state == "failed" and "training loss is nan" in crashed.note
    # its age is 10 minutes plus however long the fixture and this collection took on a busy machine
    assert stale.state == "interrupted" and stale.epochs == 2
    assert re.search(r"not rewritten for 10m0\ds", stale.note), stale.note
    assert "a rerun resumes from" in stale.note
    assert stopped.state == "interrupted" and stopped.note.startswith("stopped by SIGTERM") and stopped.epochs == 3
    assert damaged.state == "failed" and "progress.json is not valid JSON" in damaged.note
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
    # The cell trained by this (pytest) process is seen alive by the CLI, another process, too.
    cells = len(grid_models(results_tree, "synth_ptb") | MADE) + len(grid_models(results_tree, "synth_wt2"))
    assert table.rstrip().endswith(f"{cells} cells: 1 done, 2 running, 2 failed, 2 interrupted, {cells - 7} pending")
    rows = list(csv.DictReader(io.StringIO(cli("--format", "csv", "--study", "pru"))))
    assert len(rows) == cells
    assert {r["state"] for r in rows} == {"done", "running", "failed", "interrupted", "pending"}


def test_status_names_an_unknown_study(results_tree):
    out = subprocess.run([sys.executable, "-m", "rnnrepro.status", "--study", "prx"], cwd=results_tree,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "--study prx: no such study; the studies are " in out.stderr


def test_status_of_one_artifact_lists_its_cells(results_tree):
    """From an artifact's name to its cells in one step: `--artifact pru_table1`."""
    out = subprocess.run([sys.executable, "-m", "rnnrepro.status", "--artifact", "pru_dynamic_eval", "--budget",
                          "smoke", "--format", "csv"], cwd=results_tree, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    study = load_study("pru")
    config = load_run_config({**load_yaml(REPO_ROOT / "config/config.yaml"), "budget": "smoke"})
    expected = grid.artifact_cells(study, config, "dynamic_eval")
    assert [(r["model"], int(r["seed"])) for r in rows] == sorted((c.model, c.seed) for c in expected)
    bad = subprocess.run([sys.executable, "-m", "rnnrepro.status", "--artifact", "pru_tabel1"], cwd=results_tree,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "--artifact pru_tabel1: no such artifact; the nearest: pru_table1" in bad.stderr


def test_a_running_cell_whose_process_is_gone_is_interrupted(tmp_path):
    """progress.json says running: on this machine its process decides at once; elsewhere, the heartbeat."""
    run_dir = make_cell(tmp_path, "lstm_m1200", progress=snapshot(1, 80.0, 5.0), checkpoint=True)
    cell = grid.Cell("pru", "synth_ptb", "lstm_m1200", 100, 1111, "smoke")
    assert status.cell_status(tmp_path, cell, "ptb").state == "running"  # this process
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    on_host(run_dir / "progress.json", socket.gethostname(), gone.pid)
    row = status.cell_status(tmp_path, cell, "ptb")
    assert row.state == "interrupted" and f"its process (pid {gone.pid}) is gone" in row.note
    assert "no training process" in row.note and "a rerun resumes from" in row.note
    on_host(run_dir / "progress.json", OTHER_HOST, gone.pid)  # a node's pid means nothing here
    assert status.cell_status(tmp_path, cell, "ptb").state == "running"
    later = time.time() + status.STALE_SECONDS + 1
    assert status.cell_status(tmp_path, cell, "ptb", now=later).state == "interrupted"


def test_failed_cell_shows_its_error_whole(tmp_path):
    error = ("TrainingDiverged: cell pru/synth_ptb/pru_g1_k2_m1000/frac100/seed1111, epoch 2, batch 10: the training "
             "loss is nan (lr 20.0). The last good resume checkpoint is kept in results/runs/x/checkpoint. Lower "
             "`lr` or `clip` of recipe 'standard' in config/studies/pru.yaml and rerun")
    make_cell(tmp_path, "pru_g1_k2_m1000", progress=snapshot(1, 80.0, 5.0), end=("failed", {"error": error}))
    row = status.cell_status(tmp_path, grid.Cell("pru", "synth_ptb", "pru_g1_k2_m1000", 100, 1111, "smoke"), "ptb")
    assert (row.state, row.note) == ("failed", error)
    assert error.replace(" ", "") in status.render([row], "table").replace("\n", "").replace(" ", "")


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
