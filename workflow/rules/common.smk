# Config validation, the workflow's settings and the target list, built from the study files (never
# hard-coded). The rules' input functions are inputs.smk's.
import dataclasses
import json
import os
import shlex
import sys
from contextlib import contextmanager
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.settings.types import DeploymentMethod

# SRC is on sys.path (config_file.smk): the project's own (torch-free) modules, from this checkout
from rnnrepro import (
    command_line,
    grid,
    precision,
    record_checks,
    records,
    targets,
    tuning,
)
from rnnrepro.artifact_inputs import inputs_list, notebook_inputs, refresh_inputs_list
from rnnrepro.configuration import ConfigError, budgets, load_run_config
from rnnrepro.custom_cell_checks import check_custom_cells
from rnnrepro.custom_cells import export as export_custom_cells
from rnnrepro.grid import load_study  # the study with the run's cells of your own
from rnnrepro.report import artifact_caption, claims_caption
from rnnrepro.runtime import DEVICE_ENV, file_size_limit_problem
from rnnrepro.slurm import command_line_executor, slurm_problem
from rnnrepro.train.progress_file import another_trainer
from rnnrepro.analysis.claims import check_claims
from rnnrepro.analysis.claims import outputs as claims_outputs
from rnnrepro.analysis.failed_notebooks import last_failure
from rnnrepro.data.autocomplete import AUTOCOMPLETE_DATASETS
from rnnrepro.data.registry import DATASETS
from rnnrepro.data.transfer import MIRROR_ENV, TRUST_ENV
from rnnrepro.data.text8style import TEXT8STYLE_DATASETS
from rnnrepro.evaluation.plan import (
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
    # every budget's outputs are known from these (a target of another budget is named as such)
    EVERY_BUDGETS_STUDIES = STUDIES
    # A second scale of a budget (cpu_wide), or a budget of a few studies (paper_start), exists only in
    # the study files that define it.
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

# This budget's results tree and logs: results/ and logs/ for the default budget (paper),
# results/<budget>/ and logs/<budget>/ for every other one, smoke included, so budgets on the same
# corpus never share a run folder or a table (rnnrepro.layout).
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


def shell_word(text):
    """``text`` as one word of the shell prefix (quoted; braces doubled, as the prefix is formatted
    like a shell command)."""
    return shlex.quote(str(text)).replace("{", "{{").replace("}", "}}")


# Every rule runs the project's modules from this checkout (also inside a conda env), on the run
# config's device, with the Python that runs Snakemake: its folder comes first on PATH, so `python` in
# a rule is the interpreter that has the project's packages even where the shell's PATH lacks them
# (a .venv not activated). Under --use-conda the job's conda environment provides python instead.
USES_CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
INTERPRETER = (
    ""
    if USES_CONDA or not sys.executable
    else f'export PATH={shell_word(Path(sys.executable).parent)}:"$PATH"; '
)
# Where data may come from (data.smk's fetch): set only where the config sets it, so that an empty
# data_mirror leaves the environment's RNNREPRO_DATA_MIRROR in force.
DATA_SOURCE = (
    f"export {MIRROR_ENV}={shell_word(config['data_mirror'])}; "
    if config["data_mirror"]
    else ""
) + (f"export {TRUST_ENV}=1; " if config["trust_unverified_downloads"] else "")
shell.prefix(
    f"set -euo pipefail; export PYTHONPATH={shell_word(SRC)}:${{{{PYTHONPATH:-}}}}; "
    f"export {DEVICE_ENV}={config['device']}; {DATA_SOURCE}{INTERPRETER}"
)


def check_the_command():
    """The command line's targets against every budget's outputs (rnnrepro.targets), and one line where
    the run config's budget is not the one the command's profile sets. In the main process only, once
    every rule is defined (the Snakefile calls it last)."""
    if not workflow.is_main_process:
        return
    requested = command_line.requested_targets()
    if requested is None:  # Snakemake driven from Python: no command line to read
        return
    for line in grid.earlier_layout():
        logger.warning(f"[rnnrepro] warning: {line}")
    file_size = file_size_limit_problem()
    if file_size:
        logger.warning(f"[rnnrepro] warning: {file_size}")
    replaced = command_line.replaced_budget(config["budget"], CUSTOM_SOURCE)
    if replaced:
        cells = targets.training_cells(STUDIES, config, requested)
        untrained = sum(
            not Path(cell.run_dir, "metrics.json").exists()
            and restore_problem(cell) is not None
            for cell in cells
        )
        logger.warning(
            f"[rnnrepro] budget {config['budget']}, {replaced}: the targets need "
            f"{len(cells)} training cells, {untrained} of them not trained yet (in {RUNS}/ "
            f"or current in records/)"
        )
    study_files = [
        path.stem for path in Path(workflow.basedir, "config/studies").glob("*.yaml")
    ]

    def problems(names):
        rules = [rule.name for rule in workflow.rules]
        return targets.problems(
            names,
            EVERY_BUDGETS_STUDIES,
            config["budget"],
            budgets(),
            rules,
            command_line.command_for,
            study_files,
        )

    found = problems(requested)
    for option, names in command_line.named_jobs().items():
        found += [f"{option} {problem}" for problem in problems(names)]
    if found:
        raise WorkflowError("\n".join(found))


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


# The report's captions (rnnrepro.report), one file per artifact, written where the command builds a
# report (`--report`, or Snakemake driven from Python): files, not rule params, so that a dry run does
# not print them and a changed caption reruns no notebook.
WRITES_REPORT = command_line.builds_report()


def inputs_list_of(study, artifact, outputs):
    """The notebook rule's input function for the artifact's inputs list (rnnrepro.artifact_inputs):
    written by the main process when the DAG is built (not by --lint), read as it is by a job's own.
    """

    def inputs_list_input(wildcards):
        if not workflow.is_main_process:
            return [str(inputs_list(config["budget"], study, artifact))]
        return refresh_inputs_list(
            STUDIES[study],
            config,
            artifact,
            [*outputs["tables"], *outputs["figures"], outputs["notebook"]],
            workflow.output_settings.dryrun,
        )

    return inputs_list_input


def caption_file(name, caption):
    """The caption file of artifact ``name`` (``caption()`` builds its text), written when a report is built;
    its text is shown as written (Jinja, which reads caption files, is told to leave it alone).
    """
    path = Path(LOGS, "report", f"{name}.rst").absolute()
    if WRITES_REPORT and workflow.is_main_process:
        text = f"{{% raw %}}\n{caption()}{{% endraw %}}\n"
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            written = path.with_suffix(".rst.tmp")
            written.write_text(text)
            written.replace(path)
    return str(path)


def report_output(path, study, artifact, kind):
    """An artifact's table or figure, shown in `snakemake --report` under its study and artifact."""
    return report(
        path,
        caption=caption_file(
            f"{study}_{artifact}",
            lambda: artifact_caption(
                STUDIES[study], config, artifact, Path(workflow.basedir)
            ),
        ),
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
    scorecard = claims_outputs(RESULTS, list(STUDIES))
    return (
        targets
        + scorecard["tables"]
        + scorecard["figures"]
        + [f"{RESULTS}/notebooks/claims.ipynb"]
    )


def claimed_tables():
    """Every artifact table a claim of its study reads (the claims scorecard's inputs)."""
    return [
        f"{RESULTS}/tables/{table}.csv"
        for study in STUDIES
        for artifact in grid.artifacts(STUDIES[study], config)
        for table in targets.claimed(
            STUDIES[study], STUDIES[study]["artifacts"][artifact]["tables"]
        )
    ]
