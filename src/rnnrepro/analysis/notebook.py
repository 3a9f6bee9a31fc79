"""What every artifact notebook does around its analysis: read its inputs, write its outputs.

An artifact notebook (``notebooks/<study>_<artifact>.py``) is run by papermill with the parameters its
rule passes (``study``, ``artifact``, ``metrics_files``, ``tables``, ``figures``; see
:mod:`rnnrepro.analysis.run_notebook`). Around its own analysis it needs only::

    from rnnrepro.analysis.notebook import save, save_figure, setup

    study_config, cells = setup(study, metrics_files)
    table = ...                                      # the analysis
    save(table, tables[0], complete=["test_ppl"])
    ...                                              # the figure
    save_figure(fig, figures[0])

A notebook that reads no cells' metrics (evaluation outputs, weights, a benchmark, or nothing trained)
loads its study with :func:`rnnrepro.grid.load_study` and reads its own inputs.

Tables are written for a person to read (:func:`rounded`): a number keeps four significant digits, or
as many as it has up to six (the paper's numbers as printed, sizes in millions), whole numbers are
written as integers; the per-seed values the scorecard reads (``<value>_samples``) keep full precision.

Importing this module selects matplotlib's non-interactive Agg backend: the notebooks run headless
(under Snakemake, on a cluster node, in ``records render``) and their figures are the PNG files they
write, so the executed notebook keeps no copy of them.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pandas as pd

from ..grid import load_study
from ..train.files import write_atomic, write_text_atomic
from .results import read_cells

matplotlib.use("Agg")  # see the module docstring

#: the significant digits a computed number keeps in a published table
SIGNIFICANT = 4
#: a number with at most this many significant digits is kept as it is (a paper's number as printed)
EXACT = 6
# the columns that name a row of an artifact table, where it has them (shown when a value is missing)
ROW_NAMES = ["dataset", "model", "stage", "unit", "method", "fraction", "seed"]


def setup(study: str, metrics_files: list[str]) -> tuple[dict, pd.DataFrame]:
    """The study file (validated, with any cells of your own) and one row per training cell the
    notebook is given (:func:`rnnrepro.analysis.results.read_cells`; none for an artifact that trains
    nothing)."""
    return load_study(study), read_cells(metrics_files)


def readable(value: float) -> float:
    """``value`` as a table gives it: unchanged where it has at most EXACT significant digits, else
    rounded to SIGNIFICANT (278.65515706 -> 278.7; 62.42, 2.1497 and 0.559568 stay)."""
    if not isinstance(value, float) or not math.isfinite(value) or value == 0:
        return value
    if float(f"{value:.{EXACT}g}") == value:
        return value
    return float(f"{value:.{SIGNIFICANT}g}")


def rounded(table: pd.DataFrame) -> pd.DataFrame:
    """A table with its numbers as a person reads them (:func:`readable`; a column of whole numbers as
    integers), the ``<value>_samples`` columns (the per-seed values the scorecard reads) as they are."""
    out = table.copy()
    for column in out.columns:
        if str(column).endswith("_samples") or not pd.api.types.is_float_dtype(out[column]):
            continue
        values = out[column].map(readable)
        finite = values.dropna()
        whole = len(finite) and finite.map(lambda v: math.isfinite(v) and v == int(v)).all()
        out[column] = values.astype("Int64") if whole and (finite.abs() < 2**53).all() else values
    return out


def save(table: pd.DataFrame, path: str, complete: list[str] = ()) -> None:
    """Write an artifact table (CSV, no index), its numbers :func:`rounded`. Every column in ``complete`` must have a value in every
    row: a missing one means a cell or an evaluation gave no result, and nothing is written."""
    for column in complete:
        empty = table[table[column].isna()]
        if not empty.empty:
            first = empty.iloc[0]
            names = ", ".join(f"{name} {first[name]}" for name in ROW_NAMES if name in table)
            raise ValueError(f"{os.path.relpath(path)} not written: {len(empty)} of its {len(table)} rows have no "
                             f"{column} (the first: {names}); look at the metrics.json (and evaluation files) "
                             f"of that row's cells")
    write_text_atomic(Path(path), rounded(table).to_csv(index=False))


def save_figure(figure: plt.Figure, path: str, dpi: int = 120) -> None:
    """Write an artifact figure (PNG, trimmed to its content) and close it."""
    # whole or not at all: a figure cut short by a kill or a full disk would be shown as an empty image
    write_atomic(Path(path), lambda f: figure.savefig(f, format="png", dpi=dpi, bbox_inches="tight"))
    plt.close(figure)
