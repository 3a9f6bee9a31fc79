# One speed benchmark per study that declares `speed:` (the lrn study): seconds per training batch of
# each listed model's LM and of one layer forward + backward, on the device the job gets (a GPU when
# there is one). Separate from training, so the training cells' timings never feed the speed table.


def speed_studies():
    return [study for study in STUDIES if "speed" in STUDIES[study]]


def speed_settings(wildcards):
    """The study's speed block under the current budget, with each model resolved like a training cell."""
    study = STUDIES[wildcards.study]
    settings = {**study["speed"], **grid.budget_of(study, config).get("speed", {})}
    data_key = grid.data_key(study, config, settings["dataset"])
    cells = {
        model: grid.resolve_cell(study, config, grid.Cell(wildcards.study, data_key, model, 100, config["seeds"][0]))
        for model in settings["models"]
    }
    return json.dumps({**settings, "cells": cells, "device": config["device"], "threads": config["threads"]})


rule speed:
    input:
        study="config/studies/{study}.yaml",
    output:
        "results/speed/{study}.json",
    log:
        "logs/speed/{study}.log",
    wildcard_constraints:
        study=one_of(speed_studies()) if speed_studies() else "(?!)",
    conda:
        ENV
    threads: config["threads"]
    resources:
        gpu=1,
    params:
        settings=speed_settings,
    shell:
        "python -m rnnrepro.gpus run -- python -m rnnrepro.analysis.lrn speed --settings {params.settings:q} "
        "--output {output} > {log} 2>&1"
