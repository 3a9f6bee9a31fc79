"""Captions of the Snakemake report (``snakemake --report report.html``), one per artifact.

Every table and figure an artifact's notebook writes is marked ``report()`` in
``workflow/rules/analysis.smk``; its caption (a file per artifact the workflow writes when it builds a
report, ``<logs>/report/<study>_<artifact>.rst``) is the text :func:`artifact_caption` builds from the
files that define the artifact, never written by hand (the claims scorecard's: :func:`claims_caption`):

- what it shows and which paper artifact it replicates: the notebook's first markdown cell (its title
  and description) and the study's title;
- the budget and the data it was made from: the run config and the artifact's cells under that budget
  (paper datasets, the corpora actually trained on, models, fractions, seeds);
- where the paper's numbers come from: the study file's ``paper.<artifact>`` entry and the artifact's
  ``paper_source``, which names the place (a table, a figure read off, the authors' code).

No torch: the Snakefile calls this when it builds the rules.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from markdown_it import MarkdownIt

from . import grid

# Captions are Markdown without raw HTML: HTML in a notebook's description, a study file or a config (a
# caption quotes all three) is shown as text, so none of them can put a script or a form into a page.
# markdown-it's own link check drops javascript:, vbscript: and data: links (but data:image/...).
CAPTION_MARKDOWN = MarkdownIt("commonmark", {"html": False})
MARKDOWN_CELL = re.compile(r"^# %% \[markdown\]\n((?:#.*\n?)+)", re.MULTILINE)


def notebook_header(notebook: Path) -> tuple[str, str]:
    """(title, description) of a jupytext percent notebook's first markdown cell."""
    if not notebook.exists():  # the rule that needs it says so; the workflow still parses
        return notebook.stem, ""
    match = MARKDOWN_CELL.search(notebook.read_text())
    if match is None:
        return notebook.stem, ""
    lines = [line.removeprefix("#").removeprefix(" ") for line in match.group(1).splitlines()]
    title = next((line.removeprefix("# ") for line in lines if line.startswith("# ")), notebook.stem)
    body = [line for line in lines if not line.startswith("# ")]
    return title, "\n".join(body).strip()


def as_rst(markdown: str) -> str:
    """A Markdown caption as reStructuredText: rendered to HTML by markdown-it and embedded raw (the
    notebooks' descriptions are Markdown, with lists and underscores that reStructuredText reads otherwise)."""
    html = CAPTION_MARKDOWN.render(markdown)
    return ".. raw:: html\n\n" + textwrap.indent(html, "   ") + "\n"


def _data_lines(study: dict, config: dict, artifact: str) -> list[str]:
    cells = grid.artifact_cells(study, config, artifact)
    if not cells:
        return ["No training: the notebook computes it from the study file and the models' definitions."]
    datasets = {}
    for cell in cells:
        dataset = grid.dataset_for(study, config, cell.corpus)
        datasets.setdefault(dataset, grid.corpus_for(study, config, dataset))
    data = ", ".join(dataset if corpus == dataset else f"{dataset} (trained on the stand-in {corpus})"
                     for dataset, corpus in datasets.items())
    models = sorted({cell.model for cell in cells})
    fractions = sorted({cell.fraction for cell in cells})
    seeds = sorted({cell.seed for cell in cells})
    return [f"Data: {data}.",
            f"Training cells: {len(cells)} ({len(models)} models x {len(fractions)} data fraction(s) "
            f"{', '.join(f'{f} %' for f in fractions)} x seeds {', '.join(map(str, seeds))}), "
            f"under `{grid.runs_dir(config['budget'])}/{study['study']}/`."]


def _added_cell_lines(study: dict, artifact: str) -> list[str]:
    """The cells of your own in an artifact (config `custom_cells`, docs/custom_cells.md), if any."""
    from .cells import is_outside_cell

    added = [f"`{model}` (`{study['models'][model]['cell']}`)" for model in study["artifacts"][artifact]["models"]
             if is_outside_cell(study["models"][model]["cell"])]
    if not added:
        return []
    return [f"Cells of your own added beside the baselines (`custom_cells`, no paper values): "
            f"{', '.join(added)}.", ""]


def artifact_caption_markdown(study: dict, config: dict, artifact: str, root: Path) -> str:
    """The caption of an artifact's tables and figures (see the module docstring), as Markdown: the
    results page (rnnrepro.results_page) shows it as it is, the Snakemake report through
    :func:`artifact_caption`."""
    spec = study["artifacts"][artifact]
    title, description = notebook_header(root / spec["notebook"])
    budget = config["budget"]
    if study["paper"].get(artifact):  # then the study file names their source (rnnrepro.configuration)
        paper = (f"Paper values (the `paper_*` columns) come from `paper.{artifact}` in "
                 f"`config/studies/{study['study']}.yaml`. Their source: {spec['paper_source']}.")
    else:
        paper = (f"Paper values: none listed under `paper.{artifact}` in `config/studies/{study['study']}.yaml`; "
                 f"the description above says what the paper reports for it.")
    lines = [
        f"**{title}**",
        "",
        f"Replicates: {study['title']}, artifact `{artifact}`.",
        "",
        description,
        "",
        f"Budget: `{budget}`" + (" (synthetic stand-in corpora: only the shape is comparable, not the numbers)."
                                    if budget == "smoke" else "."),
        "",
        *_data_lines(study, config, artifact),
        "",
        *_added_cell_lines(study, artifact),
        paper,
        "",
        f"Made by `{spec['notebook']}` (executed copy: "
        f"`{grid.results_dir(budget)}/notebooks/{study['study']}_{artifact}.ipynb`).",
    ]
    return "\n".join(lines) + "\n"


def artifact_caption(study: dict, config: dict, artifact: str, root: Path) -> str:
    """The caption of an artifact's tables and figures, as reStructuredText (the Snakemake report's)."""
    return as_rst(artifact_caption_markdown(study, config, artifact, root))


def claims_caption(config: dict, studies: dict[str, dict], root: Path) -> str:
    """The caption of the claims scorecard (table and figure)."""
    title, description = notebook_header(root / "notebooks" / "claims.py")
    claims = sum(len(study.get("claims", {})) for study in studies.values())
    return as_rst("\n".join([
        f"**{title}**",
        "",
        f"Replicates: the papers' claims, {claims} of them, from the study files of "
        f"{', '.join(study['title'] for study in studies.values())}.",
        "",
        description,
        "",
        f"Budget: `{config['budget']}`; seeds {', '.join(map(str, config['seeds']))}; the data of each "
        f"claim's artifact (see that artifact's caption).",
        "",
        "Paper values: each claim's paper numbers come from its study file's `paper:` section, and the "
        "claim's `source` there names the place in the paper.",
        "",
        f"Made by `notebooks/claims.py` (executed copy: `{grid.results_dir(config['budget'])}/notebooks/claims.ipynb`).",
    ]) + "\n")
