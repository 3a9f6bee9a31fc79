"""The claims scorecard: every claim a study file lists, checked against the study's artifact tables.

A claim (``claims:`` in config/studies/<study>.yaml, format in docs/claims.md) names a table, a value
column, a check kind and row selectors. Each claim (times each combination of its ``per`` values)
gets one verdict:

- ``held`` / ``not held`` / ``inconclusive`` by the decision rule below (at the ``paper`` budget a
  held claim also needs every row within the claim's ``tolerance`` of the paper's number);
- ``not testable at this scale``, with the reason: the compared models do not keep the paper's ratio of
  recurrent parameters or its output head (rnnrepro.analysis.comparability), the claim is about a regime
  the budget's models do not reach, or a number its grid cannot form (the claim's ``not_testable``), its
  rows differ in a way that makes the comparison measure something else (``alike``), or a value measured
  once differs by less than its noise (``noise_floor``); the effect is shown all the same;
- ``not tested``, with the reason: a row trained on synthetic data (the smoke budget), a budget the
  claim lists as unable to answer it (quoting the GPU-hours that would), a row the budget's grid
  leaves out, or a table that could not be built (the reason why).

A budget that is another scale of one (``scale_of: cpu`` in the study file: ``cpu_wide``) can answer
what that one can, and its scorecard's effects are shown beside that one's (:func:`beside_other_scales`).

Effects and the decision rule (rnnrepro.analysis.effects, docs/claims.md). A check is split into the
pairs of rows it needs (``less_than``: the two rows; ``increasing``: each row and the next; ``lowest``:
the first row and each other one). A perplexity claim's effects are in nats: each seed's perplexity is
taken as its log, so a pair's effect is the difference of mean log-perplexity, beside the paper's (the
log of its perplexity ratio) and the ratio of the two. Each pair's effect is the first row's mean
minus the second's with a 90 % interval over seeds: Welch's t interval at the exact Welch-Satterthwaite
degrees of freedom for rows trained from their own seeds, a paired t interval on the per-seed
differences where the claim is ``paired`` (both rows read from the same seed's model); a claim on a
median over all runs compares medians, by ranks. Independent rows go *below* (or *above*) when every
seed of the first row is below (above) every seed of the second *and* the interval lies wholly on that
side of zero; paired rows when their interval does; medians when every run is beyond every run;
otherwise the pair *overlaps*. ``held`` when every pair goes the claimed way (and the size the claim
states, ``size``, is met), ``not held`` when some pair goes the other way (or the size is missed),
``inconclusive`` otherwise, saying whether the seeds could have found the paper's effect (its minimum
detectable effect). With one sample per row the two numbers decide and the verdict says "1 seed"; a
value that is not a training outcome (an exact parameter count, a speed measurement) has one sample by
nature.

Flags beside a verdict: ``fragile`` (a decided pair whose closest seeds are nearer than one
seed-to-seed standard deviation), ``still improving`` and ``capped`` (a run behind a row ended with its
validation loss still falling, or at its recipe's epoch cap; rnnrepro.analysis.run_endings).

``close_to_paper`` compares one row with a number, its own paper value, not rows with each other: it
is ``held`` when every seed is within the claim's ``tolerance`` of the paper's number, ``not held``
when every seed is outside it, ``inconclusive`` when the seeds fall on both sides (the tolerance in the
value's own unit); the difference beside it is our mean minus the paper's number (for a perplexity, in
nats, with the points in ``difference_points``).

The same check is also run on the paper's own numbers (``paper_check``), which catches a claim that
misreads its source. No weights and no training here: the scorecard reads CSV tables, the run folders'
small files for its flags, and counts the compared models' recurrent parameters from the study file
(a cell with no formula is built on torch's meta device, rnnrepro.sizing).
"""

from __future__ import annotations

import difflib
import itertools
import math
import os
import statistics
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .. import console, grid
from . import comparability, effects, run_endings
from ..configuration import ConfigError
from ..data.autocomplete import AUTOCOMPLETE_DATASETS
from ..data.registry import DATASETS

HELD, NOT_HELD, INCONCLUSIVE, NOT_TESTED = "held", "not held", "inconclusive", "not tested"
NOT_TESTABLE = "not testable at this scale"
DECIDED = (HELD, NOT_HELD, INCONCLUSIVE)
FRAGILE, STILL_IMPROVING, CAPPED = "fragile", "still improving", "capped"
#: what the scorecard shows of a second scale whose scorecard does not exist yet
NOT_YET_RUN = "not yet run"
DEFAULT_TESTABLE = ["cpu", "reduced", "paper"]
# check kind -> number of rows it takes (None: two or more)
ROW_COUNTS = {"less_than": 2, "greater_than": 2, "increasing": None, "decreasing": None,
              "lowest": None, "highest": None, "closer_to_paper": 2, "close_to_paper": 1}
SYMBOLS = {"less_than": "<", "greater_than": ">", "increasing": "<", "decreasing": ">"}
OTHER_SCALE_COLUMNS = ["other_scale", "other_scale_verdict", "other_scale_difference", "other_scale_interval",
                       "other_scale_flags", "other_scale_params"]
# the verdict beside the claim's id, then what it rests on
COLUMNS = ["study", "claim", "verdict", "statement", "source", "table", "value", "paper", "ours", "reason",
           "difference", "paper_difference", "interval", "interval_method", "unit", "ratio", "ratio_interval",
           "significant_same_direction", "paper_in_interval", "mde", "underpowered", "size_check",
           "difference_points", "flags", "flag_notes", "spread",
           "samples", "params", "paper_params", "scale", "paper_check", "budget", "data", "seeds",
           *OTHER_SCALE_COLUMNS]
