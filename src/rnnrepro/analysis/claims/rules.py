"""The decision rules: the pairs a check needs, each pair's effect and verdict over seeds, and the paper's
own numbers checked the same way.
"""

from __future__ import annotations

import math

import pandas as pd

from .. import effects

from .spec import ABOVE, BELOW, Case, ClaimError, HELD, INCONCLUSIVE, NOT_HELD, OVERLAP, ROW_COUNTS


def _label(selector: dict) -> str:
    return ",".join(str(v) for v in selector.values())


def _matches(table: pd.DataFrame, selector: dict) -> pd.Series:
    mask = pd.Series(True, index=table.index)
    for column, wanted in selector.items():
        column_values = table[column]
        if isinstance(wanted, (int, float)) and not isinstance(wanted, bool):
            mask &= pd.to_numeric(column_values, errors="coerce") == wanted
        else:
            mask &= column_values.astype(str) == str(wanted)
    return mask


def select(table: pd.DataFrame, selector: dict, column: str, where: str) -> float | None:
    """The value of ``column`` in the rows matching ``selector``; None when no row matches."""
    missing = [c for c in [*selector, column] if c not in table.columns]
    if missing:
        raise ClaimError(f"{where}: the table has no column {', '.join(map(repr, missing))} "
                         f"(columns: {', '.join(table.columns)})")
    values = table.loc[_matches(table, selector), column]
    if values.empty:
        return None
    distinct = values.dropna().unique()
    if len(distinct) > 1:
        raise ClaimError(f"{where}: rows {selector} disagree on {column!r} ({sorted(distinct)}): "
                         f"select one row, or compare a column that is the same in all of them (a mean)")
    return float(distinct[0]) if len(distinct) else math.nan


def samples_of(table: pd.DataFrame, selector: dict, column: str, where: str) -> list[float] | None:
    """The per-seed values of ``column`` in the rows matching ``selector`` (None when no row matches):
    the rows' ``<column>_samples`` (``v1;v2;...``) where the table has it, else one value per row where
    the rows are one per seed, else the one value they share."""
    rows = table.loc[_matches(table, selector)] if all(c in table.columns for c in selector) else None
    if rows is not None and not rows.empty and column in table.columns:
        if f"{column}_samples" in table.columns:
            texts = rows[f"{column}_samples"].dropna().astype(str).unique()
            if len(texts) == 1:
                return [float(v) for v in texts[0].split(";") if v]
        elif "seed" in table.columns and len(rows) > 1 and rows["seed"].nunique() == len(rows):
            return [float(v) for v in rows.sort_values("seed")[column]]
    value = select(table, selector, column, where)
    return None if value is None else [value]


def compare(first: list[float], second: list[float], paired: bool = False, by_median: bool = False) -> str:
    """BELOW, ABOVE or OVERLAP for two rows' samples (the module docstring's decision rule)."""
    return effects.direction(pair_effect(first, second, paired, by_median))


def pair_effect(first: list[float], second: list[float], paired: bool = False,
                by_median: bool = False) -> effects.Effect:
    """The effect of one compared pair: medians where the claim's value is a median over runs, paired
    (per-seed differences) where the claim says so and both rows have one sample per seed, else
    independent rows."""
    if by_median:
        return effects.medians(first, second)
    if paired and len(first) == len(second) and len(first) > 1:
        return effects.paired(first, second)
    return effects.independent(first, second)


#: the unit of a perplexity claim's effects: the difference of mean log-perplexity (mean loss in nats)
NATS = "nats"


def is_perplexity(value: str) -> bool:
    """Whether a claim's value is a perplexity (``test_ppl``, ``val_ppl``): its effects are in nats."""
    return value.endswith("_ppl") or value == "ppl"


def is_median(value: str) -> bool:
    """Whether a claim's value is a median over all runs (``median_epochs``): rows compare medians."""
    return value.startswith("median")


def measure(value: str):
    """The scale a claim's effects are taken on: log for a perplexity (nats), else the value itself."""
    return (lambda v: math.log(v) if v > 0 else math.nan) if is_perplexity(value) else (lambda v: v)


def pairs_needed(kind: str, rows: int) -> list[tuple[int, int, str]]:
    """The (first, second, way) comparisons a check is made of."""
    if kind == "less_than" or kind == "closer_to_paper":
        return [(0, 1, BELOW)]
    if kind == "greater_than":
        return [(0, 1, ABOVE)]
    if kind == "increasing":
        return [(i, i + 1, BELOW) for i in range(rows - 1)]
    if kind == "decreasing":
        return [(i, i + 1, ABOVE) for i in range(rows - 1)]
    if kind == "lowest":
        return [(0, i, BELOW) for i in range(1, rows)]
    if kind == "highest":
        return [(0, i, ABOVE) for i in range(1, rows)]
    raise ClaimError(f"unknown check kind {kind!r} (known: {', '.join(ROW_COUNTS)})")


def seed_verdict(kind: str, samples: list[list[float]], reference: float | None = None,
                 tolerance: dict | None = None, paired: bool = False, by_median: bool = False) -> str:
    """HELD, NOT_HELD or INCONCLUSIVE for these per-row samples (the module docstring's decision rule).
    ``reference``: the paper's number (``closer_to_paper``, ``close_to_paper``); ``tolerance``: how
    near it counts as close (``close_to_paper``); ``paired``: sample i of every row is seed i's."""
    if kind == "close_to_paper":
        within = [_within(v, reference, tolerance) for v in samples[0]]
        return HELD if all(within) else NOT_HELD if not any(within) else INCONCLUSIVE
    if kind == "closer_to_paper":
        samples = [[abs(v - reference) for v in row] for row in samples]
    ways = [(compare(samples[a], samples[b], paired, by_median), way) for a, b, way in pairs_needed(kind, len(samples))]
    return _verdict_of(ways)


def _verdict_of(ways: list[tuple[str, str]]) -> str:
    """held when every pair goes its way, not held when one goes the other way, else inconclusive."""
    if all(found == way for found, way in ways):
        return HELD
    if any(found not in (way, OVERLAP) for found, way in ways):
        return NOT_HELD
    return INCONCLUSIVE


def check_holds(kind: str, values: list[float], reference: float | None = None) -> bool:
    """Whether the check holds on these values (in the claim's row order): the seed rule with one
    sample per row, so a tie does not hold."""
    return seed_verdict(kind, [[v] for v in values], reference) == HELD


def _number(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.4g}"


def _describe(case: Case, values: list[float]) -> str:
    return "; ".join(f"{_label(row)} {_number(v)}" for row, v in zip(case.claim["rows"], values))


def _within(ours: float, paper: float, tolerance: dict) -> bool:
    if "relative" in tolerance:
        return abs(ours - paper) <= tolerance["relative"] * abs(paper)
    return abs(ours - paper) <= tolerance["absolute"]


def _tolerance_text(tolerance: dict) -> str:
    return f"{tolerance['relative']:.0%}" if "relative" in tolerance else f"{tolerance['absolute']:g}"


def _paper_check(kind: str, paper: list[float | None]) -> str:
    """The claim's check on the paper's own numbers (None: the row is not in this budget's table)."""
    if kind == "closer_to_paper":
        return "n/a (compares our variants)"
    if kind == "close_to_paper":
        return "n/a (compares ours with the paper's number)"
    if any(v is None for v in paper):
        return "n/a (a row is not in this budget's table)"
    if any(math.isnan(v) for v in paper):
        return "n/a (the paper gives no number for every row)"
    return HELD if check_holds(kind, paper) else NOT_HELD
