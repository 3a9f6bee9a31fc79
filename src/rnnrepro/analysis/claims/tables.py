"""The scorecard as tables: reading and checking the artifact tables, every study's claims evaluated, the
other scale beside each, and the files it writes.
"""

from __future__ import annotations

import itertools
import math
import os
from pathlib import Path

import pandas as pd

from ... import grid

from .spec import (
    COLUMNS, EFFECT_COLUMNS, HELD, IN_PART, INCONCLUSIVE, NOT_HELD, NOT_TESTABLE, NOT_TESTED, NOT_YET_RUN,
    OTHER_SCALE_COLUMNS, declared_columns,
)
from .context import other_scales
from .case import evaluate_study


class DamagedTable(ValueError):
    """An artifact table the scorecard reads is not what its notebook writes; the message names the file."""


def _not_numbers(column: pd.Series) -> pd.Series:
    """The entries of ``column`` that are neither empty nor a number."""
    return column[pd.to_numeric(column, errors="coerce").isna() & column.notna()]


def _samples_problems(column: pd.Series) -> list[str]:
    """Entries of a ``<value>_samples`` column (``v1;v2;...``) that are not numbers."""
    for row, text in column.dropna().astype(str).items():
        for part in filter(None, text.split(";")):
            try:
                float(part)
            except ValueError:
                return [f"column {column.name} holds {text!r} in row {row + 1}: {part!r} is not a number"]
    return []


def table_problems(table: pd.DataFrame, study: dict, config: dict, name: str, in_part: bool = False) -> list[str]:
    """How an artifact table read back differs from what its notebook writes: its declared columns,
    numbers (finite) in every value a claim reads, and a row for every model and dataset of the
    artifact's grid at this budget (``in_part``: a table rendered from the records of some of its rows,
    which has no rows of the others)."""
    artifact, declared = declared_columns(study)[name]
    problems = []
    extra = [c for c in table.columns if c not in declared]
    absent = [c for c in declared if c not in table.columns]
    if extra:
        problems.append(f"columns not declared for it: {', '.join(map(str, extra))}")
    if absent:
        problems.append(f"declared columns missing: {', '.join(absent)}")
    values = {column for claim in study.get("claims", []) if claim["table"] == name
              for column in (claim["value"], claim.get("paper_value", f"paper_{claim['value']}"))}
    for column in sorted(values & set(table.columns)):
        text = _not_numbers(table[column])
        numbers = pd.to_numeric(table[column], errors="coerce")
        if not text.empty:
            problems.append(f"column {column} holds {text.iloc[0]!r} in row {text.index[0] + 1}, not a number")
        elif numbers.isin([math.inf, -math.inf]).any():
            row = numbers.index[numbers.isin([math.inf, -math.inf])][0]
            problems.append(f"column {column} is {numbers[row]} in row {row + 1}")
        if f"{column}_samples" in table.columns:
            problems += _samples_problems(table[f"{column}_samples"])
    spec = grid.artifact_spec(study, config, artifact)
    keys = [column for column in ("dataset", "model") if column in table.columns]
    if table.empty:
        problems.append("no rows")
    elif keys and spec.get("needs_training", True) and not in_part:
        found = set(table[keys].astype(str).itertuples(index=False, name=None))
        expected = list(itertools.product(*(spec[f"{column}s"] for column in keys)))
        missing = [combination for combination in expected if combination not in found]
        if missing:
            shown = ", ".join("/".join(combination) for combination in missing[:3]) + (", ..." if len(missing) > 3 else "")
            problems.append(f"no row for {len(missing)} of the {len(expected)} {' x '.join(keys)} of artifact "
                            f"{artifact} at budget {config['budget']} ({shown})")
    return problems