#: one row per compared pair of a claim (the effect figures read it): claims_effects.csv
EFFECT_COLUMNS = ["study", "claim", "pair", "value", "budget", "verdict", "params", "paper_params", "difference",
                  "low", "high", "method", "paper_difference", "flags", "unit", "ratio", "ratio_low", "ratio_high",
                  "mde"]
# check kind -> the pairs (indices into the claim's rows) it needs, and the way each must go
BELOW, ABOVE, OVERLAP = effects.BELOW, effects.ABOVE, effects.OVERLAP
# The data of a claim on an artifact that trains nothing (exact parameter counts of the paper's models):
# decided at every budget, whatever `testable` says.
COUNTED = "none (exact counts, no training)"


class ClaimError(ValueError):
    """A claim that cannot be evaluated as written (names the study, the claim and what to fix)."""


def declared_columns(study: dict) -> dict[str, tuple[str, list[str]]]:
    """table -> (its artifact, the columns the artifact declares its notebook writes into it)."""
    return {table: (name, columns) for name, artifact in study["artifacts"].items()
            for table, columns in artifact["columns"].items()}


def claim_columns(claim: dict) -> list[str]:
    """Every column a claim reads: its value, its paper column where it names one, and the keys of its
    row selectors and of ``per``."""
    selectors = [*claim["rows"], *([claim["paper_row"]] if "paper_row" in claim else []), claim.get("per", {})]
    named = [claim["value"], *([claim["paper_value"]] if "paper_value" in claim else [])]
    return list(dict.fromkeys([*named, *(key for selector in selectors for key in selector)]))


def _column_declaration_problems(study: dict) -> list[str]:
    """Each artifact declares the columns of exactly its own tables."""
    problems = []
    for name, artifact in study["artifacts"].items():
        for table in artifact["tables"]:
            if table not in artifact["columns"]:
                problems.append(f"artifacts.{name}.columns: no entry for its table {table!r}; list the "
                                f"columns its notebook ({artifact['notebook']}) writes into it")
        for table in artifact["columns"]:
            if table not in artifact["tables"]:
                problems.append(f"artifacts.{name}.columns.{table}: not one of its tables "
                                f"({', '.join(artifact['tables'])})")
    return problems


# The row an aggregate over every dataset gets in a table (the LRU convergence table's `all`).
EVERY_DATASET = "all"


def _selector_value_problems(study: dict, claim: dict, artifact: str, where: str) -> list[str]:
    """Row selectors (``rows``, ``paper_row``, ``per``) naming a model, dataset, fraction, recipe or cell
    that the claim's artifact does not have: such a row never matches, and the claim would silently read
    "not tested" (a typo like ``lstm_m1001``)."""
    spec = study["artifacts"][artifact]
    # a speed artifact's rows are the speed benchmark's models (`speed:`, or a budget's), not its grid's
    timed = [*study.get("speed", {}).get("models", []),
             *(model for budget in study.get("budgets", {}).values() for model in budget.get("speed", {}).get("models", []))]
    domains = {"model": list(dict.fromkeys([*spec["models"], *(timed if spec.get("speed") else [])]))}
    if "recipes" in study:
        domains["recipe"] = list(study["recipes"])
    cells = {study.get("models", {}).get(m, {}).get("cell") for m in spec["models"]} - {None}
    if cells:
        domains["cell"] = sorted(cells)
    if "datasets" in spec:
        domains["dataset"] = [*spec["datasets"], EVERY_DATASET]
    if "fractions" in spec:
        domains["fraction"] = spec["fractions"]
    selectors = [("rows", row) for row in claim["rows"]] + [("per", claim.get("per", {}))]
    if "paper_row" in claim:
        selectors.append(("paper_row", claim["paper_row"]))
    problems = []
    for key, selector in selectors:
        for column, wanted in selector.items():
            if column not in domains:
                continue
            for value in wanted if key == "per" else [wanted]:
                if value in domains[column] or str(value) in map(str, domains[column]):
                    continue
                near = difflib.get_close_matches(str(value), list(map(str, domains[column])), n=1)
                problems.append(f"{where}.{key}: {column} {value!r} is not one of artifact {artifact}'s "
                                f"({', '.join(map(str, domains[column]))})"
                                + (f"; did you mean {near[0]!r}?" if near else "")
                                + " A row that matches nothing would leave the claim untested")
    return problems


