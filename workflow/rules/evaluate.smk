# Analyses of trained cells (rnnrepro.evaluation; docs/evaluation.md): evaluation <name> of a study
# (its `evaluations:` entry) over one cell's model.pt, written to <run dir>/<name>.json. The artifacts
# that list it depend on it (analysis.smk). No training: a changed evaluation setting reruns only this.
with config_errors_stop_the_workflow():
    for _study in STUDIES.values():
        check_evaluations(_study)


rule evaluate_cell:
    input:
        unpack(evaluation_inputs),
    output:
        f"{RUNS}/{{study}}/{{corpus}}/{{model}}/frac{{fraction}}/seed{{seed}}/{{evaluation}}.json",
    log:
        f"{LOGS}/evaluate/{{study}}/{{corpus}}/{{model}}/frac{{fraction}}/seed{{seed}}/{{evaluation}}.log",
    wildcard_constraints:
        # only declared names, so a run folder's config.json or metrics.json never matches
        evaluation=one_of(evaluation_names(STUDIES)) or "(?!)",
    conda:
        ENV
    threads: config["threads"]
    resources:
        gpu=1,
    params:
        run_dir=lambda wildcards, input: Path(input.model).parent,
        config=evaluation_config,
    shell:
        "python -m rnnrepro.gpus run -- python -m rnnrepro.evaluation --run-dir {params.run_dir:q} "
        "--name {wildcards.evaluation} --config {params.config:q} --output {output:q} "
        f"{RUNTIME} > {{log:q}} 2>&1"
