"""The results page's artifacts: each one's caption, figures (embedded as data URIs) and tables, with
numbers as a published table gives them and each ``paper_*`` column beside the column it is the paper's
value of."""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .. import grid
from ..analysis.notebook import readable
from ..analysis.table_formats import FORMATS
from ..configuration import project_root
from ..report import CAPTION_MARKDOWN, artifact_caption_markdown
from ..analysis.claims import IN_PART

#: a table longer than this shows its first rows; the CSV beside the page holds them all
MAX_ROWS = 40
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: the forms written beside each CSV (rnnrepro.analysis.table_formats), as the page names them
FORM_NAMES = {".tex": "LaTeX", ".md": "Markdown"}


class DamagedOutput(ValueError):
    """A table or figure the page would show cannot be read; the message names it and how to rebuild it."""


def _rebuild(path: Path, budget: str, what: str) -> DamagedOutput:
    return DamagedOutput(f"{path} {what}: the page shows no damaged table or figure. Rebuild it: `python -m "
                         f"rnnrepro.records render --budget {budget}` where the budget is recorded, else rerun "
                         f"your snakemake command with the target {path} and --force")


def number_text(value) -> str:
    """A table's value as the page shows it: numbers as a published table gives them (four significant
    digits, or a paper's number as printed), thousands not grouped, nothing for a missing value."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        value = readable(value)
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:g}" if abs(value) >= 1e-4 \
            else f"{value:.3g}"
    return str(value)


def column_order(columns: list[str]) -> list[str]:
    """The columns a person reads, in the table's order, each ``paper_<x>`` right after ``<x>`` (after
    ``<x>_std`` where there is one); the per-seed ``<x>_samples`` left out (they are in the CSV)."""
    shown = [c for c in columns if not c.endswith("_samples")]
    papers = {c for c in shown if c.startswith("paper_") and c.removeprefix("paper_") in shown}
    order = []
    for column in shown:
        if column in papers:
            continue
        order.append(column)
        paper = f"paper_{column}"
        if paper in papers and f"{column}_std" not in shown:
            order.append(paper)
        if column.endswith("_std") and f"paper_{column.removesuffix('_std')}" in papers:
            order.append(f"paper_{column.removesuffix('_std')}")
    return order


@dataclass
class TableView:
    name: str
    href: str                     # the CSV, relative to the page
    columns: list[str]
    paper_columns: list[str]
    rows: list[list[tuple[str, bool]]]   # (text, whether a number)
    total: int                    # rows in the CSV
    forms: list[tuple[str, str]] = field(default_factory=list)  # (LaTeX or Markdown, its file beside the CSV)


def table_view(path: Path, page_dir: Path, max_rows: int = MAX_ROWS, budget: str = "") -> TableView:
    try:
        table = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as e:
        raise _rebuild(path, budget, f"is not a CSV table ({str(e).strip().splitlines()[0]})") from None
    columns = column_order([str(c) for c in table.columns])
    rows = [[(number_text(value), isinstance(value, (int, float)) and not isinstance(value, bool)) for value in row]
            for row in table[columns].head(max_rows).itertuples(index=False)]
    forms = [(FORM_NAMES[suffix], path.with_suffix(suffix).relative_to(page_dir).as_posix())
             for suffix in FORMATS if path.with_suffix(suffix).is_file()]
    return TableView(path.stem, path.relative_to(page_dir).as_posix(), columns,
                     [c for c in columns if c.startswith("paper_")], rows, len(table), forms)


def data_uri(png: Path, budget: str = "") -> str:
    data = png.read_bytes()
    if not data.startswith(PNG_SIGNATURE):
        raise _rebuild(png, budget, "is empty (0 bytes)" if not data else "is not a PNG image")
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


@dataclass
class ArtifactView:
    study: str
    artifact: str
    anchor: str
    title: str
    caption: str                  # HTML (the Markdown caption, rendered)
    figures: list[tuple[str, str]] = field(default_factory=list)     # (name, data URI)
    tables: list[TableView] = field(default_factory=list)
    missing: str = ""             # why it has no outputs here


def artifact_views(studies: dict[str, dict], config: dict, root: Path, states: dict[str, str]) -> list[ArtifactView]:
    """Every artifact of the budget's studies, its outputs read from the results tree ``root``;
    ``states``: why an artifact was not made (``<study>/<artifact>`` -> reason, from a render)."""
    views = []
    project = project_root()
    for name, study in studies.items():
        for artifact in grid.artifacts(study, config):
            spec = study["artifacts"][artifact]
            caption = artifact_caption_markdown(study, config, artifact, project)
            title = caption.splitlines()[0].strip("*")
            view = ArtifactView(name, artifact, f"{name}-{artifact}", title,
                                CAPTION_MARKDOWN.render("\n".join(caption.splitlines()[2:])))
            tables = [root / "tables" / f"{t}.csv" for t in spec["tables"]]
            figures = [root / "figures" / f"{f}.png" for f in spec["figures"]]
            view.tables = [table_view(t, root, budget=config["budget"]) for t in tables if t.is_file()]
            view.figures = [(f.stem, data_uri(f, config["budget"])) for f in figures if f.is_file()]
            absent = [p.name for p in tables + figures if not p.is_file()]
            state = states.get(f"{name}/{artifact}", "")
            if not absent and state.startswith(IN_PART):
                view.missing = state  # made from the records of some of its rows: which wait, and why
            if absent:
                view.missing = (f"{', '.join(absent)} not made" + (f": {state}" if state else
                                f" (build them with `snakemake {(tables + figures)[0]}`)"))
            views.append(view)
    return views
