# Config validation and the target list, built from the study files (never hard-coded).
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

SRC = Path(workflow.basedir) / "src"
# The Snakefile reads the config through the project's own (torch-free) modules.
sys.path.insert(0, str(SRC))
from rnnrepro import grid, precision
from rnnrepro.configuration import ConfigError, load_run_config, load_study
from rnnrepro.custom_cells import check_custom_cells, export as export_custom_cells
from rnnrepro.report import artifact_caption, claims_caption
from rnnrepro.runtime import DEVICE_ENV
from rnnrepro.slurm import command_line_executor, slurm_problem
from rnnrepro.train.progress_file import another_trainer
from rnnrepro.analysis.claims import check_claims
from rnnrepro.analysis.failed_notebooks import last_failure
from rnnrepro.data.autocomplete import AUTOCOMPLETE_DATASETS
from rnnrepro.data.registry import DATASETS
from rnnrepro.data.text8style import TEXT8STYLE_DATASETS
from rnnrepro.evaluation.plan import (
    artifact_evaluation_files,
    check_evaluations,
    evaluation_names,
    evaluation_spec,
)


@contextmanager
def config_errors_stop_the_workflow():
    """A ConfigError raised inside (a study or the run config is wrong) stops the workflow as a
    WorkflowError, which Snakemake prints as its message alone (the message names the key and the fix).
    """
    try:
        yield
    except ConfigError as error:
        raise WorkflowError(str(error))


with config_errors_stop_the_workflow():
    # a config file given with --configfile (cells of your own, docs/custom_cells.md) is named in errors
    CUSTOM_SOURCE = (
        " ".join(os.path.relpath(path) for path in workflow.overwrite_configfiles)
        or "config/config.yaml"
    )
    # --config values arrive as strings (`true`, `[1111,1112]`): read as the schema's types, in place
    load_run_config(
        config,
        source=" merged with ".join(
            dict.fromkeys(["config/config.yaml", CUSTOM_SOURCE])
        ),
        command_line=workflow.config_settings.config,
    )
    STUDIES = {
        name: load_study(name, Path(workflow.basedir), {}) for name in config["studies"]
    }
    # cells of your own: checked against the study files, then added to the studies they name; the
    # notebooks and the scorecard that the rules run see them too (they inherit this environment)
    if config["custom_cells"]:
        check_custom_cells(config["custom_cells"], STUDIES, CUSTOM_SOURCE, config)
        STUDIES = {
            name: load_study(
                name, Path(workflow.basedir), config["custom_cells"], CUSTOM_SOURCE
            )
            for name in config["studies"]
        }
    export_custom_cells(config["custom_cells"], CUSTOM_SOURCE)
    # A second scale of a budget (cpu_wide) exists only in the study files that define it.
    STUDIES = grid.studies_with_budget(STUDIES, config["budget"])

# tf32 where the jobs run on a CPU computes exactly what fp32 does (no TF32 there): its cells are fp32's,
# so asking for it retrains nothing. Decided where the jobs run: `device: cpu`, or `auto` in a local run
# on a machine without CUDA (a job on a cluster node parses the workflow again and must find the same).
if (
    config["precision"] == "tf32"
    and (config["device"] == "cpu" or workflow.is_main_process and workflow.local_exec)
    and precision.same_numbers_as("tf32", precision.device_type_of(config["device"]))
    == precision.DEFAULT
):
    config["precision"] = precision.DEFAULT
    logger.info(
        "precision tf32 on a CPU gives exactly fp32's numbers (CPUs have no TF32): the cells are the "
        "fp32 ones, and no finished cell is trained again"
    )

# profiles/slurm on a machine without SLURM (docs/cluster.md): a dry run warns, since planning before
# submitting on the cluster is fine; a real run stops here, before planning a job it cannot submit
if workflow.is_main_process:
    SLURM_PROBLEM = slurm_problem(command_line_executor())
    if SLURM_PROBLEM and not workflow.output_settings.dryrun:
        raise WorkflowError(SLURM_PROBLEM)
    if SLURM_PROBLEM:
        logger.warning(
            f"Warning: {SLURM_PROBLEM}. (A dry run only plans; a run would stop here.)"
        )

