"""Finished work is never lost: a precision this machine cannot run is refused before any job; a
precision with other numbers trains cells of its own, one with the same numbers retrains nothing; a
cell another process trains is left alone by every path (the workflow, the trainer, `records grow`, the
GPU wrapper); and a notebook that fails leaves the tables of its last good run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from argparse import Namespace
from pathlib import Path

import pytest
from conftest import BIN, copy_project, snakemake
from snakemake_runs import run_all

from rnnrepro import grid, precision
from rnnrepro.configuration import REPO_ROOT

SMOKE = grid.results_dir("smoke")  # the smoke profile's results tree (rnnrepro.layout)
CELL = f"{SMOKE}/runs/pru/synth_ptb/lstm_m1000/frac100/seed1111"
FINISHED = ("config.json", "history.csv", "metrics.json", "model.pt")


def finished_cell(project: Path, cell: str = CELL, files=FINISHED) -> dict[Path, bytes]:
    """Stand-ins for a finished cell's files (what a run must not touch), and their bytes."""
    run_dir = project / cell
    run_dir.mkdir(parents=True, exist_ok=True)
    for name in files:
        (run_dir / name).write_text(f"the finished cell's {name}\n")
    return {path: path.read_bytes() for path in run_dir.iterdir()}


def unchanged(files: dict[Path, bytes]) -> bool:
    return all(path.exists() and path.read_bytes() == content for path, content in files.items())


def environment(project: Path, **extra: str) -> dict[str, str]:
    return {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(project), **extra}


@pytest.mark.slow
def test_precisions_are_refused_retrain_nothing_or_train_cells_of_their_own(tmp_path):
    """bf16 where oneDNN has no bfloat16 LSTM (ONEDNN_MAX_CPU_ISA=AVX2 stands for a CPU without AVX-512):
    refused when the run is planned, a dry run too, with the cell, the device and the fix, and no file
    touched (it used to delete the finished cell, then refuse in the job). tf32 on a CPU computes fp32's
    numbers: the cells are the fp32 ones (same folder, same config, so no job is planned again). bf16
    where it runs (the PRU) trains cells of its own in runs-bf16/, beside the fp32 ones."""
    project = copy_project(tmp_path)
    files = finished_cell(project)
    logs = tmp_path / "dry_run_logs"
    logs.mkdir()
    table = f"{SMOKE}/tables/pru_table1.csv"
    pru_cell = "pru/synth_ptb/pru_g4_k2_m1400/frac100/seed1111/metrics.json"
    avx2 = environment(project, ONEDNN_MAX_CPU_ISA="AVX2")
    runs = [(["-n", "--profile", "profiles/smoke", "--config", "precision=bf16", "--", table], avx2),
            (["--profile", "profiles/smoke", "--config", "precision=bf16", "--", table], avx2),
            (["-n", "-p", "--profile", "profiles/smoke", "--config", "precision=tf32", "--", f"{CELL}/metrics.json",
              f"{SMOKE}/runs/{pru_cell}"], environment(project)),
            (["-n", "-p", "--profile", "profiles/smoke", "--config", "precision=bf16", "--",
              f"{SMOKE}/runs-bf16/{pru_cell}"], environment(project))]
    (dry, (real, real_out), (tf32, tf32_out), (bf16, bf16_out)) = run_all(
        [(project, args, env, logs / f"{i}.log") for i, (args, env) in enumerate(runs)])
    for code, out in (dry, (real, real_out)):
        assert code != 0
        assert "study 'pru', model 'lstm_m1000': the recurrent cell 'lstm' cannot run `precision: bf16` on cpu" in out
        assert "`precision: fp32`" in out and "No job was run and no file was changed" in out, out[-3000:]
    assert "rule fetch_dataset" not in real_out and not (project / "data").exists()
    assert unchanged(files)

    assert tf32 == 0, tf32_out[-3000:]
    assert "tf32 on a CPU gives exactly fp32's numbers" in tf32_out
    assert '"precision": "fp32"' in tf32_out and '"precision": "tf32"' not in tf32_out and "runs-tf32" not in tf32_out
    assert bf16 == 0, bf16_out[-3000:]
    assert '"precision": "bf16"' in bf16_out and f"--run-dir {SMOKE}/runs-bf16/pru/synth_ptb/pru_g4_k2_m1400" in bf16_out
    assert unchanged(files)


def test_the_run_folder_of_a_precision():
    from rnnrepro import layout

    # every precision but fp32 has run folders of its own, and `make clean` knows them as the budget's
    assert {f"runs-{name}" for name in precision.PRECISIONS if name != precision.DEFAULT} == {
        part for part in layout.RESULTS_PARTS if part.startswith("runs-")}
    cell = grid.Cell("pru", "ptb", "lstm_m1000", 100, 1111, "cpu", "bf16")
    assert cell.run_dir == f"{grid.results_dir('cpu')}/runs-bf16/pru/ptb/lstm_m1000/frac100/seed1111"
    assert grid.Cell("pru", "ptb", "lstm_m1000", 100, 1111, "cpu").run_dir.startswith(f"{grid.results_dir('cpu')}/runs/")
    assert precision.same_numbers_as("tf32", "cpu") == "fp32"
    assert precision.same_numbers_as("tf32", "cuda") == "tf32"
    assert precision.same_numbers_as("bf16", "cpu") == "bf16"


