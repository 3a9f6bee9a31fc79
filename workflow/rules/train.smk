# One training job per cell: study x corpus x model x fraction x seed.


rule train_cell:
    input:
        unpack(train_inputs),
    output:
        config="results/runs/{study}/{corpus}/{model}/frac{fraction}/seed{seed}/config.json",
        history="results/runs/{study}/{corpus}/{model}/frac{fraction}/seed{seed}/history.csv",
        metrics="results/runs/{study}/{corpus}/{model}/frac{fraction}/seed{seed}/metrics.json",
        model="results/runs/{study}/{corpus}/{model}/frac{fraction}/seed{seed}/model.pt",
    log:
        "logs/train/{study}/{corpus}/{model}/frac{fraction}/seed{seed}.log",
    conda:
        ENV
    threads: config["threads"]
    resources:
        gpu=1,
    params:
        run_dir=lambda wildcards, output: Path(output.metrics).parent,
        config=cell_config,
    shell:
        "python -m rnnrepro.gpus run -- python -m rnnrepro.train --run-dir {params.run_dir} --config {params.config:q} > {log} 2>&1"
