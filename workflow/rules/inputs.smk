# The rules' input and params functions: a job's cell from its wildcards, and what it reads (its data, its
# parent and tuning cells, the records that stand in for training, its resolved config). The settings
# and the studies they read (STUDIES, RESULTS, RUNS, ...) are common.smk's.


def cell_of(wildcards):
    return grid.Cell(
        wildcards.study,
        wildcards.corpus,
        wildcards.model,
        int(wildcards.fraction),
        int(wildcards.seed),
        config["budget"],
        config["precision"],
    )


def raw_file(wildcards):
    return f"data/raw/{wildcards.dataset}/{DATASETS[wildcards.dataset].file_name}"


def one_of(ids):
    """A wildcard constraint matching exactly these ids."""
    return "|".join(sorted(ids))


def autocomplete_source(wildcards):
    source = AUTOCOMPLETE_DATASETS[wildcards.dataset].source
    return {
        split: f"data/processed/{source}/{split}.txt"
        for split in ("train", "valid", "test")
    }


def text8style_raw_file(wildcards):
    """The raw file a text8-style corpus is cleaned from: its source dataset's."""
    source = TEXT8STYLE_DATASETS[wildcards.dataset].source
    return f"data/raw/{source}/{DATASETS[source].file_name}"


def trained_elsewhere(cell):
    """Stop at planning when another process on this machine trains this cell now (left running by a
    killed Snakemake or `records grow`, or a run let in by --unlock): this run would remove the job's
    outputs before starting it and again when its trainer refuses, while the other writes them. Asked of
    every cell the run plans, before any job starts; a dry run, which removes nothing, only warns.
    """
    if not workflow.is_main_process or cell.run_dir in TRAINED_ELSEWHERE:
        return
    other = another_trainer(Path(cell.run_dir))
    if other is None:
        return
    TRAINED_ELSEWHERE.add(cell.run_dir)
    message = (
        f"{cell.run_dir}: another process on this machine is training this cell ({other}). Wait for it "
        "to end (`python -m rnnrepro.status`) or stop it, then run this again: it would remove that "
        "cell's files"
    )
    if workflow.output_settings.dryrun:
        logger.warning(
            f"Warning: {message}. (A dry run only plans; a run would stop here.)"
        )
        return
    raise WorkflowError(f"{message}; no job was run and no file was changed.")


TRAINED_ELSEWHERE = set()


def stale_copy(cell):
    """Stop at planning where a cell's run folder holds a copy of its record that went stale since it was
    copied (rnnrepro.record_checks.stale_copy): Snakemake would plan nothing for the cell, and the notebooks
    would refuse its files. Asked of every cell the run plans."""
    if not workflow.is_main_process:
        return
    why = record_checks.stale_copy(STUDIES[cell.study], config, cell)
    if why:
        raise WorkflowError(
            f"{cell.run_dir}/ holds a copy of its record made for another config ({why}), and Snakemake "
            f"does not retrain a cell whose files exist. Delete the copy, `rm -r {cell.run_dir}`, and run "
            "this again: the cell trains (or is restored, where its record is current); `records grow` "
            "deletes such a copy itself. No job was run and no file was changed."
        )


def data_inputs(cell):
    """The prepared corpus a cell trains and is evaluated on."""
    trained_on = grid.trained_corpus(STUDIES[cell.study], config, cell)
    corpus = f"data/processed/{trained_on}"
    return {
        "train": grid.train_file(trained_on, cell.fraction),
        "valid": f"{corpus}/valid.txt",
        "test": f"{corpus}/test.txt",
        "vocab": f"{corpus}/vocab.txt",
    }


def train_inputs(wildcards):
    cell = cell_of(wildcards)
    trained_elsewhere(cell)
    stale_copy(cell)
    inputs = data_inputs(cell)
    parent = grid.parent_cell(STUDIES[cell.study], cell)
    if parent is not None:
        inputs["init"] = f"{parent.run_dir}/model.pt"
    if grid.tuning_cells_of(STUDIES[cell.study], config, cell):
        # its learning rate is chosen from its tuning cells first (the checkpoint lr_choice, train.smk)
        inputs["lr_choice"] = checkpoints.lr_choice.get(
            study=cell.study,
            corpus=cell.corpus,
            model=tuning.tuned_root(STUDIES[cell.study], cell.model),
            fraction=cell.fraction,
        ).output[0]
    return inputs


def tuning_cell(wildcards):
    """A cell of the tuned model (any seed) whose tuning the lr_choice job reads."""
    return grid.Cell(
        wildcards.study,
        wildcards.corpus,
        wildcards.model,
        int(wildcards.fraction),
        0,
        config["budget"],
        config["precision"],
    )


def tuning_inputs(wildcards):
    """The metrics of a tuned model's tuning cells (rnnrepro.tuning)."""
    cell = tuning_cell(wildcards)
    variants = grid.tuning_cells_of(STUDIES[cell.study], config, cell)
    if not variants:
        raise WorkflowError(
            f"{cell.study}/{cell.corpus}/{cell.model}/frac{cell.fraction}: the {config['budget']} budget "
            "does not tune this model (its study file's tuning artifact)"
        )
    return [f"{variant.run_dir}/metrics.json" for variant in variants]


