"""The scorecard as the results page lays it out: one row per claim case in words, grouped by paper
(its headline claims first, then its other trained verdicts, the checks of the paper's arithmetic, and
the cases not tested folded by reason), a cell of your own's rows apart from the papers' claims, and
the verdicts counted with trained verdicts and count checks apart."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from ..analysis.claims import (CAPPED, COUNTED, FRAGILE, HELD, INCONCLUSIVE, NOT_HELD, NOT_TESTABLE, NOT_TESTED,
                               NOT_YET_RUN, RATE_AT_EDGE, SEEDS_SO_FAR, STALLED, STILL_IMPROVING)
from .words import Namer, case_of, case_words, effect_words, items_words
from ..analysis.claims import IN_PART

VERDICTS = (HELD, NOT_HELD, INCONCLUSIVE, NOT_TESTABLE, NOT_TESTED)
TRAINED = (HELD, NOT_HELD, INCONCLUSIVE, NOT_TESTABLE)
ORDER = {verdict: i for i, verdict in enumerate(VERDICTS)}


def verdict_class(verdict: str) -> str:
    """The CSS class of a verdict: ``held``, ``not-held``, ... (the template colours them)."""
    return verdict.split(" at ")[0].replace(" ", "-") if verdict else "not-tested"


def _text(value) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def claim_specs(studies: dict[str, dict]) -> dict[tuple[str, str], dict]:
    """(study, claim id) -> the claim as its study file (with any cell of your own) writes it."""
    return {(name, claim["id"]): claim for name, study in studies.items() for claim in study.get("claims", [])}


def custom_claims(studies: dict[str, dict]) -> set[tuple[str, str]]:
    """The claims a cell of your own added (rnnrepro.custom_cells): each names the cell in its rows."""
    found = set()
    for name, study in studies.items():
        added = set(study.get("custom_cells", {}))
        for claim in study.get("claims", []):
            if any(row.get("model") in added for row in claim["rows"]):
                found.add((name, claim["id"]))
    return found


def is_counted(data) -> bool:
    return _text(data) == COUNTED


def not_tested_kind(reason: str) -> str:
    """Why a case is not tested, in the few kinds a reader tells apart."""
    return ("synthetic data (the smoke budget)" if reason.startswith("synthetic") else
            "needs a larger budget" if reason.startswith("not testable at this budget") else
            "no table at this budget (records missing or stale)" if reason.startswith("not rendered") else
            "its rows wait for their records (missing or stale)" if reason.startswith(IN_PART) else
            "a compared row has no result at this budget")


def row_view(row, spec: dict | None, namer: Namer, owners: dict, headline: bool,
             other_absent: set[str]) -> dict:
    """One scorecard row with what the template shows, its ids in words."""
    claim, _, _ = row.claim.partition("[")
    case = case_of(row.claim)
    counted = is_counted(row.data)
    labels = namer.labels(spec, case) if spec else {}
    paper_labels = namer.labels(spec, case, sized=False) if spec else {}
    artifact = owners.get((row.study, row.table))
    other_verdict = _text(row.other_scale_verdict)
    if other_verdict == NOT_YET_RUN and _text(row.other_scale) in other_absent:
        other_verdict = "not trained there"  # that scale's scorecard exists but has no such claim
    return {
        "study": row.study, "claim": claim, "case": case_words(case, namer.names), "statement": row.statement,
        "source": _text(row.source), "headline": headline, "counted": counted,
        "paper": items_words(_text(row.paper), paper_labels, counted), "ours": items_words(_text(row.ours), labels, counted),
        "difference": effect_words(_text(row.difference), counted),
        "paper_difference": effect_words(_text(row.paper_difference), counted),
        "interval": _text(row.interval), "interval_method": _text(row.interval_method),
        "unit": _text(getattr(row, "unit", "")), "ratio": _text(getattr(row, "ratio", "")),
        "ratio_interval": _text(getattr(row, "ratio_interval", "")), "mde": _text(getattr(row, "mde", "")),
        "underpowered": _text(getattr(row, "underpowered", "")),
        "flags": [f for f in _text(row.flags).split(", ") if f], "flag_notes": _text(row.flag_notes),
        "scale": _text(row.scale), "seeds": _text(row.samples),
        "other_scale": _text(row.other_scale), "other_verdict": other_verdict,
        "other_class": verdict_class(other_verdict.replace(" at this scale", "")),
        "other_difference": _text(row.other_scale_difference), "other_interval": _text(row.other_scale_interval),
        "other_flags": _text(row.other_scale_flags),
        "verdict": row.verdict, "verdict_class": verdict_class(row.verdict), "reason": _text(row.reason),
        "not_tested_kind": not_tested_kind(_text(row.reason)) if row.verdict == NOT_TESTED else "",
        "anchor": f"{row.study}-{artifact}" if artifact else "", "artifact": artifact or row.table,
    }


def namer_words(text: str, namer: Namer) -> str:
    """``text`` with each of the study's model ids (a whole word) replaced by its name."""
    for model in sorted(namer.names, key=len, reverse=True):
        if namer.names[model] != model:
            text = re.sub(rf"\b{re.escape(model)}\b", namer.names[model], text)
    return text


def other_scale_absent(card: pd.DataFrame, results_dir) -> set[str]:
    """The other scales named in the scorecard whose own scorecard exists (a claim missing from it was
    not trained there, rather than not yet run)."""
    names = {s for text in card["other_scale"].fillna("").astype(str) for s in text.split("; ") if s}
    return {name for name in names if (Path(results_dir(name)) / "tables" / "claims.csv").is_file()}


