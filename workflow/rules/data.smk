# Data: fetch (download with sha256 check, or generate a synthetic corpus) -> prepare (checks the raw
# file against fetch's record, then splits, vocabulary, stats) -> fraction subsets of the training
# split (nested prefixes). Derived datasets are made instead of downloaded: a text8-style corpus from
# another dataset's raw file, an autocomplete dataset from a prepared character-level dataset. Mirror
# layout and checks: docs/data.md.


# The mirror and the trust switch reach the job through its environment (RNNREPRO_DATA_MIRROR,
# RNNREPRO_TRUST_UNVERIFIED, set by the shell prefix in common.smk), not as rule params or in its
# command: Snakemake reruns a job whose params or command changed, and everything downstream, but where
# a checked file came from does not change it. Beside the raw file the job writes <file>.fetch.json (its
# sha256), which prepare checks.
# The paths of the data rules are relative and made of ids (dataset ids, the registry's file names), so
# a project folder whose path has a space splits none of them; the preparing rules keep their commands
# unquoted because Snakemake reruns a job whose command text changed, and with it every cell trained on
# its corpus (tests/test_commands.py lists the placeholders left unquoted).
rule fetch_dataset:
    output:
        "data/raw/{dataset}/{file}",
    log:
        "logs/data/fetch_{dataset}_{file}.log",
    wildcard_constraints:
        dataset=one_of(DATASETS),
    conda:
        ENV
    shell:
        "python -m rnnrepro.data fetch {wildcards.dataset} --dest data/raw/{wildcards.dataset} "
        "> {log:q} 2>&1"


rule prepare_dataset:
    input:
        raw_file,
    output:
        train="data/processed/{dataset}/train.txt",
        valid="data/processed/{dataset}/valid.txt",
        test="data/processed/{dataset}/test.txt",
        vocab="data/processed/{dataset}/vocab.txt",
        stats="data/processed/{dataset}/stats.json",
    log:
        "logs/data/prepare_{dataset}.log",
    wildcard_constraints:
        dataset=one_of(DATASETS),
    conda:
        ENV
    shell:
        "python -m rnnrepro.data prepare {wildcards.dataset} --raw {input} "
        "--out data/processed/{wildcards.dataset} > {log} 2>&1"


rule fraction_subset:
    input:
        rules.prepare_dataset.output.train,
    output:
        "data/processed/{dataset}/train.fraction{fraction}.txt",
    log:
        "logs/data/fraction_{dataset}_{fraction}.log",
    conda:
        ENV
    params:
        tokenizer=lambda wildcards: DATASETS[wildcards.dataset].tokenizer,
    shell:
        "python -m rnnrepro.data fraction --train {input} --tokenizer {params.tokenizer} "
        "--percent {wildcards.fraction} --out {output} > {log} 2>&1"


# A text8-style corpus (wikifil.pl's rules, text8's format) cleaned from the splits of its source's
# raw file, e.g. wt2_text8style from data/raw/wt2/wikitext-2-v1.zip.
rule prepare_text8style:
    input:
        text8style_raw_file,
    output:
        train="data/processed/{dataset}/train.txt",
        valid="data/processed/{dataset}/valid.txt",
        test="data/processed/{dataset}/test.txt",
        vocab="data/processed/{dataset}/vocab.txt",
        stats="data/processed/{dataset}/stats.json",
    log:
        "logs/data/text8style_{dataset}.log",
    wildcard_constraints:
        dataset=one_of(TEXT8STYLE_DATASETS),
    conda:
        ENV
    shell:
        "python -m rnnrepro.data text8style {wildcards.dataset} --raw {input} "
        "--out data/processed/{wildcards.dataset} > {log} 2>&1"


rule prepare_autocomplete:
    input:
        unpack(autocomplete_source),
    output:
        train="data/processed/{dataset}/train.txt",
        valid="data/processed/{dataset}/valid.txt",
        test="data/processed/{dataset}/test.txt",
        vocab="data/processed/{dataset}/vocab.txt",
        stats="data/processed/{dataset}/stats.json",
    log:
        "logs/data/autocomplete_{dataset}.log",
    wildcard_constraints:
        dataset=one_of(AUTOCOMPLETE_DATASETS),
    conda:
        ENV
    params:
        source=lambda wildcards, input: Path(input.train).parent,
    shell:
        "python -m rnnrepro.data autocomplete {wildcards.dataset} --source {params.source} "
        "--out data/processed/{wildcards.dataset} > {log} 2>&1"