# This budget's results tree and logs: results/ and logs/ for smoke, results/<budget>/ and
# logs/<budget>/ for the others, so budgets on the same corpus never share a run folder or a table.
RESULTS = grid.results_dir(config["budget"])
LOGS = grid.logs_dir(config["budget"])
# Its run folders: runs/ for fp32 cells, runs-bf16/ (runs-tf32/ on a GPU) for cells of a precision whose
# numbers differ, so that they never replace a finished fp32 cell (rnnrepro.grid.runs_dir).
RUNS = grid.runs_dir(config["budget"], config["precision"])
# Where and how wide a job runs: the device in the jobs' environment (RNNREPRO_DEVICE, set by the shell
# prefix below) and the job's threads on its command line, not in its params, so changing either
# neither reruns a finished job nor discards a resume checkpoint (Snakemake compares params, and
# compares a rule's shell command before its placeholders are filled in).
RUNTIME = "--threads {threads}"


onstart:
    # Before the first job of a real run (not a dry run): `device: cuda` on a machine without CUDA would
    # otherwise fail in every job. Jobs sent to a cluster are checked where they run.
    if config["device"] == "cuda" and workflow.local_exec:
        import torch

        if not torch.cuda.is_available():
            raise WorkflowError(
                "device: cuda was asked for (config/config.yaml or --config), but this machine has no "
                "visible CUDA device. Use device=auto (CUDA where there is one, else the CPU) or "
                "device=cpu; no job was run and no file was changed."
            )


ENV = "../envs/rnnrepro.yaml"
# Every rule runs the project's modules from this checkout (also inside a conda env), on the run
# config's device. (The prefix is formatted like a shell command: {{ }} escape braces.)
shell.prefix(
    f"set -euo pipefail; export PYTHONPATH='{SRC}':${{{{PYTHONPATH:-}}}}; "
    f"export {DEVICE_ENV}={config['device']}; "
)


wildcard_constraints:
    study="[a-z][a-z0-9]*",
    dataset="[a-z][a-z0-9_]*",
    # a run folder's data key: the corpus, or `corpus-dataset` (grid.data_key)
    corpus="[a-z][a-z0-9_]*(-[a-z][a-z0-9_]*)?",
    model="[a-z][a-z0-9_]*",
    fraction="[0-9]+",
    seed="[0-9]+",
    file="[^/]+",


def artifact_outputs(study, artifact):
    spec = STUDIES[study]["artifacts"][artifact]
    return {
        "tables": [f"{RESULTS}/tables/{name}.csv" for name in spec["tables"]],
        "figures": [f"{RESULTS}/figures/{name}.png" for name in spec["figures"]],
        "notebook": f"{RESULTS}/notebooks/{study}_{artifact}.ipynb",
    }


def report_output(path, study, artifact, kind):
    """An artifact's table or figure, shown in `snakemake --report` under its study and artifact."""
    return report(
        path,
        caption="../report/caption.rst",
        category=STUDIES[study]["title"],
        subcategory=artifact,
        labels={"artifact": artifact, "type": kind, "name": Path(path).stem},
    )


def all_artifacts():
    targets = []
    for study in STUDIES:
        for artifact in grid.artifacts(STUDIES[study], config):
            out = artifact_outputs(study, artifact)
            targets += out["tables"] + out["figures"] + [out["notebook"]]
    # the claims scorecard (rule claims in analysis.smk)
    return targets + [
        f"{RESULTS}/tables/claims.csv",
        f"{RESULTS}/figures/claims.png",
        f"{RESULTS}/notebooks/claims.ipynb",
    ]


def all_tables():
    """Every artifact table of every study (the claims scorecard reads them)."""
    return [
        table
        for study in STUDIES
        for artifact in grid.artifacts(STUDIES[study], config)
        for table in artifact_outputs(study, artifact)["tables"]
    ]


def cell_of(wildcards):
    return grid.Cell(
        wildcards.study,
        wildcards.corpus,
        wildcards.model,
        int(wildcards.fraction),
        int(wildcards.seed),
        config["budget"],
        config["precision"],
    )


def raw_file(wildcards):
    return f"data/raw/{wildcards.dataset}/{DATASETS[wildcards.dataset].file_name}"


def one_of(ids):
    """A wildcard constraint matching exactly these ids."""
    return "|".join(sorted(ids))


def autocomplete_source(wildcards):
    source = AUTOCOMPLETE_DATASETS[wildcards.dataset].source
    return {
        split: f"data/processed/{source}/{split}.txt"
        for split in ("train", "valid", "test")
    }


