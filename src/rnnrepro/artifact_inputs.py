"""The files an artifact's notebook reads, and their list kept beside its executed notebook.

``<results>/notebooks/<study>_<artifact>.inputs.txt`` lists, one path a line, every run file the
artifact's notebook reads under the run's config: each cell's ``metrics.json``, the evaluation outputs
it lists, the weights where it reads them (``reads_weights``), its speed result. The file is an input
of the notebook's rule, written by the workflow's main process when it is parsed where it is missing or
its list changed (:func:`refresh_inputs_list`; a dry run only where the artifact has outputs already), so a change of the grid (a cell of your
own added, another seed) makes the file newer than the table and Snakemake runs the notebook again.
Snakemake sees such a change by itself only in outputs it made (their metadata keep the inputs): the
tables that ``records render`` wrote carry none, and without this file a run that adds a cell to a
rendered table would find the table up to date and leave the cell out. ``render`` writes the same list
before it renders, so a rendered table stays up to date until the grid changes. No rule writes it: a
rule's job would cost a Snakemake start of its own per artifact.

Torch-free: the Snakefile imports it.
"""

from __future__ import annotations

from pathlib import Path

from . import grid
from .evaluation.plan import artifact_evaluation_files


def notebook_inputs(study: dict, config: dict, artifact: str) -> dict[str, list[str]]:
    """The run files an artifact's notebook reads, by kind (the notebook rule's inputs)."""
    spec = study["artifacts"][artifact]
    cells = grid.artifact_cells(study, config, artifact)
    return {
        "metrics": [f"{cell.run_dir}/metrics.json" for cell in cells],
        "evaluations": artifact_evaluation_files(study, config, artifact),
        "weights": [f"{cell.run_dir}/model.pt" for cell in cells] if spec.get("reads_weights") else [],
        "speed": [f"{grid.results_dir(config['budget'])}/speed/{study['study']}.json"] if spec.get("speed") else [],
    }


def inputs_list(budget: str, study: str, artifact: str) -> Path:
    return Path(grid.results_dir(budget), "notebooks", f"{study}_{artifact}.inputs.txt")


def _text(study: dict, config: dict, artifact: str) -> str:
    return "".join(f"{line}\n" for files in notebook_inputs(study, config, artifact).values() for line in files)


def write_inputs_list(study: dict, config: dict, artifact: str) -> Path:
    """Write the artifact's inputs list where its text changed (else leave the file, and its time, alone)."""
    path = inputs_list(config["budget"], study["study"], artifact)
    text = _text(study, config, artifact)
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        written = path.with_name(path.name + ".tmp")
        written.write_text(text)
        written.replace(path)
    return path


def refresh_inputs_list(study: dict, config: dict, artifact: str, outputs: list[str], dry_run: bool) -> list[str]:
    """The artifact's inputs list (its path, as a list of one), written where it is missing or holds
    another list: an earlier list, or none beside tables made before this list was kept (Snakemake would
    find those up to date whatever their inputs, so they are made again once). A dry run writes nothing
    where neither the list nor any of the artifact's ``outputs`` exists (the notebook runs anyway, its
    outputs being missing) and returns no input there."""
    path = inputs_list(config["budget"], study["study"], artifact)
    if dry_run and not path.exists() and not any(Path(output).exists() for output in outputs):
        return []
    return [str(write_inputs_list(study, config, artifact))]