def check_claims(study: dict, source: str | None = None) -> None:
    """Structural checks the schema cannot make: each artifact declares its tables' columns; unique ids,
    a table one of the study's artifacts writes, only columns declared for that table (value, paper
    column, row selectors, ``per``), the number of rows each check takes, ``paper_row`` exactly for
    ``closer_to_paper``, a ``tolerance`` for ``close_to_paper``."""
    source = source or f"config/studies/{study['study']}.yaml"
    tables = {t for artifact in study["artifacts"].values() for t in artifact["tables"]}
    columns = declared_columns(study)
    problems, seen = _column_declaration_problems(study), set()
    for claim in study.get("claims", []):
        where = f"claims.{claim['id']}"
        if claim["id"] in seen:
            problems.append(f"{where}: duplicate id")
        seen.add(claim["id"])
        if claim["table"] not in tables:
            problems.append(f"{where}.table: {claim['table']!r} is not a table of this study's artifacts "
                            f"(have: {', '.join(sorted(tables))})")
        elif claim["table"] in columns:
            artifact, declared = columns[claim["table"]]
            undeclared = [column for column in claim_columns(claim) if column not in declared]
            if undeclared:
                problems.append(f"{where}: {claim['table']} has no column {', '.join(map(repr, undeclared))} "
                                f"(its columns, artifacts.{artifact}.columns.{claim['table']}: "
                                f"{', '.join(declared)}); name one of them, or declare the column there once "
                                f"its notebook writes it")
        wanted = ROW_COUNTS[claim["check"]]
        if wanted is not None and len(claim["rows"]) != wanted:
            problems.append(f"{where}.rows: check {claim['check']} takes {wanted} "
                            f"row{'s' if wanted > 1 else ''}, got {len(claim['rows'])}")
        if wanted is None and len(claim["rows"]) < 2:
            problems.append(f"{where}.rows: check {claim['check']} takes 2 rows or more, got {len(claim['rows'])}")
        if (claim["check"] == "closer_to_paper") != ("paper_row" in claim):
            problems.append(f"{where}.paper_row: needed by check closer_to_paper and only by it")
        if claim["check"] == "close_to_paper" and "tolerance" not in claim:
            problems.append(f"{where}.tolerance: check close_to_paper needs one (how near the paper's number "
                            f"counts as reproduced, e.g. {{absolute: 3}})")
        if claim["table"] in columns:
            problems += _selector_value_problems(study, claim, columns[claim["table"]][0], where)
        clash = set(claim.get("per", {})) & {k for row in claim["rows"] for k in row}
        if clash:
            problems.append(f"{where}: {sorted(clash)} both in `per` and in a row selector")
    if problems:
        raise ConfigError(f"{source} is invalid:\n  " + "\n  ".join(problems))


def is_synthetic(corpus: str) -> bool:
    """Whether a corpus is one the project generates (the smoke budget's stand-ins)."""
    if corpus in AUTOCOMPLETE_DATASETS:
        corpus = AUTOCOMPLETE_DATASETS[corpus].source
    return corpus in DATASETS and DATASETS[corpus].archive == "synthetic"


@dataclass(frozen=True)
class Case:
    """One claim, or one combination of its ``per`` values."""
    claim: dict
    per: dict

    @property
    def id(self) -> str:
        if not self.per:
            return self.claim["id"]
        return f"{self.claim['id']}[{', '.join(f'{k}={v}' for k, v in self.per.items())}]"

    @property
    def rows(self) -> list[dict]:
        return [{**row, **self.per} for row in self.claim["rows"]]

    @property
    def paper_row(self) -> dict | None:
        return {**self.claim["paper_row"], **self.per} if "paper_row" in self.claim else None

    @property
    def paper_column(self) -> str:
        return self.claim.get("paper_value", f"paper_{self.claim['value']}")


def cases(claim: dict) -> list[Case]:
    per = claim.get("per", {})
    return [Case(claim, dict(zip(per, values))) for values in itertools.product(*per.values())]


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


def _artifact_of(study: dict, table: str) -> str:
    return next(name for name, spec in study["artifacts"].items() if table in spec["tables"])


def _provenance(study: dict, config: dict, case: Case) -> tuple[str, str]:
    """The data a case's rows were trained on (``real``, ``synthetic (corpora)``, or COUNTED for an
    artifact that trains nothing) and the seeds."""
    artifact = _artifact_of(study, case.claim["table"])
    spec = grid.artifact_spec(study, config, artifact)
    if not spec.get("needs_training", True) and not spec.get("speed"):
        return COUNTED, ""
    named = {row["dataset"] for row in case.rows if "dataset" in row} & set(spec["datasets"])
    datasets = sorted(named) or spec["datasets"]
    corpora = sorted({grid.corpus_for(study, config, d) for d in datasets})
    synthetic = [c for c in corpora if is_synthetic(c)]
    data = f"synthetic ({', '.join(synthetic)})" if synthetic else "real"
    seeds = ",".join(str(s) for s in spec["seeds"])
    return data, seeds


def _gpu_hours(study: dict, claim: dict, budget: str) -> str:
    """The cost of the claim's cells at ``budget``: GPU-hours on one H100, or wall hours on a 2-core CPU."""
    spec = study["budgets"].get(budget, {})
    if "cpu_hours" in spec:
        return f"about {spec['cpu_hours']:g} hours of the study's {budget} grid on a 2-core CPU"
    hours = claim.get("gpu_hours", spec.get("gpu_hours"))
    return f"about {hours:g} GPU-hours on one H100" if hours else "GPU-hours not estimated"


def _spread(samples: list[list[float]]) -> float:
    """The largest seed-to-seed standard deviation among the rows (NaN with one seed each)."""
    spreads = [pd.Series(row).std() for row in samples if len(row) > 1]
    return max(spreads) if spreads else math.nan


def scale_base(study: dict, budget: str) -> str | None:
    """The budget that ``budget`` is another scale of (its ``scale_of``), or None."""
    return study["budgets"].get(budget, {}).get("scale_of")


def other_scales(study: dict, budget: str) -> list[str]:
    """The budgets of this study that are another scale of ``budget`` (``scale_of: budget``)."""
    return [name for name, spec in study["budgets"].items() if spec.get("scale_of") == budget]


def _testable_at(study: dict, claim: dict, budget: str) -> bool:
    testable = claim.get("testable", DEFAULT_TESTABLE)
    return budget in testable or scale_base(study, budget) in testable


def _declared_untestable(study: dict, claim: dict, budget: str) -> str | None:
    """The claim's own reason it cannot be answered at this budget (or the budget it is a scale of)."""
    declared = claim.get("not_testable", {})
    return declared.get(budget, declared.get(scale_base(study, budget) or ""))


