# Recorded runs (records/<budget>/, docs/claims.md) stand in for training: a cell whose whole unit is
# recorded and current is copied into the results tree instead of trained (its config.json, history.csv
# and metrics.json, and the outputs of its evaluations), so a run with the repository's records trains
# only what they lack: a cell of your own, a stale or missing record. The restoring rules come first
# (ruleorder); where a cell's record cannot stand in (rnnrepro.records.Restorer says why: not recorded,
# stale, part of an unfinished unit, trained on this machine, or its weights are needed) their input is
# a file that does not exist, Snakemake discards them for that file, and the cell trains. `--config
# use_records=false` trains everything. The copies are new files (cp without -p): a record's own times
# would make Snakemake see its later files as newer than its first and copy it again.


ruleorder: restore_cell > train_cell
ruleorder: restore_evaluation > evaluate_cell
ruleorder: restore_speed > speed


rule restore_cell:
    input:
        unpack(recorded_cell),
    output:
        config=f"{RESULTS}/runs/{{study}}/{{corpus}}/{{model}}/frac{{fraction}}/seed{{seed}}/config.json",
        history=f"{RESULTS}/runs/{{study}}/{{corpus}}/{{model}}/frac{{fraction}}/seed{{seed}}/history.csv",
        metrics=f"{RESULTS}/runs/{{study}}/{{corpus}}/{{model}}/frac{{fraction}}/seed{{seed}}/metrics.json",
    log:
        f"{LOGS}/restore/{{study}}/{{corpus}}/{{model}}/frac{{fraction}}/seed{{seed}}.log",
    localrule: True
    conda:
        ENV
    shell:
        "(cp -v {input.config:q} {output.config:q} && cp -v {input.history:q} {output.history:q} && "
        "cp -v {input.metrics:q} {output.metrics:q}) > {log:q} 2>&1"


rule restore_evaluation:
    input:
        recorded_evaluation,
    output:
        f"{RESULTS}/runs/{{study}}/{{corpus}}/{{model}}/frac{{fraction}}/seed{{seed}}/{{evaluation}}.json",
    log:
        f"{LOGS}/restore/{{study}}/{{corpus}}/{{model}}/frac{{fraction}}/seed{{seed}}/{{evaluation}}.log",
    wildcard_constraints:
        evaluation=one_of(evaluation_names(STUDIES)) or "(?!)",
    localrule: True
    conda:
        ENV
    shell:
        "cp -v {input:q} {output:q} > {log:q} 2>&1"


rule restore_speed:
    input:
        recorded_speed,
    output:
        f"{RESULTS}/speed/{{study}}.json",
    log:
        f"{LOGS}/restore/speed/{{study}}.log",
    wildcard_constraints:
        study=one_of(speed_studies()) if speed_studies() else "(?!)",
    localrule: True
    conda:
        ENV
    shell:
        "cp -v {input:q} {output:q} > {log:q} 2>&1"