# --- another process trains the cell ----------------------------------------------------------------

def holding_the_lock(run_dir: Path) -> subprocess.Popen:
    """A process that holds a cell's trainer.lock as a trainer does, until it is killed."""
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "from rnnrepro.train.progress_file import hold_lock\n"
                               "assert hold_lock(sys.argv[1]) is not None\nprint('held', flush=True)\ntime.sleep(600)",
                               str(run_dir)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


@pytest.mark.slow
def test_the_workflow_plans_no_job_for_a_cell_another_process_trains(tmp_path):
    """A trainer left running (by a Snakemake or `records grow` that was killed, or another run let in by
    --unlock) holds its cell's trainer.lock: a run that would train that cell stops while planning,
    before Snakemake removes the job's outputs; a dry run warns."""
    project = copy_project(tmp_path)
    files = finished_cell(project, files=("config.json", "history.csv"))  # a cell in the middle of training
    holder = holding_the_lock(project / CELL)
    try:
        planned = snakemake(project, "-n", "--profile", "profiles/smoke", f"{CELL}/metrics.json")
        refused = snakemake(project, "--profile", "profiles/smoke", f"{CELL}/metrics.json")
    finally:
        holder.kill()
        holder.wait()
    said = f"{CELL}: another process on this machine is training this cell (pid {holder.pid}, started "
    assert planned.returncode == 0 and said in planned.stdout + planned.stderr
    assert "a dry run only plans; a run would stop here" in (planned.stdout + planned.stderr).lower()
    assert refused.returncode != 0 and said in refused.stdout + refused.stderr
    assert "no job was run and no file was changed" in refused.stdout + refused.stderr
    assert unchanged(files) and not (project / "data").exists()


def test_a_trainer_holds_its_cell_and_another_is_refused(tmp_path):
    """The lock outlives nothing: held while its process lives (whatever its progress.json says), free
    once the process is gone, even killed. A lock file deleted under a running trainer (a clean-up)
    still leaves its fresh progress.json to say who trains."""
    import platform

    from rnnrepro.train import progress_file
    from rnnrepro.train.files import RunFolderError
    from rnnrepro.train.loop import run_cell
    from rnnrepro.train.progress_file import another_trainer

    tmp_path.joinpath("trainer.lock").touch()
    assert another_trainer(tmp_path) is None
    holder = holding_the_lock(tmp_path)
    try:
        assert another_trainer(tmp_path).startswith(f"pid {holder.pid}, started ")
        with pytest.raises(RunFolderError, match=f"another process on this machine is training this cell "
                                                 f"\\(pid {holder.pid}, started"):
            run_cell(tmp_path, {}, None, make_task=None)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["trainer.lock"]
        progress_file.write(tmp_path, {"state": "running", "cell": "c", "pid": holder.pid, "host": platform.node(),
                                       "started_at": "2026-01-01T00:00:00+00:00", "updated_at": progress_file.now_iso()})
        (tmp_path / "trainer.lock").unlink()
        assert another_trainer(tmp_path) == f"pid {holder.pid}, started 2026-01-01T00:00:00+00:00"
        (tmp_path / "trainer.lock").touch()  # a new, free lock file does not hide it either
        assert another_trainer(tmp_path) == f"pid {holder.pid}, started 2026-01-01T00:00:00+00:00"
    finally:
        holder.kill()
        holder.wait()
    assert another_trainer(tmp_path) is None


def test_a_finished_cell_writes_every_declared_output_at_the_end(tmp_path):
    """A second run that planned the same job removes its outputs while the cell trains (config.json and
    history.csv exist from the start): all four are written again when it finishes."""
    import torch

    from rnnrepro.train.common import write_run_outputs

    cfg = {"study": "pru", "model": "m"}
    write_run_outputs(tmp_path, cfg, {"w": torch.zeros(1)}, [{"epoch": 1, "val_loss": 2.0}], {"val_loss": 2.0})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FINISHED)
    assert json.loads((tmp_path / "config.json").read_text()) == cfg