def _alike_problem(table: pd.DataFrame, case: Case) -> str | None:
    """Why the rows cannot be compared: they differ in a column the claim needs alike."""
    for column in case.claim.get("alike", []):
        if column not in table.columns:
            continue
        found = {_label(row): sorted({str(v) for v in table.loc[_matches(table, selector), column].dropna()})
                 for row, selector in zip(case.claim["rows"], case.rows)}
        kinds = {value for values in found.values() for value in values}
        if len(kinds) > 1:
            groups = {kind: [label for label, values in found.items() if kind in values] for kind in sorted(kinds)}
            return (f"the rows differ in {column} (" + "; ".join(f"{', '.join(labels)}: {kind}"
                                                              for kind, labels in groups.items()) +
                    "), so the comparison measures that, not the claim")
    return None


def _noise_problem(claim: dict, case: Case, samples: list[list[float]]) -> str | None:
    """A pair of values measured once that differ by less than the claim's noise floor."""
    floor = claim.get("noise_floor")
    if not floor or max(len(s) for s in samples) > 1:
        return None
    close = []
    for a, b, _ in pairs_needed(claim["check"], len(samples)):
        first, second = samples[a][0], samples[b][0]
        limit = floor["relative"] * max(abs(first), abs(second)) if "relative" in floor else floor["absolute"]
        if abs(first - second) < limit:
            close.append(f"{_label(claim['rows'][a])} {_number(first)} against {_label(claim['rows'][b])} "
                         f"{_number(second)}")
    if not close:
        return None
    noise = f"{floor['relative']:.0%}" if "relative" in floor else f"{floor['absolute']:g}"
    return f"within the measurement's noise (±{noise}, one measurement each): " + "; ".join(close)


def _pair_label(claim: dict, a: int, b: int) -> str:
    return f"{_label(claim['rows'][a])} - {_label(claim['rows'][b])}"


def _runs_behind(runs: pd.DataFrame | None, study: dict, artifact: str, table: pd.DataFrame,
                 selector: dict) -> pd.DataFrame:
    """The runs behind the table rows a selector matches (rnnrepro.analysis.run_endings)."""
    if runs is None or runs.empty or "model" not in table.columns:
        return pd.DataFrame(columns=run_endings.COLUMNS)
    matched = table.loc[_matches(table, selector)]
    mine = runs[(runs["study"] == study["study"]) & (runs["artifact"] == artifact)
                & runs["behind"].isin(matched["model"].astype(str))]
    if "dataset" in matched.columns:  # a row pooled over datasets (`all`: LRU convergence) rests on them all
        mine = mine[mine["dataset"].isin(matched["dataset"].astype(str)) | (matched["dataset"] == "all").any()]
    if "seed" in matched.columns and matched["seed"].notna().all():
        mine = mine[mine["seed"].isin(matched["seed"])]
    return mine


def _flag_notes(claim: dict, behind: list[pd.DataFrame]) -> list[tuple[str, str]]:
    """(flag, what it rests on) for the runs behind each row: still improving, capped."""
    notes = []
    for flag, column in ((STILL_IMPROVING, "improving_pct"), (CAPPED, "capped")):
        parts = []
        for row, runs in zip(claim["rows"], behind):
            for model, own in runs.drop_duplicates(["model", "dataset", "seed"]).groupby("model", sort=False):
                hit = own[own["improving_pct"].notna()] if column == "improving_pct" else own[own["capped"]]
                if hit.empty:
                    continue
                if column == "improving_pct":
                    low, high = hit["improving_pct"].min(), hit["improving_pct"].max()
                    rate = f"{low:.2g}" if abs(high - low) < 0.005 else f"{low:.2g}-{high:.2g}"
                    parts.append(f"{model} {len(hit)}/{len(own)} seeds, val perplexity falling {rate} %/epoch")
                else:
                    parts.append(f"{model} {len(hit)}/{len(own)} seeds at the {int(hit['epoch_cap'].iloc[0])}-"
                                 f"epoch cap")
        if parts:
            notes.append((flag, "; ".join(dict.fromkeys(parts))))
    return notes


def _paper_params(study: dict, table: pd.DataFrame, selector: dict, dataset: str | None) -> float:
    """The paper's parameter count of a row's model: the table's paper_params(_m) column, else the
    model's parameter budget, else a count in the study's paper values; NaN when none says."""
    matched = table.loc[_matches(table, selector)] if all(c in table.columns for c in selector) else table.iloc[:0]
    for column, unit in (("paper_params_m", 1e6), ("paper_params", 1), ("paper_params_total", 1)):
        if column in matched.columns and matched[column].notna().any():
            return float(matched[column].dropna().mean()) * unit
    models = [str(m) for m in matched.get("model", pd.Series(dtype=str)).dropna().unique()]
    counts = []
    for model in models:
        spec = study.get("models", {}).get(model, {})
        if "param_budget" in spec:
            counts.append(float(spec["param_budget"]))
            continue
        for section in study.get("paper", {}).values():
            if not isinstance(section, dict):
                continue
            by_dataset = [section.get(dataset, {})] + [v for k, v in section.items() if k != dataset]
            values = next((v[model] for v in by_dataset if isinstance(v, dict) and isinstance(v.get(model), dict)),
                          None)
            if values is None:
                continue
            if values.get("params_m") is not None:
                counts.append(float(values["params_m"]) * 1e6)
            elif values.get("params") is not None:
                counts.append(float(values["params"]))
            elif any(k.startswith("params_") and v is not None for k, v in values.items()):
                counts.append(float(sum(v for k, v in values.items() if k.startswith("params_") and v is not None)))
            else:
                continue
            break
    return sum(counts) / len(counts) if counts else math.nan


