# Config validation and the target list, built from the study files (never hard-coded).
import json
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

SRC = Path(workflow.basedir) / "src"
# The Snakefile reads the config through the project's own (torch-free) modules.
sys.path.insert(0, str(SRC))
from rnnrepro import grid
from rnnrepro.configuration import ConfigError, load_run_config, load_study
from rnnrepro.data.registry import DATASETS

try:
    load_run_config(config)
    STUDIES = {name: load_study(name) for name in config["studies"]}
except ConfigError as error:
    raise WorkflowError(str(error))

ENV = "../envs/rnnrepro.yaml"
PYTHON = f"PYTHONPATH={SRC}${{PYTHONPATH:+:$PYTHONPATH}} python"


wildcard_constraints:
    study="[a-z][a-z0-9]*",
    dataset="[a-z][a-z0-9_]*",
    corpus="[a-z][a-z0-9_]*",
    model="[a-z][a-z0-9_]*",
    fraction="[0-9]+",
    seed="[0-9]+",
    file="[^/]+",


def artifact_outputs(study, artifact):
    spec = STUDIES[study]["artifacts"][artifact]
    return {
        "tables": [f"results/tables/{name}.csv" for name in spec["tables"]],
        "figures": [f"results/figures/{name}.png" for name in spec["figures"]],
        "notebook": f"results/notebooks/{study}_{artifact}.ipynb",
    }


def all_artifacts():
    targets = []
    for study in STUDIES:
        for artifact in STUDIES[study]["artifacts"]:
            out = artifact_outputs(study, artifact)
            targets += out["tables"] + out["figures"] + [out["notebook"]]
    return targets


def cell_of(wildcards):
    return grid.Cell(wildcards.study, wildcards.corpus, wildcards.model, int(wildcards.fraction),
                     int(wildcards.seed))


def mirror():
    return str(Path(config["data_mirror"]).resolve()) if config["data_mirror"] and "://" not in config[
        "data_mirror"] else config["data_mirror"]
