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