def _our_params(table: pd.DataFrame, selector: dict, runs: pd.DataFrame) -> float:
    """Our parameter count of a row's model: its runs' metrics, else the table's params(_m) column."""
    own = runs[runs["model"] == runs["behind"]] if not runs.empty else runs
    if not own.empty and own["params"].notna().any():
        return float(own["params"].dropna().mean())
    matched = table.loc[_matches(table, selector)] if all(c in table.columns for c in selector) else table.iloc[:0]
    for column, unit in (("params", 1), ("params_m", 1e6), ("params_total", 1)):
        if column in matched.columns and pd.to_numeric(matched[column], errors="coerce").notna().any():
            return float(pd.to_numeric(matched[column], errors="coerce").dropna().mean()) * unit
    return math.nan


def _mean_of(values: list[float]) -> float:
    known = [v for v in values if not math.isnan(v)]
    return sum(known) / len(known) if known else math.nan


def evaluate_case(study: dict, config: dict, table: pd.DataFrame, case: Case,
                  runs: pd.DataFrame | None = None) -> dict:
    """One claim case's scorecard row; its compared pairs under the key ``pairs`` (EFFECT_COLUMNS)."""
    claim, budget = case.claim, config["budget"]
    where = f"config/studies/{study['study']}.yaml claims.{case.id}"
    data, seeds = _provenance(study, config, case)
    kind = claim["check"]
    paper_column = case.paper_column
    samples = [samples_of(table, row, claim["value"], where) for row in case.rows]
    ours = [None if s is None else _summary(s, is_median(claim["value"])) for s in samples]
    found = [select(table, row, paper_column, where) if paper_column in table.columns else math.nan
             for row in case.rows]
    paper = [math.nan if v is None else v for v in found]
    reference = None
    if case.paper_row is not None:
        reference = select(table, case.paper_row, paper_column, where)
    if kind == "close_to_paper":
        reference = found[0]
    row = {**{column: "" for column in COLUMNS},
           "study": study["study"], "claim": case.id, "statement": claim["statement"], "source": claim["source"],
           "table": claim["table"], "value": claim["value"], "budget": budget, "data": data, "seeds": seeds,
           "paper": (f"{_label(claim['paper_row'])} {_number(reference)}" if case.paper_row is not None
                     else _describe(case, paper)),
           "ours": _describe(case, [math.nan if v is None else v for v in ours]),
           "flags": "", "flag_notes": "", "spread": math.nan, "samples": "", "params": math.nan, "paper_params": math.nan,
           "scale": scale(study, config, case, table),
           "paper_check": _paper_check(kind, found), "pairs": []}

    def verdict(v: str, reason: str) -> dict:
        return {**row, "verdict": v, "reason": reason}

    if data.startswith("synthetic"):
        return verdict(NOT_TESTED, f"synthetic data {data.removeprefix('synthetic ')}")
    if not _testable_at(study, claim, budget) and data != COUNTED:
        testable = claim.get("testable", DEFAULT_TESTABLE)
        return verdict(NOT_TESTED, f"not testable at this budget ({budget}): needs budget {testable[0]}, "
                                   f"{_gpu_hours(study, claim, testable[0])}")
    absent = [_label(r) for r, v in zip(claim["rows"], ours) if v is None or math.isnan(v)]
    if absent:
        return verdict(NOT_TESTED, f"no result for {'; '.join(absent)} in {claim['table']} at this budget")
    if kind in ("closer_to_paper", "close_to_paper") and (reference is None or math.isnan(reference)):
        paper_row = claim["paper_row"] if kind == "closer_to_paper" else claim["rows"][0]
        return verdict(NOT_TESTED, f"no paper number for {_label(paper_row)} in {claim['table']}")

    counts = [len(s) for s in samples]
    paired, by_median = bool(claim.get("paired")), is_median(claim["value"])
    perplexity, to_unit = is_perplexity(claim["value"]), measure(claim["value"])
    artifact = _artifact_of(study, claim["table"])
    behind = [_runs_behind(runs, study, artifact, table, selector) for selector in case.rows]
    dataset = case.per.get("dataset") or next((r["dataset"] for r in case.rows if "dataset" in r), None)
    row_params = [_our_params(table, selector, runs_) for selector, runs_ in zip(case.rows, behind)]
    row_paper_params = [_paper_params(study, table, selector, dataset) for selector in case.rows]
    measured = [[to_unit(v) for v in s] for s in samples]
    if kind == "close_to_paper":
        pairs = [("ours - paper", effects.against_number(measured[0], to_unit(reference)), math.nan, 0, 0,
                  _mean_of(samples[0]) - reference)]
    else:
        compared, points = measured, samples
        if kind == "closer_to_paper":
            compared = [[abs(v - to_unit(reference)) for v in s] for s in measured]
            points = [[abs(v - reference) for v in s] for s in samples]
        pairs = [(_pair_label(claim, a, b), pair_effect(compared[a], compared[b], paired, by_median),
                  to_unit(paper[a]) - to_unit(paper[b]) if kind != "closer_to_paper" else math.nan, a, b,
                  _summary(points[a], by_median) - _summary(points[b], by_median))
                 for a, b, _ in pairs_needed(kind, len(samples))]
    beside = [effects.against_paper(e, p) for _, e, p, *_ in pairs]
    fragile = [label for label, effect, *_ in pairs if kind != "close_to_paper" and effects.is_fragile(effect)]
    notes = ([(FRAGILE, "; ".join(f"{label}: closest seeds {effects.number(e.margin).lstrip('+')} apart, "
                                  f"seed-to-seed sd {e.noise:.3g}" for label, e, *_ in pairs if label in fragile))]
             if fragile else []) + _flag_notes(claim, behind)
    methods = sorted({_method_text(effect) for _, effect, *_ in pairs})
    joined = lambda values: "; ".join(values)
    size = claim.get("size")
    sizes = [(effects.relative_size(e, _mean_of(samples[b]), perplexity), label)
             for label, e, _, a, b, _ in pairs] if size and kind not in ("close_to_paper", "closer_to_paper") else []
    size_outcomes = [effects.size_outcome(relative, size["relative"], size["within"]) for relative, _ in sizes]
    row.update(samples=" v ".join(map(str, counts)), spread=_spread(samples),
               difference=joined(effects.number(e.difference) for _, e, *_ in pairs),
               paper_difference=joined(effects.number(p) for _, _, p, *_ in pairs),
               interval=(joined(effects.interval_text(e) for _, e, *_ in pairs)
                         if any(e.has_interval for _, e, *_ in pairs) else effects.interval_text(pairs[0][1])),
               interval_method=", ".join(methods), unit=NATS if perplexity else claim["value"],
               ratio=joined(_plain(b.ratio) for b in beside),
               ratio_interval=joined("n/a" if math.isnan(b.ratio_low) else
                                     f"[{_plain(b.ratio_low)}, {_plain(b.ratio_high)}]" for b in beside),
               significant_same_direction=joined(b.significant for b in beside),
               paper_in_interval=joined(b.inside for b in beside),
               mde=joined(_plain(e.mde) for _, e, *_ in pairs), underpowered=joined(b.underpowered for b in beside),
               size_check=joined(size_outcomes),
               difference_points=joined(effects.number(pair[5]) for pair in pairs) if perplexity else "",
               flags=", ".join(flag for flag, _ in notes),
               flag_notes=" | ".join(f"{flag}: {text}" for flag, text in notes),
               params=_mean_of(row_params), paper_params=_mean_of(row_paper_params))
    row["pairs"] = [{"pair": label, "params": _mean_of([row_params[a], row_params[b]]),
                     "paper_params": _mean_of([row_paper_params[a], row_paper_params[b]]),
                     "difference": e.difference, "low": e.low, "high": e.high, "method": e.method,
                     "paper_difference": p, "flags": row["flags"], "unit": row["unit"], "ratio": against.ratio,
                     "ratio_low": against.ratio_low, "ratio_high": against.ratio_high, "mde": e.mde}
                    for (label, e, p, a, b, _), against in zip(pairs, beside)]

    scale_dataset = dataset if dataset not in (None, EVERY_DATASET) else next(
        iter(grid.artifact_spec(study, config, artifact).get("datasets", [])), None)
    compared_pairs = [(a, b) for a, b, _ in pairs_needed(kind, len(samples))] if kind != "close_to_paper" else []
    paper_models = data == COUNTED or grid.artifact_spec(study, config, artifact).get("speed")
    unlike = (None if paper_models or scale_dataset is None
              else comparability.problem(study, config, case.rows, compared_pairs, table, scale_dataset, _matches))
    untestable = [reason for reason in (_declared_untestable(study, claim, budget), unlike, _alike_problem(table, case),
                                        _noise_problem(claim, case, samples)) if reason]
    if untestable:
        return verdict(NOT_TESTABLE, "; and ".join(untestable))
    relation = SYMBOLS.get(kind, kind.replace("_", " "))
    if kind == "close_to_paper":
        outcome = seed_verdict(kind, samples, reference, claim.get("tolerance"))
    else:
        outcome = seed_verdict(kind, measured, to_unit(reference) if reference is not None else None,
                               claim.get("tolerance"), paired, by_median)
    devices = sorted({str(d) for d in table["device"].dropna()}) if "device" in table.columns else []
    evidence = (f"one measurement on {', '.join(devices)}" if devices and max(counts) == 1 else
                "exact counts" if data == COUNTED else "1 seed" if max(counts) == 1 else
                f"{min(counts)}-{max(counts)} seeds per row" if min(counts) != max(counts) else f"{counts[0]} seeds per row")
    if paired and max(counts) > 1:
        evidence += ", paired by seed"
    if kind == "close_to_paper":
        return verdict(outcome, _closeness_reason(outcome, reference, claim["tolerance"], counts[0]))
    unit_text = f" {NATS}" if perplexity else ""
    rule = _rule_text(pairs[0][1]) if max(counts) > 1 else ""
    if outcome == NOT_HELD:
        return verdict(NOT_HELD, f"the check ({relation}) fails on our numbers ({evidence}: a needed pair goes the "
                                 f"other way by {rule})" if max(counts) > 1 else
                       f"the check ({relation}) fails on our numbers ({evidence})")
    if outcome == INCONCLUSIVE:
        return verdict(INCONCLUSIVE, f"a needed pair is undecided ({evidence}): "
                       + ("its runs overlap" if by_median else "its seeds overlap or its 90 % interval spans zero")
                       + "; " + _power_text(pairs, unit_text))
    if sizes:
        texts = [f"{label}: by {_percent(rel[0])}"
                 + ("" if math.isnan(rel[1]) else f" [{_percent(rel[1])}, {_percent(rel[2])}]") for rel, label in sizes]
        stated = f"the paper's about {_percent(size['relative'])} ± {size['within'] * 100:g} points"
        if "not held" in size_outcomes:
            return verdict(NOT_HELD, f"the check ({relation}) holds ({evidence}), but not the size it states: "
                                     f"{'; '.join(texts)}, outside {stated}")
        if "inconclusive" in size_outcomes:
            return verdict(INCONCLUSIVE, f"the check ({relation}) holds ({evidence}), its size undecided: "
                                         f"{'; '.join(texts)}, straddling {stated}")
    tolerance = claim.get("tolerance")
    if budget == "paper" and tolerance:
        outside = [f"{_label(r)} {_number(o)} against the paper's {_number(p)}"
                   for r, o, p in zip(claim["rows"], ours, paper) if not math.isnan(p) and not _within(o, p, tolerance)]
        if outside:
            return verdict(NOT_HELD, f"the check ({relation}) holds, but beyond ±{_tolerance_text(tolerance)}: "
                                     + "; ".join(outside))
        return verdict(HELD, f"the check ({relation}) holds ({evidence}), every row within "
                             f"±{_tolerance_text(tolerance)} of the paper")
    sized = (f", and the size: {'; '.join(texts)}, within {stated}" if sizes else "")
    return verdict(HELD, f"the check ({relation}) holds ({evidence}" +
                   (f": each needed pair by {rule})" if max(counts) > 1 else ")") + sized)


