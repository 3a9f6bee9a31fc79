"""profiles/slurm against a real SLURM (tests/slurm_cluster.py) through the SLURM executor plugin.

A whole study's smoke grid (data rules, training cells, notebooks) runs as SLURM jobs; a training job
cancelled with scancel, and one preempted by a higher-priority job, resume from their checkpoints; a
finished cell is never retrained. The last test checks that all of them end with the numbers and
tables of the local smoke run (training is deterministic on the CPU).
"""

import subprocess
import time
import warnings
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from conftest import BIN, TIMING_KEYS, copy_project, numbers, snakemake

import slurm_cluster
from rnnrepro import grid
from rnnrepro.configuration import REPO_ROOT, load_study, load_yaml

UNAVAILABLE = slurm_cluster.unavailable_reason()
if UNAVAILABLE:
    warnings.warn(f"SLURM tests skipped: {UNAVAILABLE}")  # shows in pytest's summary without -rs
pytestmark = [pytest.mark.slow, pytest.mark.skipif(UNAVAILABLE is not None, reason=str(UNAVAILABLE))]

# The smoke budget, as profiles/smoke sets it: its settings, and as `--config` words.
SMOKE_SETTINGS = load_yaml(REPO_ROOT / "profiles" / "smoke" / "run-config.yaml")
SMOKE_CONFIG = [f"{key}={value}" for key, value in SMOKE_SETTINGS.items()]
# What goes through SLURM whole: one artifact that runs every kind of job the profile sends there, the
# data rules, training cells (each asking for a GPU) and a notebook: the nlstm study's smoke tuning (its
# corpus, 2 training cells, 1 notebook). Every artifact of every study runs the same rules, so more of
# them would repeat minutes of the local smoke run to show nothing more. (The learning rate's choice,
# the scorecard and the results page are local rules: they never reach SLURM.) The interrupted cell is PRU Table 1's g=4 cell on PTB's stand-in: its smoke epochs (about
# 4 s each on the 2-core box) leave time to interrupt it after its first.
GRID_STUDY, GRID_ARTIFACT = "nlstm", "tuning"
INTERRUPTED_STUDY, INTERRUPTED_MODEL, INTERRUPTED_DATASET = "pru", "pru_g4_k2_m1400", "ptb"


# What each test below ran on SLURM, compared with the local smoke run by the last test of this file:
# name -> (project, metrics files, tables), paths relative to the project.
TO_COMPARE: dict[str, tuple[Path, list[str], list[str]]] = {}


def smoke_run_config() -> dict:
    """config/config.yaml with profiles/smoke's settings over it: the smoke run's run config."""
    return {**load_yaml(REPO_ROOT / "config" / "config.yaml"), **SMOKE_SETTINGS}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    slurm = slurm_cluster.SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        yield slurm.start()
    finally:
        slurm.stop()
    assert not slurm.job_processes(), "a job's processes outlived the cluster"


def start_snakemake(cluster, project: Path, targets: str | list[str], *config: str) -> subprocess.Popen:
    """`snakemake --profile profiles/slurm` on the login node (here: this machine), in the background."""
    env = {"PATH": f"{BIN}:{cluster.env['PATH']}", "HOME": str(project), "SLURM_CONF": cluster.env["SLURM_CONF"]}
    out = open(project / "snakemake.out", "a")
    # Status checks from the first second on (the site default, 40 s, would only slow the test).
    targets = [targets] if isinstance(targets, str) else targets
    return subprocess.Popen([str(BIN / "snakemake"), *targets, "--profile", "profiles/slurm",
                             "--slurm-init-seconds-before-status-checks", "1", "--config", *SMOKE_CONFIG, *config],
                            cwd=project, env=env, stdout=out, stderr=subprocess.STDOUT)


def finished(proc: subprocess.Popen, project: Path, timeout: int = 1800) -> None:
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert code == 0, (project / "snakemake.out").read_text()[-5000:]


@pytest.fixture(scope="module")
def cell() -> grid.Cell:
    """The cell the interruption tests train, from the smoke grid (so these tests need not wait for the
    shared smoke run until they compare their numbers with it); it needs no other cell."""
    study, run_config = load_study(INTERRUPTED_STUDY), smoke_run_config()
    corpus = grid.data_key(study, run_config, INTERRUPTED_DATASET)
    [cell] = [cell for artifact in study["artifacts"] for cell in grid.artifact_cells(study, run_config, artifact)
              if cell.model == INTERRUPTED_MODEL and cell.corpus == corpus][:1]
    assert grid.parent_cell(study, cell) is None
    return cell


def comment_of(cell: grid.Cell) -> str:
    """What the plugin gives a training job as sbatch --comment."""
    return f"rule_train_cell_wildcards_{cell.study}_{cell.corpus}_{cell.model}_{cell.fraction}_{cell.seed}"


def rule_of(comment: str) -> str:
    return comment.removeprefix("rule_").split("_wildcards_")[0]


def new_jobs(cluster, before: set) -> list[dict]:
    return [job for job in cluster.jobs() if job["JobIDRaw"] not in before]


def project_with_data(cell: grid.Cell, dest: Path) -> Path:
    """A project copy with the cell's smoke corpus prepared locally: only the training cell is left to run."""
    project = copy_project(dest)
    prepared = snakemake(project, "--profile", "profiles/smoke", f"{cell.run_dir}/metrics.json",
                         "--omit-from", "train_cell")
    assert prepared.returncode == 0, prepared.stderr[-5000:]
    return project


def log_path(cell: grid.Cell) -> Path:
    """The training job's log (workflow/rules/train.smk)."""
    return Path(grid.logs_dir(cell.budget), "train", f"{cell.key}.log")


