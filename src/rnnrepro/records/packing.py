"""Packing: a finished run folder's small files copied into ``records/<budget>/``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .. import grid
from ..record_checks import RECORDED, check_pairing, evaluation_outputs
from ..analysis.claims import is_synthetic

from .paths import RECORDS, record_dir, results_dir


def pack_run(run_dir: Path, budget: str, records: Path = RECORDS) -> Path:
    """Copy one finished run folder's small files into ``records/<budget>/runs/``; returns the record.

    A run made from a working tree with uncommitted changes (its ``git_sha`` ends in ``-dirty``) is
    refused: no commit holds the code that made it."""
    missing = [name for name in RECORDED if not (run_dir / name).exists()]
    if missing:
        raise FileNotFoundError(f"run folder {run_dir} has no {', '.join(missing)}: rerun that cell before "
                                f"recording it")
    sha = str(json.loads((run_dir / "metrics.json").read_text()).get("git_sha", ""))
    if sha.endswith("-dirty"):
        raise RuntimeError(f"{run_dir} was trained from a working tree with uncommitted changes (git_sha {sha}): "
                           f"no commit holds the code that made it, so it is not recorded; commit, then train "
                           f"it again (delete its metrics.json, or `records grow` from a clean checkout)")
    check_pairing(run_dir)
    target = record_of_run(run_dir, budget, records)
    target.mkdir(parents=True, exist_ok=True)
    sources = [run_dir / name for name in RECORDED] + evaluation_outputs(run_dir)
    for source in sources:
        shutil.copy2(source, target / source.name)
    for earlier in evaluation_outputs(target):  # an earlier model's evaluation, which this run has not
        if earlier.name not in {source.name for source in sources}:
            earlier.unlink()
    return target


def record_of_run(run_dir: Path, budget: str, records: Path = RECORDS) -> Path:
    return record_dir(records, budget) / Path(run_dir).relative_to(results_dir(budget))


def packed_files(run_dir: Path, budget: str, records: Path = RECORDS) -> list[Path]:
    """The files :func:`pack_run` writes for ``run_dir``."""
    target = record_of_run(run_dir, budget, records)
    return [target / name for name in RECORDED] + [target / p.name for p in evaluation_outputs(Path(run_dir))]


def pack_speed(speed_file: Path, budget: str, records: Path = RECORDS) -> Path:
    target = record_dir(records, budget) / "speed" / speed_file.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(speed_file, target)
    return target


def pack(budget: str | None = None, records: Path = RECORDS, include_synthetic: bool = False) -> list[Path]:
    """Copy the small files of every finished run of ``budget`` (default: every budget with a results
    tree here) into ``records/<budget>/``, and its speed results.

    Runs on synthetic corpora (the smoke budget) are left out unless ``include_synthetic``: records
    exist to render the papers' tables from real data. Returns the records written.
    """
    packed = []
    for name in [budget] if budget else grid.budgets_with_results():
        tree = results_dir(name)
        # runs/, and runs-bf16/ of the cells of another precision (rnnrepro.grid.runs_dir)
        for metrics_file in sorted(tree.glob("runs*/*/*/*/frac*/seed*/metrics.json")):
            metrics = json.loads(metrics_file.read_text())
            if is_synthetic(metrics["corpus"]) and not include_synthetic:
                continue
            packed.append(pack_run(metrics_file.parent, name, records))
        if name == grid.SMOKE and not include_synthetic:
            continue
        packed += [pack_speed(path, name, records) for path in sorted((tree / "speed").glob("*.json"))]
    return packed