def _summary(values: list[float], by_median: bool) -> float:
    """A row's mean, or its median where the claim's value is a median over all runs."""
    return statistics.median(values) if by_median else _mean_of(values)


def _plain(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.3g}"


def _percent(value: float) -> str:
    return f"{value * 100:+.1f} %"


def _method_text(effect: effects.Effect) -> str:
    """The interval's method with its degrees of freedom (exact, Welch-Satterthwaite's for Welch)."""
    if effect.method in (effects.INDEPENDENT, effects.PAIRED) and not math.isnan(effect.freedom):
        return f"{effect.method} (df {effect.freedom:.3g})"
    return effect.method


def _rule_text(effect: effects.Effect) -> str:
    """The decision rule a pair was decided by, with its one-sided false-positive rate."""
    if effect.method == effects.PAIRED:
        return "its 90 % paired t interval (one-sided 5 %)"
    if effect.method == effects.MEDIANS:
        return f"every run beyond every run of the other row (ranks, one-sided level {effect.level:.2g})"
    return (f"every seed beyond every seed of the other row (one-sided level {effect.level:.2g}) and its "
            f"90 % Welch interval (one-sided 5 %)")


def _power_text(pairs: list, unit: str) -> str:
    """Whether the undecided pairs could have found the paper's effect: MDE at 80 % power against it."""
    parts = []
    for label, effect, paper, *_ in pairs:
        if effects.direction(effect) != effects.OVERLAP:
            continue
        if math.isnan(effect.mde):
            parts.append(f"{label}: no minimum detectable effect (no interval)")
        elif math.isnan(paper):
            parts.append(f"{label}: minimum detectable effect {_plain(effect.mde)}{unit} (the paper gives no effect)")
        else:
            state = "underpowered" if effect.mde > abs(paper) else "powered"
            relation = ">" if effect.mde > abs(paper) else "<="
            parts.append(f"{label}: {state} against the paper's effect (minimum detectable effect at 80 % power "
                         f"{_plain(effect.mde)}{unit} {relation} |{_plain(paper)}|{unit})")
    return "; ".join(parts) if parts else "the difference within the seed-to-seed spread"