def interrupt_after_first_epoch(cluster, project: Path, cell, proc: subprocess.Popen, interrupt) -> str:
    """Wait until the cell's first epoch is checkpointed (its row is in history.csv), then interrupt its
    SLURM job; returns its id."""
    history, deadline = project / cell.run_dir / "history.csv", time.time() + 600
    while not (history.exists() and len(history.read_text().splitlines()) > 1):
        assert proc.poll() is None, (project / "snakemake.out").read_text()[-5000:]
        assert time.time() < deadline, "the training job did not finish its first epoch in 10 minutes"
        time.sleep(0.2)
    [job_id] = [job["JobID"] for job in cluster.queue() if job["Comment"] == comment_of(cell)]
    interrupt(job_id)
    return job_id


def test_cancelled_training_job_resumes_from_its_checkpoint(cluster, cell, tmp_path):
    project = project_with_data(cell, tmp_path)
    target = f"{cell.run_dir}/metrics.json"
    before = {job["JobIDRaw"] for job in cluster.jobs()}
    proc = start_snakemake(cluster, project, target)
    cancelled = interrupt_after_first_epoch(cluster, project, cell, proc, lambda job: cluster.run("scancel", job))
    finished(proc, project)  # the profile's retries resubmit the cell

    attempts = new_jobs(cluster, before)
    assert {job["Comment"] for job in attempts} == {comment_of(cell)}
    assert attempts[0]["JobIDRaw"] == cancelled
    assert [job["State"].split()[0] for job in attempts] == ["CANCELLED", "COMPLETED"]
    assert "resuming from" in (project / log_path(cell)).read_text()
    TO_COMPARE["the cancelled cell"] = (project, [target], [])

    # A finished cell is never retrained.
    before = {job["JobIDRaw"] for job in cluster.jobs()}
    finished(start_snakemake(cluster, project, target), project)
    assert new_jobs(cluster, before) == []
    assert "Nothing to be done" in (project / "snakemake.out").read_text()


def test_preempted_training_job_is_requeued_and_resumes(cluster, cell, tmp_path):
    project = project_with_data(cell, tmp_path)
    target = f"{cell.run_dir}/metrics.json"
    before = {job["JobIDRaw"] for job in cluster.jobs()}
    proc = start_snakemake(cluster, project, target)

    def preempt(_job):  # a job of the higher-priority partition needs both GPUs
        cluster.run("sbatch", "-p", "urgent", "--gpus=2", "--mem=100", "-o", "/dev/null", "--wrap", "sleep 2")

    preempted = interrupt_after_first_epoch(cluster, project, cell, proc, preempt)
    finished(proc, project)

    history = cluster.run("sacct", "--duplicates", "-X", "-P", "-n", "-j", preempted, "--format=State")
    assert history.split()[0] in {"PREEMPTED", "REQUEUED"} and history.split()[-1] == "COMPLETED", history
    training = [job["JobIDRaw"] for job in new_jobs(cluster, before) if job["Comment"] == comment_of(cell)]
    assert training == [preempted]  # the same SLURM job ran again: SLURM requeued it, not Snakemake
    assert "resuming from" in (project / log_path(cell)).read_text()
    TO_COMPARE["the preempted cell"] = (project, [target], [])


def test_smoke_pipeline_runs_on_slurm(cluster, tmp_path):
    project = copy_project(tmp_path)
    study = load_study(GRID_STUDY)
    tables = [f"results/smoke/tables/{name}.csv" for name in study["artifacts"][GRID_ARTIFACT]["tables"]]
    before = {job["JobIDRaw"] for job in cluster.jobs()}
    finished(start_snakemake(cluster, project, tables, f"studies=[{GRID_STUDY}]"), project)

    jobs = new_jobs(cluster, before)
    rules = Counter(rule_of(job["Comment"]) for job in jobs)
    cells = set(grid.artifact_cells(study, smoke_run_config(), GRID_ARTIFACT))
    assert rules["train_cell"] == len(cells) > 1
    assert rules["fetch_dataset"] == 1 and rules["prepare_autocomplete"] == 1, rules  # data rules ran there too
    assert rules[f"notebook_{GRID_STUDY}_{GRID_ARTIFACT}"] == 1 and len(jobs) == sum(rules.values()), rules
    assert {job["State"] for job in jobs} == {"COMPLETED"}
    for job in jobs:  # one GPU for each training job (profiles/slurm), none for the rest
        assert ("gres/gpu=1" in job["AllocTRES"]) == (rule_of(job["Comment"]) == "train_cell"), job

    TO_COMPARE["the grid"] = (project, [f"{cell.run_dir}/metrics.json" for cell in sorted(cells, key=str)], tables)


def test_slurm_results_equal_the_local_smoke_run(request):
    """Every number the SLURM runs above made is the local smoke run's (training is deterministic on the
    CPU). Asked for last, so the SLURM tests run beside the smoke run instead of waiting for it."""
    missing = [name for name in ("the grid", "the cancelled cell", "the preempted cell") if name not in TO_COMPARE]
    assert not missing, f"nothing to compare from {', '.join(missing)}: its test above failed"
    smoke_project = request.getfixturevalue("smoke_project")
    for name, (project, metrics_files, tables) in TO_COMPARE.items():
        for metrics in metrics_files:
            assert numbers(project / metrics) == numbers(smoke_project / metrics), (name, metrics)
        for table in tables:
            ours, local = pd.read_csv(project / table), pd.read_csv(smoke_project / table)
            reproduced = [c for c in local.columns if not c.startswith("paper_") and c not in TIMING_KEYS]
            pd.testing.assert_frame_equal(ours[reproduced], local[reproduced], obj=f"{name}: {table}")
