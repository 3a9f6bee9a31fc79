"""The Snakemake workflow itself: lint, formatting, dry runs of the paper grid, config mistakes, the
SLURM profile without SLURM, and settings that must not retrain a cell. The end-to-end smoke run and
its tests are in tests/test_smoke_run.py."""

import re
import shutil
import subprocess

import pytest
from conftest import BIN, copy_project, snakemake

from rnnrepro.configuration import REPO_ROOT, load_study
from rnnrepro.slurm import command_line_executor, slurm_problem


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return copy_project(tmp_path_factory.mktemp("project"))


def test_lint_is_clean(project):
    result = snakemake(project, "--lint")
    assert result.returncode == 0, result.stderr
    assert "Lints for" not in result.stdout + result.stderr


def test_snakefmt_check():
    result = subprocess.run([str(BIN / "snakefmt"), "--check", "Snakefile", "workflow"], cwd=REPO_ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_dry_run_of_the_paper_table_lists_every_cell(project):
    result = snakemake(project, "-n", "--config", "budget=paper", "--", "results/tables/pru_table1.csv")
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    planned = set(re.findall(r"results/runs/pru/(\w+)/(\w+)/frac100/seed1111/metrics\.json", out))
    models = load_study("pru")["artifacts"]["table1"]["models"]
    assert planned == {(dataset, model) for dataset in ("ptb", "wt2") for model in models}
    assert re.search(r"train_cell\s+20\b", out)
    assert "data/raw/ptb/simple-examples.tgz" in out and "data/raw/wt2/wikitext-2-v1.zip" in out


def test_misspelled_config_key_stops_before_any_job(project):
    result = snakemake(project, "-n", "--config", "budgett=smoke")
    assert result.returncode != 0
    assert "unknown key 'budgett'" in result.stdout + result.stderr


def test_wrong_config_type_is_named(project):
    result = snakemake(project, "-n", "--config", "threads=many")
    assert result.returncode != 0
    assert "key 'threads'" in result.stdout + result.stderr


def test_executor_is_read_from_the_command_line_as_snakemake_reads_it(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.delenv("SNAKEMAKE_PROFILE", raising=False)
    assert command_line_executor(["snakemake", "--profile", "profiles/slurm", "all", "-n"]) == "slurm"
    assert command_line_executor(["snakemake", "--profile", "profiles/slurm", "--executor", "local", "-n"]) == "local"
    assert command_line_executor(["snakemake", "--cores", "2", "all"]) == "local"
    assert command_line_executor(["python", "my_script.py"]) is None  # Snakemake driven from Python


@pytest.mark.slow
def test_slurm_profile_without_slurm_warns_on_a_dry_run_and_stops_a_run(project, tmp_path):
    """No sbatch, squeue or sacct on PATH (whatever this machine has): only what Snakemake itself runs."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for command in ("which", "bash", "sh"):
        (tools / command).symlink_to(shutil.which(command))
    env = {"PATH": f"{BIN}:{tools}", "HOME": str(tmp_path)}
    assert slurm_problem("slurm", path=env["PATH"]) is not None

    def run(*args):
        return subprocess.run([str(BIN / "snakemake"), "--profile", "profiles/slurm", *args], cwd=project,
                              env=env, capture_output=True, text=True, timeout=600)

    said = "sbatch, squeue, sacct are not on PATH: this machine has no SLURM"
    local = "`snakemake --cores N all`"
    planned = run("results/tables/nlstm_models.csv", "-n")
    output = planned.stdout + planned.stderr  # a dry run logs to stdout
    assert planned.returncode == 0, output[-2000:]
    assert said in output and local in output and "a run would stop here" in output
    assert "notebook_nlstm_models" in output  # the plan is still shown
    stopped = run("results/tables/nlstm_models.csv")
    output = stopped.stdout + stopped.stderr
    assert stopped.returncode != 0
    assert said in output and local in output
    assert "Building DAG" not in output  # stopped before planning
    assert not (project / "results").exists()


@pytest.mark.slow
def test_device_and_threads_rerun_nothing_and_delete_nothing(tmp_path):
    """Where a job runs and how wide are not part of what Snakemake compares, nor is a precision that
    computes the same numbers: changing them after a cell finished plans no job, and `device=cuda`
    without CUDA stops before any job, deleting nothing."""
    project = copy_project(tmp_path)
    # the smoke grid's cheapest cells (the LRU study's 10 M GRU and LRU on PTB's character stand-in)
    target = "results/smoke/runs/lru/synth_char_small-ptb_char/gru_10m/frac100/seed1111/metrics.json"
    trained = snakemake(project, "--profile", "profiles/smoke", target)
    assert trained.returncode == 0, trained.stderr[-3000:]
    finished = {path: path.read_bytes() for path in (project / target).parent.iterdir() if path.is_file()}
    planned = snakemake(project, "-n", "--profile", "profiles/smoke", target, "--config", "device=auto")
    assert planned.returncode == 0 and "Nothing to be done" in planned.stdout + planned.stderr
    # tf32 on a CPU computes fp32's numbers: the same cell, nothing planned (it retrained every cell)
    planned = snakemake(project, "-n", "--profile", "profiles/smoke", target, "--config", "precision=tf32")
    assert planned.returncode == 0 and "Nothing to be done" in planned.stdout + planned.stderr, planned.stdout[-2000:]
    rerun = snakemake(project, "--profile", "profiles/smoke", target, "--config", "device=cuda", "threads=2")
    assert rerun.returncode == 0 and "Nothing to be done" in rerun.stdout + rerun.stderr, rerun.stderr[-3000:]
    # a job that has to run, with device=cuda on a machine without CUDA: stopped before it starts
    other = "results/smoke/runs/lru/synth_char_small-ptb_char/lru_10m/frac100/seed1111/metrics.json"
    refused = snakemake(project, "--profile", "profiles/smoke", other, "--config", "device=cuda")
    if refused.returncode == 0:
        pytest.skip("this machine has a CUDA device")
    assert "device: cuda was asked for" in refused.stdout + refused.stderr
    assert not (project / other).parent.exists()
    assert {path: path.read_bytes() for path in (project / target).parent.iterdir() if path.is_file()} == finished


@pytest.mark.slow
def test_two_budgets_on_one_corpus_leave_each_other_alone(tmp_path):
    """A budget's results live in its own tree: training a cell at one budget and then at another (here
    both on the synthetic PTB-char stand-in) plans nothing for, and changes nothing of, the first one's."""
    import yaml

    project = copy_project(tmp_path)
    study_file = project / "config/studies/lru.yaml"
    study = yaml.safe_load(study_file.read_text())
    study["budgets"]["cpu"] = study["budgets"]["smoke"]  # the same small cell, under another budget name
    study_file.write_text(yaml.safe_dump(study, sort_keys=False))
    cell = "lru/synth_char_small-ptb_char/gru_10m/frac100/seed1111/metrics.json"
    first = snakemake(project, "--profile", "profiles/smoke", f"results/cpu/runs/{cell}", "--config", "budget=cpu")
    assert first.returncode == 0, first.stderr[-3000:]
    cpu_run = (project / f"results/cpu/runs/{cell}").parent
    before = {path: path.read_bytes() for path in cpu_run.iterdir() if path.is_file()}
    second = snakemake(project, "--profile", "profiles/smoke", f"results/smoke/runs/{cell}")
    assert second.returncode == 0, second.stderr[-3000:]
    assert (project / f"results/smoke/runs/{cell}").exists()
    assert {path: path.read_bytes() for path in cpu_run.iterdir() if path.is_file()} == before
    for budget, target in (("cpu", f"results/cpu/runs/{cell}"), ("smoke", f"results/smoke/runs/{cell}")):
        again = snakemake(project, "-n", "--profile", "profiles/smoke", target, "--config", f"budget={budget}")
        assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr, budget
