# One training job per cell: study x corpus x model x fraction x seed.


rule train_cell:
    input:
        unpack(train_inputs),
    output:
        config=f"{RUNS}/{{study}}/{{corpus}}/{{model}}/frac{{fraction}}/seed{{seed}}/config.json",
        history=f"{RUNS}/{{study}}/{{corpus}}/{{model}}/frac{{fraction}}/seed{{seed}}/history.csv",
        metrics=f"{RUNS}/{{study}}/{{corpus}}/{{model}}/frac{{fraction}}/seed{{seed}}/metrics.json",
        model=f"{RUNS}/{{study}}/{{corpus}}/{{model}}/frac{{fraction}}/seed{{seed}}/model.pt",
    log:
        f"{LOGS}/train/{{study}}/{{corpus}}/{{model}}/frac{{fraction}}/seed{{seed}}.log",
    conda:
        ENV
    threads: config["threads"]
    resources:
        gpu=1,
    params:
        run_dir=lambda wildcards, output: Path(output.metrics).parent,
        config=cell_config,
    shell:
        "python -m rnnrepro.gpus run -- python -m rnnrepro.train --run-dir {params.run_dir:q} "
        f"--config {{params.config:q}} {RUNTIME} > {{log:q}} 2>&1"


# The learning rate of a tuned model (rnnrepro.tuning): its tuning cells, one per factor of the budget's
# grid, train first; this job writes their curve and the factor chosen on validation, and the cells it
# tunes are planned once it has run (a checkpoint: their config.json holds the rate chosen).
checkpoint lr_choice:
    input:
        tuning_inputs,
    output:
        f"{RESULTS}/tuning/{{study}}/{{corpus}}/{{model}}/frac{{fraction}}.json",
    log:
        f"{LOGS}/tuning/{{study}}/{{corpus}}/{{model}}/frac{{fraction}}.log",
    localrule: True
    conda:
        ENV
    params:
        cell=tuning_cell_json,
    shell:
        "python -m rnnrepro.lr_choice --cell {params.cell:q} --output {output:q} > {log:q} 2>&1"
