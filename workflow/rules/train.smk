# One training job per cell: study x corpus x model x fraction x seed.


def train_inputs(wildcards):
    cell = cell_of(wildcards)
    corpus = f"data/processed/{cell.corpus}"
    inputs = {
        "train": grid.train_file(cell.corpus, cell.fraction),
        "valid": f"{corpus}/valid.txt",
        "test": f"{corpus}/test.txt",
        "vocab": f"{corpus}/vocab.txt",
    }
    parent = grid.parent_cell(STUDIES[cell.study], cell)
    if parent is not None:
        inputs["init"] = f"{parent.run_dir}/model.pt"
    return inputs


def cell_config(wildcards):
    return json.dumps(grid.resolve_cell(STUDIES[wildcards.study], config, cell_of(wildcards)))


rule train_cell:
    input:
        unpack(train_inputs),
    output:
        config="results/runs/{study}/{corpus}/{model}/frac{fraction}/seed{seed}/config.json",
        history="results/runs/{study}/{corpus}/{model}/frac{fraction}/seed{seed}/history.csv",
        metrics="results/runs/{study}/{corpus}/{model}/frac{fraction}/seed{seed}/metrics.json",
        model="results/runs/{study}/{corpus}/{model}/frac{fraction}/seed{seed}/model.pt",
    params:
        run_dir=lambda wildcards, output: Path(output.metrics).parent,
        config=cell_config,
    log:
        "logs/train/{study}/{corpus}/{model}/frac{fraction}/seed{seed}.log",
    threads: config["threads"]
    resources:
        gpu=1,
    conda:
        ENV
    shell:
        "{PYTHON} -m rnnrepro.train --run-dir {params.run_dir} --config {params.config:q} > {log} 2>&1"