def _folds(rows: list[dict]) -> list[dict]:
    """Rows not tested, one fold per kind of reason: [{"kind", "rows"}]."""
    folded = {}
    for v in rows:
        folded.setdefault(v["not_tested_kind"], []).append(v)
    return [{"kind": kind, "rows": rows} for kind, rows in folded.items()]


def paper_groups(card: pd.DataFrame, studies: dict[str, dict], namers: dict[str, Namer], owners: dict,
                 results_dir) -> tuple[list[dict], list[dict]]:
    """Per paper, in the studies' order: its rows in the page's order (``headline``, ``trained``,
    ``counted``, ``not_tested`` as [{"kind", "rows"}]); then the rows of cells of your own, apart."""
    specs, custom = claim_specs(studies), custom_claims(studies)
    absent = other_scale_absent(card, results_dir)
    papers, mine = [], []
    for name, study in studies.items():
        rows = card[card["study"] == name]
        views = []
        for row in rows.itertuples(index=False):
            claim = row.claim.partition("[")[0]
            spec = specs.get((name, claim))
            views.append(row_view(row, spec, namers[name], owners, bool(spec and spec.get("headline")),
                                  absent))
        own = [v for v in views if (name, v["claim"]) in custom]
        added = set(study.get("custom_cells", {}))
        for v in own:  # the added claims name the models by id: in words here
            v["statement"] = namer_words(v["statement"], namers[name])
            if v["other_verdict"] in (NOT_TESTED, NOT_YET_RUN, "not trained there") and v["other_scale"]:
                trained = [s for s in v["other_scale"].split("; ") if any(
                    next((Path(results_dir(s)) / "runs" / name).glob(f"*/{model}/frac*/seed*/metrics.json"), None)
                    for model in added)]
                if not trained:
                    v["other_verdict"], v["other_class"] = f"your cell not trained at {v['other_scale']}", "not-tested"
                    v["other_difference"] = v["other_interval"] = v["other_flags"] = ""
        theirs = [v for v in views if (name, v["claim"]) not in custom]
        if own:
            mine.append({"id": name, "title": study["title"], "rows": own,
                         "tested": [v for v in own if v["verdict"] != NOT_TESTED],
                         "not_tested": _folds([v for v in own if v["verdict"] == NOT_TESTED])})
        tested = [v for v in theirs if v["verdict"] != NOT_TESTED]
        papers.append({
            "id": name, "title": study["title"],
            "headline": sorted([v for v in tested if v["headline"]], key=lambda v: ORDER[v["verdict"]]),
            "trained": sorted([v for v in tested if not v["headline"] and not v["counted"]],
                              key=lambda v: ORDER[v["verdict"]]),
            "counted": [v for v in tested if v["counted"]],
            "not_tested": _folds([v for v in theirs if v["verdict"] == NOT_TESTED]),
            "all": theirs,
        })
    return papers, mine


def verdict_counts(card: pd.DataFrame) -> list[dict]:
    """Each verdict with its number of scorecard rows, and how many of them rest on exact counts."""
    counted = card["data"].map(is_counted)
    return [{"verdict": verdict, "class": verdict_class(verdict), "rows": int((card["verdict"] == verdict).sum()),
             "counted": int(((card["verdict"] == verdict) & counted).sum())}
            for verdict in VERDICTS]


def tiles(papers: list[dict]) -> dict:
    """The first screen's counts over the papers' rows: trained verdicts, checks of the paper's
    arithmetic (exact parameter counts, no training), and the cases not tested."""
    rows = [v for paper in papers for v in paper["all"]]
    trained = [v for v in rows if v["verdict"] in TRAINED and not v["counted"]]
    counted = [v for v in rows if v["counted"]]
    return {
        "trained": [{"verdict": verdict, "class": verdict_class(verdict),
                     "rows": sum(v["verdict"] == verdict for v in trained)} for verdict in TRAINED],
        "counted": [{"verdict": verdict, "class": verdict_class(verdict),
                     "rows": sum(v["verdict"] == verdict for v in counted)} for verdict in (HELD, NOT_HELD)
                    if any(v["verdict"] == verdict for v in counted) or verdict == HELD],
        "not_tested": sum(v["verdict"] == NOT_TESTED for v in rows),
        "flags": [(flag, sum(flag in v["flags"] for v in trained)) for flag in (FRAGILE, STILL_IMPROVING, CAPPED, RATE_AT_EDGE, STALLED, SEEDS_SO_FAR)],
        "trained_total": len(trained),
    }


def not_tested_reasons(papers: list[dict]) -> list[tuple[str, int]]:
    """Why the papers' cases are not tested, by kind, with their counts (largest first)."""
    counts = {}
    for paper in papers:
        for fold in paper["not_tested"]:
            counts[fold["kind"]] = counts.get(fold["kind"], 0) + len(fold["rows"])
    return sorted(counts.items(), key=lambda item: -item[1])


def scorecard_seeds(card: pd.DataFrame) -> list[int]:
    """The seeds the scorecard's rows were measured over (its ``seeds`` column: a budget's study files
    may give seeds of their own, so the run config's are not always the ones used)."""
    found = set()
    for text in card["seeds"].dropna().astype(str):
        found |= {int(float(seed)) for seed in text.replace(";", ",").split(",") if seed.strip()}
    return sorted(found)


def artifact_of_table(studies: dict[str, dict]) -> dict[tuple[str, str], str]:
    """(study, table) -> the artifact that writes it."""
    return {(name, table): artifact for name, study in studies.items()
            for artifact, spec in study["artifacts"].items() for table in spec["tables"]}
