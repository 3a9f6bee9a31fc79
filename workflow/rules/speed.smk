# One speed benchmark per study that declares `speed:` (the lrn study): seconds per training batch of
# each listed model's LM and of one layer forward + backward, on the device the job gets (a GPU when
# there is one). Separate from training, so the training cells' timings never feed the speed table.


rule speed:
    input:
        study="config/studies/{study}.yaml",
    output:
        f"{RESULTS}/speed/{{study}}.json",
    log:
        f"{LOGS}/speed/{{study}}.log",
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
        f"--output {{output:q}} {RUNTIME} > {{log:q}} 2>&1"
