"""The claims scorecard: every claim a study file lists, checked against the study's artifact tables.

A claim (``claims:`` in config/studies/<study>.yaml, format in docs/claims.md) names a table, a value
column, a check kind and row selectors. Each claim (times each combination of its ``per`` values)
gets one verdict:

- ``held`` / ``not held`` / ``inconclusive`` by the decision rule below (at the ``paper`` budget a
  held claim also needs every row within the claim's ``tolerance`` of the paper's number);
- ``not testable at this scale``, with the reason: the claim is about a regime the budget's models do
  not reach, or a number its grid cannot form (the claim's ``not_testable``), its rows differ in a way
  that makes the comparison measure something else (``alike``), or a value measured once differs by
  less than its noise (``noise_floor``); the effect is shown all the same;
- ``not tested``, with the reason: a row trained on synthetic data (the smoke budget), a budget the
  claim lists as unable to answer it (quoting the GPU-hours that would), a row the budget's grid
  leaves out, or a table that could not be built (the reason why).

A budget that is another scale of one (``scale_of: cpu`` in the study file: ``cpu_wide``) can answer
what that one can, and its scorecard's effects are shown beside that one's (:func:`beside_other_scales`).

Effects and the decision rule (rnnrepro.analysis.effects). A check is split into the pairs of rows it
needs (``less_than``: the two rows; ``increasing``: each row and the next; ``lowest``: the first row
and each other one). Each pair's effect is the first row's mean minus the second's with a 90 % interval
over seeds: Welch's t interval for rows trained from their own seeds, a paired t interval on the
per-seed differences where the claim is ``paired`` (both rows read from the same seed's model). A pair
goes *below* (or *above*) when every seed of the first row is below (above) every seed of the second
(paired: every per-seed difference has that sign) *and* its interval lies wholly on that side of zero;
otherwise it *overlaps*. ``held`` when every pair goes the claimed way, ``not held`` when some pair
goes the other way, ``inconclusive`` otherwise. With one sample per row the two numbers decide and the
verdict says "1 seed"; a value that is not a training outcome (an exact parameter count, a speed
measurement) has one sample by nature.

Flags beside a verdict: ``fragile`` (a decided pair whose closest seeds are nearer than one
seed-to-seed standard deviation), ``still improving`` and ``capped`` (a run behind a row ended with its
validation loss still falling, or at its recipe's epoch cap; rnnrepro.analysis.run_endings).

``close_to_paper`` compares one row with a number, its own paper value, not rows with each other: it
is ``held`` when every seed is within the claim's ``tolerance`` of the paper's number, ``not held``
when every seed is outside it, ``inconclusive`` when the seeds fall on both sides; the difference
beside it is our mean minus the paper's number.

The same check is also run on the paper's own numbers (``paper_check``), which catches a claim that
misreads its source. No torch here: the scorecard reads CSV tables, and the run folders' small files
for its flags.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .. import grid
from . import effects, run_endings
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
COLUMNS = ["study", "claim", "statement", "source", "table", "value", "paper", "ours", "verdict", "reason",
           "difference", "paper_difference", "interval", "interval_method", "flags", "flag_notes", "spread",
           "samples", "params", "paper_params", "scale", "paper_check", "budget", "data", "seeds",
           *OTHER_SCALE_COLUMNS]
#: one row per compared pair of a claim (the effect figures read it): claims_effects.csv
EFFECT_COLUMNS = ["study", "claim", "pair", "value", "budget", "verdict", "params", "paper_params", "difference",
                  "low", "high", "method", "paper_difference", "flags"]
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


def compare(first: list[float], second: list[float], paired: bool = False) -> str:
    """BELOW, ABOVE or OVERLAP for two rows' samples (the module docstring's decision rule)."""
    return effects.direction(pair_effect(first, second, paired))


def pair_effect(first: list[float], second: list[float], paired: bool = False) -> effects.Effect:
    """The effect of one compared pair: paired (per-seed differences) where the claim says so and both
    rows have one sample per seed, else independent rows."""
    if paired and len(first) == len(second) and len(first) > 1:
        return effects.paired(first, second)
    return effects.independent(first, second)


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
                 tolerance: dict | None = None, paired: bool = False) -> str:
    """HELD, NOT_HELD or INCONCLUSIVE for these per-row samples (the module docstring's decision rule).
    ``reference``: the paper's number (``closer_to_paper``, ``close_to_paper``); ``tolerance``: how
    near it counts as close (``close_to_paper``); ``paired``: sample i of every row is seed i's."""
    if kind == "close_to_paper":
        within = [_within(v, reference, tolerance) for v in samples[0]]
        return HELD if all(within) else NOT_HELD if not any(within) else INCONCLUSIVE
    if kind == "closer_to_paper":
        samples = [[abs(v - reference) for v in row] for row in samples]
    ways = [(compare(samples[a], samples[b], paired), way) for a, b, way in pairs_needed(kind, len(samples))]
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
    ours = [None if s is None else sum(s) / len(s) for s in samples]
    found = [select(table, row, paper_column, where) if paper_column in table.columns else math.nan
             for row in case.rows]
    paper = [math.nan if v is None else v for v in found]
    reference = None
    if case.paper_row is not None:
        reference = select(table, case.paper_row, paper_column, where)
    if kind == "close_to_paper":
        reference = found[0]
    row = {"study": study["study"], "claim": case.id, "statement": claim["statement"], "source": claim["source"],
           "table": claim["table"], "value": claim["value"], "budget": budget, "data": data, "seeds": seeds,
           "paper": (f"{_label(claim['paper_row'])} {_number(reference)}" if case.paper_row is not None
                     else _describe(case, paper)),
           "ours": _describe(case, [math.nan if v is None else v for v in ours]),
           "difference": "", "paper_difference": "", "interval": "", "interval_method": "", "flags": "",
           "flag_notes": "", "spread": math.nan, "samples": "", "params": math.nan, "paper_params": math.nan,
           "scale": scale(study, config, table, case),
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
    paired = bool(claim.get("paired"))
    artifact = _artifact_of(study, claim["table"])
    behind = [_runs_behind(runs, study, artifact, table, selector) for selector in case.rows]
    dataset = case.per.get("dataset") or next((r["dataset"] for r in case.rows if "dataset" in r), None)
    row_params = [_our_params(table, selector, runs_) for selector, runs_ in zip(case.rows, behind)]
    row_paper_params = [_paper_params(study, table, selector, dataset) for selector in case.rows]
    if kind == "close_to_paper":
        pairs = [("ours - paper", effects.against_number(samples[0], reference), math.nan, 0, 0)]
    else:
        compared = [[abs(v - reference) for v in s] for s in samples] if kind == "closer_to_paper" else samples
        pairs = [(_pair_label(claim, a, b), pair_effect(compared[a], compared[b], paired),
                  paper[a] - paper[b] if kind != "closer_to_paper" else math.nan, a, b)
                 for a, b, _ in pairs_needed(kind, len(samples))]
    fragile = [label for label, effect, *_ in pairs if kind != "close_to_paper" and effects.is_fragile(effect)]
    notes = ([(FRAGILE, "; ".join(f"{label}: closest seeds {effects.number(e.margin).lstrip('+')} apart, "
                                  f"seed-to-seed sd {e.noise:.3g}" for label, e, *_ in pairs if label in fragile))]
             if fragile else []) + _flag_notes(claim, behind)
    methods = sorted({effect.method for _, effect, *_ in pairs})
    row.update(samples=" v ".join(map(str, counts)), spread=_spread(samples),
               difference="; ".join(effects.number(e.difference) for _, e, *_ in pairs),
               paper_difference="; ".join(effects.number(p) for _, _, p, *_ in pairs),
               interval=("; ".join(effects.interval_text(e) for _, e, *_ in pairs)
                         if any(e.has_interval for _, e, *_ in pairs) else effects.interval_text(pairs[0][1])),
               interval_method=", ".join(methods), flags=", ".join(flag for flag, _ in notes),
               flag_notes=" | ".join(f"{flag}: {text}" for flag, text in notes),
               params=_mean_of(row_params), paper_params=_mean_of(row_paper_params))
    row["pairs"] = [{"pair": label, "params": _mean_of([row_params[a], row_params[b]]),
                     "paper_params": _mean_of([row_paper_params[a], row_paper_params[b]]),
                     "difference": e.difference, "low": e.low, "high": e.high, "method": e.method,
                     "paper_difference": p, "flags": row["flags"]} for label, e, p, a, b in pairs]

    untestable = [reason for reason in (_declared_untestable(study, claim, budget), _alike_problem(table, case),
                                        _noise_problem(claim, case, samples)) if reason]
    if untestable:
        return verdict(NOT_TESTABLE, "; and ".join(untestable))
    relation = SYMBOLS.get(kind, kind.replace("_", " "))
    outcome = seed_verdict(kind, samples, reference, claim.get("tolerance"), paired)
    devices = sorted({str(d) for d in table["device"].dropna()}) if "device" in table.columns else []
    evidence = (f"one measurement on {', '.join(devices)}" if devices and max(counts) == 1 else
                "exact counts" if data == COUNTED else "1 seed" if max(counts) == 1 else
                f"{min(counts)}-{max(counts)} seeds per row" if min(counts) != max(counts) else f"{counts[0]} seeds per row")
    if paired and max(counts) > 1:
        evidence += ", paired by seed"
    if kind == "close_to_paper":
        return verdict(outcome, _closeness_reason(outcome, reference, claim["tolerance"], counts[0]))
    every = "every per-seed difference" if paired else "every seed"
    if outcome == NOT_HELD:
        return verdict(NOT_HELD, f"the check ({relation}) fails on our numbers ({evidence}: {every} of a needed "
                                 f"pair the other way, its 90 % interval too)" if max(counts) > 1 else
                       f"the check ({relation}) fails on our numbers ({evidence})")
    if outcome == INCONCLUSIVE:
        return verdict(INCONCLUSIVE, f"a needed pair is undecided ({evidence}): its seeds overlap or its 90 % "
                                     f"interval spans zero, the difference within the seed-to-seed spread")
    tolerance = claim.get("tolerance")
    if budget == "paper" and tolerance:
        outside = [f"{_label(r)} {_number(o)} against the paper's {_number(p)}"
                   for r, o, p in zip(claim["rows"], ours, paper) if not math.isnan(p) and not _within(o, p, tolerance)]
        if outside:
            return verdict(NOT_HELD, f"the check ({relation}) holds, but beyond ±{_tolerance_text(tolerance)}: "
                                     + "; ".join(outside))
        return verdict(HELD, f"the check ({relation}) holds ({evidence}), every row within "
                             f"±{_tolerance_text(tolerance)} of the paper")
    return verdict(HELD, f"the check ({relation}) holds ({evidence}" +
                   (f": {every} of each needed pair, and each pair's 90 % interval)" if max(counts) > 1 else ")"))


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


def scale(study: dict, config: dict, table: pd.DataFrame, case: Case) -> str:
    """How big the models behind a case's rows are against the paper's: their width (and, for models
    sized to a parameter budget or tables with the paper's parameter count, their parameters) as a
    multiple of the paper's. Empty where the rows are not models of the study."""
    if "model" not in table.columns:
        return ""
    matched = table.loc[pd.concat([_matches(table, row) for row in case.rows], axis=1).any(axis=1)]
    models = [m for m in dict.fromkeys(matched["model"].astype(str)) if m in study.get("models", {})]
    dataset = case.per.get("dataset") or (str(matched["dataset"].iloc[0]) if "dataset" in matched and len(matched)
                                          else None)
    if not models or dataset is None or dataset == "all":
        return ""
    paper = {**config, "budget": "paper"}
    try:
        widths, params = [], []
        for model in models:
            (ours_w, ours_p), (paper_w, paper_p) = (_widths_and_params(study, c, model, dataset) for c in (config, paper))
            widths.append(ours_w / paper_w)
            if ours_p and paper_p:
                params.append(ours_p / paper_p)
        if not params and {"params", "paper_params_m"} <= set(matched.columns):
            params = list((matched["params"] / (matched["paper_params_m"] * 1e6)).dropna())
    except (ConfigError, KeyError, ZeroDivisionError):
        return ""
    if all(abs(w - 1) < 1e-9 for w in widths) and all(abs(p - 1) < 0.05 for p in params):
        return "paper size"
    span = lambda xs: f"x{min(xs):.2g}" if max(xs) - min(xs) < 0.005 else f"x{min(xs):.2g}-{max(xs):.2g}"
    return f"width {span(widths)}" + (f", params {span(params)}" if params else "")


def _untested_row(study: dict, claim: dict, case: Case, budget: str, reason: str, data: str = "",
                  seeds: str = "") -> dict:
    """A scorecard row with no numbers: not tested, for this reason."""
    blank = {column: "" for column in COLUMNS}
    return {**blank, "study": study["study"], "claim": case.id, "statement": claim["statement"],
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
            rows += [_untested_row(study, claim, case, budget, reason) for case in cases(claim)]
            continue
        if claim["table"] in tables:
            rows += [evaluate_case(study, config, tables[claim["table"]], case, runs) for case in cases(claim)]
            continue
        # only when rendering from recorded runs: an artifact with no records has no table
        for case in cases(claim):
            data, seeds = _provenance(study, config, case)
            reason = (f"synthetic data {data.removeprefix('synthetic ')}" if data.startswith("synthetic")
                      else (unrendered or {}).get(claim["table"], f"table {claim['table']} was not built"))
            rows.append(_untested_row(study, claim, case, budget, reason, data, seeds))
    return rows


def evaluate(studies: dict[str, dict], config: dict, table_files: list[str],
             unrendered: dict[str, str] | None = None,
             runs: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The scorecard of every study (one row per claim case, columns COLUMNS; the other-scale columns
    empty until :func:`beside_other_scales`) and its compared pairs (EFFECT_COLUMNS)."""
    tables = {Path(path).stem: pd.read_csv(path) for path in table_files}
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
    """A written scorecard, its columns of text kept as written (a difference "-3" stays "-3")."""
    numbers = {"spread", "params", "paper_params"}
    return pd.read_csv(path, dtype={column: str for column in COLUMNS if column not in numbers}, keep_default_na=False,
                       na_values={column: [""] for column in numbers})


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
    raise SystemExit(main())