def tuning_cell_json(wildcards):
    return json.dumps(dataclasses.asdict(tuning_cell(wildcards)))


# Recorded runs that stand in for training (records.smk): asked of each cell the run plans, once.
RESTORER = (
    records.Restorer(
        STUDIES,
        config,
        targets.weights_read(STUDIES, config, command_line.requested_targets() or []),
    )
    if config["use_records"]
    else None
)
RESTORE_PROBLEMS = {}


def restore_problem(cell):
    """Why the cell trains rather than being restored from its record, or None. A record that exists but
    cannot be used (stale, damaged, its unit unfinished) is named once, in the main process.
    """
    if RESTORER is None:
        return "use_records is false"
    if cell not in RESTORE_PROBLEMS:
        problem = RESTORE_PROBLEMS[cell] = RESTORER.problem(cell)
        if (
            problem
            and workflow.is_main_process
            and records.record_of(cell).is_dir()
            and "trained on this machine" not in problem
        ):
            logger.warning(
                f"[rnnrepro] not restored from its record, so it trains: {problem}"
            )
    return RESTORE_PROBLEMS[cell]


def not_restored(cell):
    """An input that no file and no rule provides; Snakemake drops a restoring rule that asks for it (quietly,
    since another rule makes the file) and trains the cell."""
    return str(records.record_of(cell) / "(not restored)")


def recorded_cell(wildcards):
    """The record of a cell, where it stands in for training it."""
    cell = cell_of(wildcards)
    run = records.record_of(cell)
    names = (("config", "json"), ("history", "csv"), ("metrics", "json"))
    if restore_problem(cell):
        return {name: not_restored(cell) for name, _ in names}
    return {name: f"{run}/{name}.{ext}" for name, ext in names}


def recorded_evaluation(wildcards):
    """The recorded output of an evaluation of a cell restored from its record."""
    cell = cell_of(wildcards)
    record = records.record_of(cell) / f"{wildcards.evaluation}.json"
    if restore_problem(cell) or not record.exists():
        return not_restored(cell)
    return str(record)


def recorded_speed(wildcards):
    """A study's recorded speed benchmark, unless this machine measured one of its own."""
    record = (
        records.record_dir(records.RECORDS, config["budget"])
        / "speed"
        / f"{wildcards.study}.json"
    )
    local = Path(RESULTS, "speed", f"{wildcards.study}.json")
    if (
        RESTORER is None
        or not record.exists()
        or local.exists()
        and local.read_bytes() != record.read_bytes()
    ):
        return str(record.with_name(f"{wildcards.study} (not restored)"))
    return str(record)


def cell_config(wildcards):
    try:
        cfg = grid.resolve_cell(STUDIES[wildcards.study], config, cell_of(wildcards))
    except tuning.TuningPending as pending:
        # planned before its tuning has run (the checkpoint lr_choice): Snakemake plans the cell again,
        # with the rate chosen, once the checkpoint has run, and never runs it with this placeholder
        return json.dumps({"tuning_pending": str(pending)})
    # bf16 where only the machine can tell (oneDNN's bfloat16 LSTM needs AVX-512): the trial a training
    # job starts with, made here (a dry run too) so that no job starts, and no file goes, first.
    if workflow.is_main_process and workflow.local_exec:
        problem = precision.machine_problem(
            cfg["architecture"], config["precision"], config["device"]
        )
        if problem:
            raise WorkflowError(
                f"study {cfg['study']!r}, model {cfg['model']!r}: {problem}. No job was run and no "
                "file was changed."
            )
    return json.dumps(cfg)


def evaluation_inputs(wildcards):
    """A cell's weights and the data it was trained on (evaluate.smk; the statistics read the training split)."""
    cell = cell_of(wildcards)
    return {**data_inputs(cell), "model": f"{cell.run_dir}/model.pt"}


def evaluation_config(wildcards):
    return json.dumps(
        evaluation_spec(
            STUDIES[wildcards.study], config, wildcards.evaluation, wildcards.corpus
        )
    )


# The speed benchmark (speed.smk): studies that declare `speed:`, and a study's resolved settings.
def speed_studies():
    return [study for study in STUDIES if "speed" in STUDIES[study]]


def speed_settings(wildcards):
    """The study's speed block under the current budget, with each model resolved like a training cell
    (at the paper's widths where the block says `widths: paper`)."""
    study = STUDIES[wildcards.study]
    settings = {**study["speed"], **grid.budget_of(study, config).get("speed", {})}
    shapes = (
        {**config, "budget": "paper"} if settings.get("widths") == "paper" else config
    )
    data_key = grid.data_key(study, shapes, settings["dataset"])
    cells = {
        model: grid.resolve_cell(
            study,
            shapes,
            grid.Cell(
                wildcards.study,
                data_key,
                model,
                100,
                config["seeds"][0],
                shapes["budget"],
            ),
        )
        for model in settings["models"]
    }
    return json.dumps({**settings, "cells": cells, "budget": config["budget"]})
