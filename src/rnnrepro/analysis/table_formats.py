"""Every published table in three formats: the CSV a notebook writes, and beside it the same table as
LaTeX (``<name>.tex``) and Markdown (``<name>.md``).

    results/cpu/tables/pru_table1.csv   the table (what the scorecard and the results page read)
    results/cpu/tables/pru_table1.tex   a booktabs ``tabular`` to ``\\input`` into a paper (needs
                                        ``\\usepackage{booktabs}``)
    results/cpu/tables/pru_table1.md    a pipe table for a README, an issue or a notebook

The CSV is the table; the other two are written from it, every cell as the CSV spells it (the numbers
as :func:`rnnrepro.analysis.notebook.rounded` wrote them, so the three never disagree), by tabulate
(the library pandas' ``to_markdown`` calls): LaTeX's special characters escaped, columns of numbers
aligned right. Reading the CSV with the standard ``csv`` module keeps pandas out of the notebook
runner's process, which writes them (rnnrepro.analysis.run_notebook: every table of an artifact and of
the scorecard, once the notebook has succeeded and its columns are checked, at the moment the CSV is
replaced). They are not outputs the workflow declares: they travel with their CSV.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from tabulate import tabulate

#: file suffix -> tabulate's table format
FORMATS = {".tex": "latex_booktabs", ".md": "pipe"}


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _markdown_cell(text: str) -> str:
    """A cell inside a pipe table: a ``|`` would end the cell, a line break the row."""
    return " ".join(text.replace("|", r"\|").split())


def texts(csv_path: Path) -> dict[str, str]:
    """The table in ``csv_path`` as the text of each of FORMATS (suffix -> text). A column is aligned
    right when every cell it has is a finite number."""
    with open(csv_path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise ValueError(f"{csv_path} is empty: a table has at least its header row")
    header, body = rows[0], [row + [""] * (len(rows[0]) - len(row)) for row in rows[1:]]
    columns = list(zip(*body)) if body else [() for _ in header]
    align = ["right" if any(cell for cell in column) and all(_is_number(cell) for cell in column if cell)
             else "left" for column in columns]
    out = {}
    for suffix, tablefmt in FORMATS.items():
        cell = _markdown_cell if tablefmt == "pipe" else str
        text = tabulate([[cell(value) for value in row] for row in body], headers=[cell(h) for h in header],
                        tablefmt=tablefmt, disable_numparse=True, colalign=align)
        if not body and tablefmt.startswith("latex"):  # tabulate gives a table without rows no column spec
            text = text.replace(r"\begin{tabular}{}", r"\begin{tabular}{" + "l" * len(header) + "}", 1)
        out[suffix] = text + "\n"
    return out