def _closeness_reason(outcome: str, paper: float, tolerance: dict, seeds: int) -> str:
    """Why a close_to_paper check came out as it did."""
    near = f"±{_tolerance_text(tolerance)} of the paper's {_number(paper)}"
    evidence = "1 seed" if seeds == 1 else f"{seeds} seeds"
    if outcome == HELD:
        return f"within {near} ({evidence}" + (": every seed)" if seeds > 1 else ")")
    if outcome == NOT_HELD:
        return f"outside {near} ({evidence}" + (": every seed)" if seeds > 1 else ")")
    return f"some seeds within {near}, some outside ({evidence})"


def _widths_and_params(study: dict, config: dict, model: str, dataset: str) -> tuple[int, int | None]:
    arch = grid.architecture(study, config, model, grid.corpus_for(study, config, dataset), dataset)
    return arch["hidden_size"], arch["param_budget"]


#: the scale of a claim decided from exact parameter counts: the paper's own models, never trained
COUNTED_SCALE = "paper size (exact counts)"


def scale(study: dict, config: dict, case: Case, table: pd.DataFrame | None = None) -> str:
    """How big the models behind a case's rows are at this budget against the paper's: their width
    (and, for models sized to a parameter budget or tables with the paper's parameter count, their
    parameters) as a multiple of the paper's; "paper size" where they are the paper's, COUNTED_SCALE for
    a claim on exact counts. The models are those the rows name (or, where they name none, the ones
    ``table`` matches, else the artifact's), on the dataset the case names (else every dataset of the
    artifact). Known without training, so a claim not tested has one too; empty only where the rows
    are no models of the study."""
    if _provenance(study, config, case)[0] == COUNTED:
        return COUNTED_SCALE
    spec = study["artifacts"][_artifact_of(study, case.claim["table"])]
    named = [str(row["model"]) for row in case.rows if isinstance(row.get("model"), str)]
    matched = pd.DataFrame()
    if table is not None and "model" in table.columns and all(c in table.columns for row in case.rows for c in row):
        matched = table.loc[pd.concat([_matches(table, row) for row in case.rows], axis=1).any(axis=1)]
    if not named and len(matched):
        named = list(matched["model"].astype(str))
    models = [m for m in dict.fromkeys(named or spec.get("models", [])) if m in study.get("models", {})]
    dataset = case.per.get("dataset") or next((r["dataset"] for r in case.rows if isinstance(r.get("dataset"), str)),
                                              None)
    datasets = [dataset] if dataset not in (None, "all") else list(spec.get("datasets", []))
    paper = {**config, "budget": "paper"}
    shapes = config
    if spec.get("speed"):  # a speed benchmark times its own block's models (the `speed` rule), maybe at the paper's widths
        speed = {**study.get("speed", {}), **grid.budget_of(study, config).get("speed", {})}
        shapes = paper if speed.get("widths") == "paper" else config
        datasets = [speed.get("dataset", dataset)]
    widths, params = [], []
    for model in models:
        for name in datasets:
            try:
                (ours_w, ours_p), (paper_w, paper_p) = (_widths_and_params(study, c, model, name) for c in (shapes, paper))
            except (ConfigError, KeyError, ValueError):
                continue
            if isinstance(ours_w, int) and isinstance(paper_w, int) and paper_w:
                widths.append(ours_w / paper_w)
            if ours_p and paper_p:
                params.append(ours_p / paper_p)
    if not params and {"params", "paper_params_m"} <= set(matched.columns):
        params = list((matched["params"] / (matched["paper_params_m"] * 1e6)).dropna())
    if not widths and not params:
        return ""
    if all(abs(w - 1) < 1e-9 for w in widths) and all(abs(p - 1) < 0.05 for p in params):
        return "paper size"
    span = lambda xs: f"x{min(xs):.2g}" if max(xs) - min(xs) < 0.005 else f"x{min(xs):.2g}-{max(xs):.2g}"
    parts = ([f"width {span(widths)}"] if widths else []) + ([f"params {span(params)}"] if params else [])
    return ", ".join(parts)


