"""The claims a study file lists: their checks against the study, the cases each one names, and the words
of a verdict.
"""

from __future__ import annotations

import difflib
import itertools
from dataclasses import dataclass


from .. import effects
from ...configuration import ConfigError
from ...data.autocomplete import AUTOCOMPLETE_DATASETS
from ...data.registry import DATASETS



HELD, NOT_HELD, INCONCLUSIVE, NOT_TESTED = "held", "not held", "inconclusive", "not tested"


NOT_TESTABLE = "not testable at this scale"


DECIDED = (HELD, NOT_HELD, INCONCLUSIVE)


FRAGILE, STILL_IMPROVING, CAPPED, RATE_AT_EDGE = "fragile", "still improving", "capped", "rate at grid edge"
# a run behind a row never left the unigram plateau (rnnrepro.analysis.run_endings.stalled)
STALLED = "stalled"
# a verdict read from a table rendered from the records of some of its cells (the seeds so far)
SEEDS_SO_FAR = "seeds so far"
# the state of an artifact rendered from the records of some of its cells (rnnrepro.records.rendering)
IN_PART = "rendered in part"


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