def text8style_raw_file(wildcards):
    """The raw file a text8-style corpus is cleaned from: its source dataset's."""
    source = TEXT8STYLE_DATASETS[wildcards.dataset].source
    return f"data/raw/{source}/{DATASETS[source].file_name}"


def trained_elsewhere(cell):
    """Stop at planning when another process on this machine trains this cell now (left running by a
    killed Snakemake or `records grow`, or a run let in by --unlock): this run would remove the job's
    outputs before starting it and again when its trainer refuses, while the other writes them. Asked of
    every cell the run plans, before any job starts; a dry run, which removes nothing, only warns.
    """
    if not workflow.is_main_process or cell.run_dir in TRAINED_ELSEWHERE:
        return
    other = another_trainer(Path(cell.run_dir))
    if other is None:
        return
    TRAINED_ELSEWHERE.add(cell.run_dir)
    message = (
        f"{cell.run_dir}: another process on this machine is training this cell ({other}). Wait for it "
        "to end (`python -m rnnrepro.status`) or stop it, then run this again: it would remove that "
        "cell's files"
    )
    if workflow.output_settings.dryrun:
        logger.warning(
            f"Warning: {message}. (A dry run only plans; a run would stop here.)"
        )
        return
    raise WorkflowError(f"{message}; no job was run and no file was changed.")


TRAINED_ELSEWHERE = set()


def train_inputs(wildcards):
    cell = cell_of(wildcards)
    trained_elsewhere(cell)
    trained_on = grid.trained_corpus(STUDIES[cell.study], config, cell)
    corpus = f"data/processed/{trained_on}"
    inputs = {
        "train": grid.train_file(trained_on, cell.fraction),
        "valid": f"{corpus}/valid.txt",
        "test": f"{corpus}/test.txt",
        "vocab": f"{corpus}/vocab.txt",
    }
    parent = grid.parent_cell(STUDIES[cell.study], cell)
    if parent is not None:
        inputs["init"] = f"{parent.run_dir}/model.pt"
    return inputs


def cell_config(wildcards):
    cfg = grid.resolve_cell(STUDIES[wildcards.study], config, cell_of(wildcards))
    # bf16 where only the machine can tell (oneDNN's bfloat16 LSTM needs AVX-512): the trial a training
    # job starts with, made here (a dry run too) so that no job starts, and no file goes, first.
    if workflow.is_main_process and workflow.local_exec:
        problem = precision.machine_problem(
            cfg["architecture"], config["precision"], config["device"]
        )
        if problem:
            raise WorkflowError(
                f"study {cfg['study']!r}, model {cfg['model']!r}: {problem}. No job was run and no "
                "file was changed."
            )
    return json.dumps(cfg)


def artifact_metrics(study, artifact):
    cells = grid.artifact_cells(STUDIES[study], config, artifact)
    return [f"{cell.run_dir}/metrics.json" for cell in cells]


def evaluation_inputs(wildcards):
    """A cell's weights and the data it was trained on (evaluate.smk; the statistics read the training split)."""
    inputs = train_inputs(wildcards)
    inputs.pop("init", None)
    return {**inputs, "model": f"{cell_of(wildcards).run_dir}/model.pt"}


def evaluation_config(wildcards):
    return json.dumps(
        evaluation_spec(
            STUDIES[wildcards.study], config, wildcards.evaluation, wildcards.corpus
        )
    )


# The speed benchmark (speed.smk): studies that declare `speed:`, and a study's resolved settings.
def speed_studies():
    return [study for study in STUDIES if "speed" in STUDIES[study]]


def speed_settings(wildcards):
    """The study's speed block under the current budget, with each model resolved like a training cell
    (at the paper's widths where the block says `widths: paper`)."""
    study = STUDIES[wildcards.study]
    settings = {**study["speed"], **grid.budget_of(study, config).get("speed", {})}
    shapes = (
        {**config, "budget": "paper"} if settings.get("widths") == "paper" else config
    )
    data_key = grid.data_key(study, shapes, settings["dataset"])
    cells = {
        model: grid.resolve_cell(
            study,
            shapes,
            grid.Cell(
                wildcards.study,
                data_key,
                model,
                100,
                config["seeds"][0],
                shapes["budget"],
            ),
        )
        for model in settings["models"]
    }
    return json.dumps({**settings, "cells": cells, "budget": config["budget"]})