def read_table(path: str, studies: dict[str, dict], config: dict, in_part: bool = False) -> pd.DataFrame:
    """An artifact table, checked (:func:`table_problems`) as it is read: a damaged or cut one stops the
    scorecard naming the file, instead of turning its claims into "not tested"."""
    name = Path(path).stem
    owner = next((study for study in studies.values() if name in declared_columns(study)), None)
    rebuild = (f"Rebuild it: rerun your snakemake command with the target {os.path.relpath(path)} and --force "
               f"(or `python -m rnnrepro.records render` for a budget rendered from records)")
    try:
        table = pd.read_csv(path)
    except FileNotFoundError:
        raise DamagedTable(f"{os.path.relpath(path)} is missing. {rebuild}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        said = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DamagedTable(f"{os.path.relpath(path)} is damaged: not a CSV table ({said}). {rebuild}") from None
    problems = table_problems(table, owner, config, name, in_part) if owner is not None else []
    if problems:
        raise DamagedTable(f"{os.path.relpath(path)} is damaged: {'; '.join(problems[:5])}. {rebuild}")
    return table


def evaluate(studies: dict[str, dict], config: dict, table_files: list[str],
             unrendered: dict[str, str] | None = None,
             runs: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The scorecard of every study (one row per claim case, columns COLUMNS; the other-scale columns
    empty until :func:`beside_other_scales`) and its compared pairs (EFFECT_COLUMNS). Each table is
    checked as it is read (:func:`read_table`)."""
    in_part = {name for name, why in (unrendered or {}).items() if why.startswith(IN_PART)}
    tables = {Path(path).stem: read_table(path, studies, config, Path(path).stem in in_part) for path in table_files}
    rows = [row for study in studies.values() for row in evaluate_study(study, config, tables, unrendered, runs)]
    pairs = [{"study": row["study"], "claim": row["claim"], "value": row["value"], "budget": row["budget"],
              "verdict": row["verdict"], **pair} for row in rows for pair in row["pairs"]]
    card = pd.DataFrame(rows, columns=COLUMNS)
    for column in OTHER_SCALE_COLUMNS:
        card[column] = ""
    return card, pd.DataFrame(pairs, columns=EFFECT_COLUMNS)


def scorecard(studies: dict[str, dict], config: dict, table_files: list[str],
              unrendered: dict[str, str] | None = None, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """The scorecard of every study: one row per claim case (columns COLUMNS)."""
    return evaluate(studies, config, table_files, unrendered, runs)[0]


def beside_other_scales(card: pd.DataFrame, studies: dict[str, dict], budget: str,
                        others: dict[str, pd.DataFrame | None]) -> pd.DataFrame:
    """The scorecard with each claim's verdict, effect, interval, flags and parameters at the study's
    other scale of this budget (``scale_of: budget``) beside its own: ``others`` maps each such budget
    to its scorecard, or None where it has none yet (then its verdict reads NOT_YET_RUN). Claims of a
    study with no other scale keep those columns empty."""
    card = card.copy()
    for column in OTHER_SCALE_COLUMNS:
        card[column] = card[column].astype(object) if column in card else ""
    for index, row in card.iterrows():
        names = other_scales(studies[row["study"]], budget) if row["study"] in studies else []
        if not names:
            continue
        found = []
        for name in names:
            other = others.get(name)
            match = (other[(other["study"] == row["study"]) & (other["claim"] == row["claim"])]
                     if other is not None else None)
            found.append((name, None if match is None or match.empty else match.iloc[0]))
        card.at[index, "other_scale"] = "; ".join(name for name, _ in found)
        card.at[index, "other_scale_verdict"] = "; ".join(
            NOT_YET_RUN if theirs is None else str(theirs["verdict"]) for _, theirs in found)
        for column in ("difference", "interval", "flags", "params"):
            card.at[index, f"other_scale_{column}"] = "; ".join(
                "" if theirs is None or pd.isna(theirs[column]) else
                (f"{float(theirs[column]):.4g}" if column == "params" else str(theirs[column]))
                for _, theirs in found)
    return card


def read_scorecard(path: str | Path) -> pd.DataFrame:
    """A written scorecard, its columns of text kept as written (a difference "-3" stays "-3"), checked:
    its columns and a known verdict in every row; a damaged one names the file."""
    numbers = {"spread", "params", "paper_params"}
    rebuild = f"Rebuild it: rerun the command that made it (its target {os.path.relpath(path)} with --force)"
    try:
        card = pd.read_csv(path, dtype={column: str for column in COLUMNS if column not in numbers},
                           keep_default_na=False, na_values={column: [""] for column in numbers})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as e:
        said = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DamagedTable(f"{os.path.relpath(path)} is damaged: not a scorecard ({said}). {rebuild}") from None
    problems = [f"no column {column}" for column in COLUMNS if column not in card.columns]
    if "verdict" in card.columns:
        unknown = card.loc[~card["verdict"].isin([HELD, NOT_HELD, INCONCLUSIVE, NOT_TESTED, NOT_TESTABLE]), "verdict"]
        if not unknown.empty:
            problems.append(f"row {unknown.index[0] + 1} has verdict {unknown.iloc[0]!r}")
    if problems:
        raise DamagedTable(f"{os.path.relpath(path)} is damaged: {'; '.join(problems[:5])}. {rebuild}")
    return card


def read_effects(path: str | Path) -> pd.DataFrame:
    """A written table of compared pairs (``claims_effects.csv``), checked: its columns; a damaged one
    names the file."""
    rebuild = f"Rebuild it: rerun the command that made it (its target {os.path.relpath(path)} with --force)"
    try:
        pairs = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        said = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DamagedTable(f"{os.path.relpath(path)} is damaged: not a CSV table ({said}). {rebuild}") from None
    missing = [column for column in EFFECT_COLUMNS if column not in pairs.columns]
    if missing:
        raise DamagedTable(f"{os.path.relpath(path)} is damaged: no column {', '.join(missing)}. {rebuild}")
    return pairs


def other_scale_files(studies: dict[str, dict], budget: str) -> dict[str, dict[str, str]]:
    """Each other scale of ``budget`` in these studies -> its scorecard and effects files (which may
    not exist yet): ``{"cpu_wide": {"claims": ".../claims.csv", "effects": ".../claims_effects.csv"}}``."""
    names = sorted({name for study in studies.values() for name in other_scales(study, budget)})
    return {name: {"claims": f"{grid.results_dir(name)}/tables/claims.csv",
                   "effects": f"{grid.results_dir(name)}/tables/claims_effects.csv"} for name in names}


EFFECTS_TABLE = "claims_effects"


def outputs(results: str, studies: list[str]) -> dict[str, list[str]]:
    """The files the scorecard writes into a results tree: ``tables`` (the scorecard, then its compared
    pairs) and ``figures`` (the verdicts per study, then one figure of effect against parameters per
    study, in ``studies``' order)."""
    return {"tables": [f"{results}/tables/claims.csv", f"{results}/tables/{EFFECTS_TABLE}.csv"],
            "figures": [f"{results}/figures/claims.png",
                        *(f"{results}/figures/{EFFECTS_TABLE}_{study}.png" for study in studies)]}


def main(argv=None) -> int:
    """Run notebooks/claims.py through papermill (rnnrepro.analysis.run_notebook) for the run config."""
    import argparse
    import json

    from ..run_notebook import run_cli

    parser = argparse.ArgumentParser(prog="python -m rnnrepro.analysis.claims", description=main.__doc__)
    parser.add_argument("notebook", type=Path)
    parser.add_argument("output", type=Path, help="executed .ipynb to write")
    parser.add_argument("--run-config", required=True, help="JSON: the run config (budget, seeds, studies)")
    parser.add_argument("--tables-in", nargs="*", default=[], help="the artifact tables the claims read")
    parser.add_argument("--tables", nargs="+", required=True,
                        help="the scorecard CSV, then its compared pairs' CSV (claims_effects.csv)")
    parser.add_argument("--figures", nargs="+", required=True,
                        help="the scorecard PNG, then one effects PNG per study of the run config, in its order")
    args = parser.parse_args(argv)
    for path in (*args.tables, *args.figures):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    parameters = {"run_config": json.loads(args.run_config),
                  "table_files": [str(Path(t).resolve()) for t in args.tables_in],
                  "tables": [str(Path(t).resolve()) for t in args.tables],
                  "figures": [str(Path(f).resolve()) for f in args.figures]}
    return run_cli(args.notebook, args.output, parameters)