def pid_file_processes(folder: Path, count: int, timeout: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout
    while len(pids := [int(p.read_text()) for p in folder.glob("*.pid") if p.read_text().strip()]) < count:
        assert time.monotonic() < deadline, f"{len(pids)} of {count} processes started"
        time.sleep(0.1)
    return pids


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat")
    return not (state.exists() and state.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def gone_soon(pids: list[int], timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(alive(pid) for pid in pids)


# A process that records its pid and starts a child that does the same, then waits (a Snakemake and its
# job's trainer, as far as signals go).
WORKER = """import os, subprocess, sys, time
folder = sys.argv[1]
open(os.path.join(folder, f"{os.getpid()}.pid"), "w").write(str(os.getpid()))
if len(sys.argv) < 3:
    subprocess.Popen([sys.executable, __file__, folder, "leaf"])
time.sleep(600)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_records_grow_killed_takes_its_units_with_it(tmp_path):
    """`records grow` runs each unit's Snakemake through rnnrepro.process_group: when grow dies, even by
    SIGKILL, the unit's whole process group (Snakemake, its jobs, their trainers) gets SIGTERM, as at
    grow's deadline; nothing is left running to clash with the next grow."""
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    pids = tmp_path / "pids"
    pids.mkdir()
    grow = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\n"
                             "subprocess.Popen([sys.executable, '-m', 'rnnrepro.process_group', '--', sys.executable, "
                             "sys.argv[1], sys.argv[2]], start_new_session=True)\ntime.sleep(600)",
                             str(worker), str(pids)])
    units = pid_file_processes(pids, 2)
    assert all(alive(pid) for pid in units)
    grow.kill()
    grow.wait()
    assert gone_soon(units), "the unit's processes outlived the grow that started them"


def test_grow_starts_units_through_the_process_group_and_runs_once_per_budget(tmp_path, monkeypatch):
    from rnnrepro.records import Grower, hold_grow_lock

    args = Namespace(minutes=1, threads=1, jobs=1, config=[])
    command = Grower("cpu", [], {}, {}, args).snakemake(["t"], 1, "--nolock")
    assert command[1:4] == ["-m", "rnnrepro.process_group", "--"] and command[5:7] == ["-m", "snakemake"]
    monkeypatch.chdir(tmp_path)
    first = hold_grow_lock("cpu")
    try:
        with pytest.raises(RuntimeError, match=rf"another `records grow --budget cpu` runs in this working tree "
                                               rf"\(pid {os.getpid()}, started "):
            hold_grow_lock("cpu")
        os.close(hold_grow_lock("reduced"))  # another budget's grow is free to run
    finally:
        os.close(first)
    os.close(hold_grow_lock("cpu"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_the_gpu_wrappers_command_ends_with_the_jobs_shell(tmp_path):
    """A training job is `bash -c "... python -m rnnrepro.gpus run -- python -m rnnrepro.train ..."`: the
    wrapper becomes the trainer. Killed, the shell would leave the trainer running while Snakemake
    removes the cell's files; the trainer gets SIGTERM instead (it writes its checkpoint and stops)."""
    pids = tmp_path / "pids"
    pids.mkdir()
    trainer = (f"import os, time; open({str(pids / 'trainer.pid')!r}, 'w').write(str(os.getpid())); "
               f"time.sleep(600)")
    shell = subprocess.Popen(["bash", "-c", f"{sys.executable} -m rnnrepro.gpus run -- {sys.executable} -c "
                                            f"\"{trainer}\"; true"],
                             env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    (pid,) = pid_file_processes(pids, 1)
    shell.kill()
    shell.wait()
    assert gone_soon([pid]), "the wrapper's command outlived the job's shell"


# --- a failing notebook, through Snakemake ----------------------------------------------------------

@pytest.mark.slow
def test_a_notebook_that_fails_leaves_its_tables_and_runs_again(tmp_path):
    """Snakemake removes a job's outputs before it runs and after it fails; a notebook's are update()
    outputs, so a failing rebuild leaves the last good table, and the next run plans the notebook again
    (Snakemake records the failed job as if it had succeeded: the rule's last_failure param differs)."""
    project = copy_project(tmp_path)
    target = f"{SMOKE}/tables/pru_counts.csv"
    table = project / target
    built = snakemake(project, "--profile", "profiles/smoke", target)
    assert built.returncode == 0, built.stderr[-3000:]
    good = table.read_bytes()
    notebook = project / "notebooks/pru_counts.py"
    notebook.write_text(notebook.read_text() + "\n# %%\nraise RuntimeError('a notebook broken on purpose')\n")
    failed = snakemake(project, "--profile", "profiles/smoke", target)
    assert failed.returncode != 0, failed.stderr[-2000:]
    log = project / grid.logs_dir("smoke") / "notebooks/pru_counts.log"
    assert "a notebook broken on purpose" in log.read_text()
    assert table.read_bytes() == good
    assert not list(table.parent.glob("*.partial.*"))
    # planned again, not taken for up to date (so the next run fails again until the notebook is fixed)
    planned = snakemake(project, "-n", "--profile", "profiles/smoke", target)
    assert "notebook_pru_counts" in planned.stdout, planned.stdout[-2000:]