def _untested_row(study: dict, claim: dict, case: Case, config: dict, reason: str, data: str = "",
                  seeds: str = "") -> dict:
    """A scorecard row with no numbers: not tested, for this reason (its scale all the same)."""
    blank = {column: "" for column in COLUMNS}
    budget = config["budget"]
    return {**blank, "study": study["study"], "claim": case.id, "statement": claim["statement"],
            "scale": scale(study, config, case),
            "source": claim["source"], "table": claim["table"], "value": claim["value"], "verdict": NOT_TESTED,
            "reason": reason, "spread": math.nan, "params": math.nan, "paper_params": math.nan, "budget": budget,
            "data": data, "seeds": seeds, "pairs": []}


def evaluate_study(study: dict, config: dict, tables: dict[str, pd.DataFrame],
                   unrendered: dict[str, str] | None = None, runs: pd.DataFrame | None = None) -> list[dict]:
    """Every claim of a study, against its tables (table name -> DataFrame). ``unrendered``: why a
    table could not be built (rendering from recorded runs), table name -> reason; ``runs``: how the
    runs behind the tables ended (rnnrepro.analysis.run_endings), for the flags. Each row holds its
    compared pairs under ``pairs``."""
    check_claims(study)
    rows = []
    budget = config["budget"]
    built = grid.artifacts(study, config)
    for claim in study.get("claims", []):
        artifact = _artifact_of(study, claim["table"])
        if artifact not in built:
            testable = claim.get("testable", DEFAULT_TESTABLE)
            later = next((b for b in testable if b != budget), testable[0])
            reason = (f"not testable at this budget ({budget}): its grid leaves out artifact {artifact}; "
                      f"needs budget {later}, {_gpu_hours(study, claim, later)}")
            rows += [_untested_row(study, claim, case, config, reason) for case in cases(claim)]
            continue
        if claim["table"] in tables:
            rows += [evaluate_case(study, config, tables[claim["table"]], case, runs) for case in cases(claim)]
            continue
        # only when rendering from recorded runs: an artifact with no records has no table
        for case in cases(claim):
            data, seeds = _provenance(study, config, case)
            reason = (f"synthetic data {data.removeprefix('synthetic ')}" if data.startswith("synthetic")
                      else (unrendered or {}).get(claim["table"], f"table {claim['table']} was not built"))
            rows.append(_untested_row(study, claim, case, config, reason, data, seeds))
    return rows


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


def table_problems(table: pd.DataFrame, study: dict, config: dict, name: str) -> list[str]:
    """How an artifact table read back differs from what its notebook writes: its declared columns,
    numbers (finite) in every value a claim reads, and a row for every model and dataset of the
    artifact's grid at this budget."""
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
    elif keys and spec.get("needs_training", True):
        found = set(table[keys].astype(str).itertuples(index=False, name=None))
        expected = list(itertools.product(*(spec[f"{column}s"] for column in keys)))
        missing = [combination for combination in expected if combination not in found]
        if missing:
            shown = ", ".join("/".join(combination) for combination in missing[:3]) + (", ..." if len(missing) > 3 else "")
            problems.append(f"no row for {len(missing)} of the {len(expected)} {' x '.join(keys)} of artifact "
                            f"{artifact} at budget {config['budget']} ({shown})")
    return problems


def read_table(path: str, studies: dict[str, dict], config: dict) -> pd.DataFrame:
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
    problems = table_problems(table, owner, config, name) if owner is not None else []
    if problems:
        raise DamagedTable(f"{os.path.relpath(path)} is damaged: {'; '.join(problems[:5])}. {rebuild}")
    return table


def evaluate(studies: dict[str, dict], config: dict, table_files: list[str],
             unrendered: dict[str, str] | None = None,
             runs: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The scorecard of every study (one row per claim case, columns COLUMNS; the other-scale columns
    empty until :func:`beside_other_scales`) and its compared pairs (EFFECT_COLUMNS). Each table is
    checked as it is read (:func:`read_table`)."""
    tables = {Path(path).stem: read_table(path, studies, config) for path in table_files}
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

    from .run_notebook import run_cli

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


if __name__ == "__main__":
    raise SystemExit(console.run_command(main))
