"""Where a budget's records and results live (the rest of the package builds on these)."""

from __future__ import annotations

from pathlib import Path

from .. import grid
from ..analysis.run_files import RESTORED_MANIFEST



RECORDS = Path("records")


MANIFEST = RESTORED_MANIFEST  # files a render restored, with their digests


def record_dir(records: Path, budget: str) -> Path:
    return records / budget


def results_dir(budget: str) -> Path:
    return Path(grid.results_dir(budget))
