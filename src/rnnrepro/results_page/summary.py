"""Each paper's paragraph on the results page's first screen, written from its scorecard rows: its
headline claims with their verdicts, what held, what did not, what could not be tested, at what scale
and how sure. Trained verdicts only; exact parameter counts are counted apart, as checks of the paper's
arithmetic."""

from __future__ import annotations

from ..analysis.claims import (CAPPED, FRAGILE, HELD, INCONCLUSIVE, NOT_HELD, NOT_TESTABLE, NOT_TESTED, NOT_YET_RUN,
                               RATE_AT_EDGE, SEEDS_SO_FAR, STALLED, STILL_IMPROVING)
from .. import grid
from ..analysis.plotting import counted as counted_words


def _cases(rows: list[dict]) -> str:
    """" on PTB; WikiText-2", or nothing for a claim without cases."""
    cases = [v["case"] for v in rows if v["case"]]
    return f" on {'; '.join(cases)}" if cases else ""


def headline_claims(paper: dict) -> list[dict]:
    """The paper's headline claims in the study file's order, each with its cases: the decided ones
    with their verdict and effect, the rest summed up in one line."""
    claims = {}
    for v in paper["all"]:
        if v["headline"]:
            claims.setdefault(v["claim"], []).append(v)
    found = []
    for claim, rows in claims.items():
        decided = [v for v in rows if v["verdict"] != NOT_TESTED]
        untested = [v for v in rows if v["verdict"] == NOT_TESTED]
        kinds = sorted({v["not_tested_kind"] for v in untested})
        found.append({
            "claim": claim, "statement": rows[0]["statement"], "anchor": f"claim-{paper['id']}-{claim}",
            "cases": [{"case": v["case"], "verdict": v["verdict"], "class": v["verdict_class"],
                       "effect": (f"effect {v['difference']}" + (f" (paper {v['paper_difference']})"
                                                                 if v["paper_difference"] else "")
                                  if v["difference"] else ""),
                       "other": (f"at {v['other_scale']}: {v['other_verdict']}"
                                 if v["other_scale"] and v["other_verdict"] not in ("", NOT_YET_RUN) else ""),
                       "flags": v["flags"]} for v in decided],
            "untested": (f"not tested{_cases(untested)} ({'; '.join(kinds)})" if untested else ""),
        })
    return found


def paragraph(paper: dict, scale: dict, seeds: list[int], budget: str) -> str:
    """The paper's verdicts at this budget in a few sentences."""
    trained = [v for v in paper["all"] if v["verdict"] != NOT_TESTED and not v["counted"]]
    counted = [v for v in paper["all"] if v["counted"]]
    untested = [v for v in paper["all"] if v["verdict"] == NOT_TESTED]
    sentences = []
    if trained:
        parts = []
        for verdict in (HELD, NOT_HELD, INCONCLUSIVE, NOT_TESTABLE):
            mine = [v for v in trained if v["verdict"] == verdict]
            if mine:
                parts.append(f"{len(mine)} {verdict}")
        held = list(dict.fromkeys(v["statement"] for v in trained if v["verdict"] == HELD and not v["headline"]))
        sentences.append(f"Of its {counted_words(len(trained), 'claim case')} decided by training at {budget}: "
                         f"{', '.join(parts)}.")
        if held:
            sentences.append("Held besides the headline: " + " ".join(held[:3]) +
                             (f" (and {len(held) - 3} more)" if len(held) > 3 else ""))
        missed = list(dict.fromkeys(v["statement"] for v in trained if v["verdict"] == NOT_HELD and not v["headline"]))
        if missed:
            sentences.append("Not held: " + " ".join(missed[:2]) + (f" (and {len(missed) - 2} more)" if len(missed) > 2 else ""))
    else:
        sentences.append(f"No claim of this paper was decided by training at {budget}.")
    if untested:
        kinds = {}
        for v in untested:
            kinds[v["not_tested_kind"]] = kinds.get(v["not_tested_kind"], 0) + 1
        sentences.append(f"{counted_words(len(untested), 'case')} could not be tested here: " +
                         ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda i: -i[1])) + ".")
    if counted:
        held = sum(v["verdict"] == HELD for v in counted)
        sentences.append(f"Checks of the paper's arithmetic (exact parameter counts, no training): {held} of "
                         f"{len(counted)} held.")
    size = []
    if scale.get("params"):
        size.append(f"models of {scale['params']} parameters" +
                    (f" against the paper's {scale['paper_params']}" if scale.get("paper_params") else ""))
    if scale.get("width"):
        size.append(f"widths {scale['width']} of the paper's")
    if size:
        sentences.append("Scale: " + ", ".join(size) + ".")
    if trained:
        flagged = {flag: sum(flag in v["flags"] for v in trained) for flag in (STILL_IMPROVING, FRAGILE, CAPPED, RATE_AT_EDGE, STALLED, SEEDS_SO_FAR)}
        flags = ", ".join(f"{n} {flag}" for flag, n in flagged.items() if n)
        samples = sorted({v["seeds"] for v in trained if v["seeds"]})
        # the seeds behind the decided rows, not the budget's list (a study may run fewer, a row one value)
        sentences.append("How sure: " + (f"samples per row {', '.join(samples[:2])}" if samples else
                                         "one value per row")
                         + (f"; flagged: {flags}" if flags else "; no flags") + ".")
    return " ".join(sentences)


def _listed(names: list[str]) -> str:
    """["pru", "lru", "lrn"] -> "pru, lru and lrn"."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def protocol(studies: dict[str, dict], budget: str) -> str:
    """How a tuning budget trained its compared rows, from the study files: each study's grid of
    learning rates and its tuning seeds, grouped where they agree ("pru, lru and lrn: 4 learning rates,
    1 seed each"), and the seeds a row; empty where no study of the budget tunes (its recipes' rates) or
    the budget is the synthetic smoke run (it tunes one tiny model, to run the path)."""
    if budget == grid.SMOKE:
        return ""
    grids, rows = {}, {}
    for name, study in studies.items():
        spec = grid.tuned_settings(study, {"budget": budget})
        if spec is None:
            continue
        key = (len(spec["tuning"]["lr_factors"]), len(spec["seeds"]))
        grids.setdefault(key, []).append(name)
        seeds = study.get("budgets", {}).get(budget, {}).get("seeds")
        if seeds:
            rows.setdefault(len(seeds), []).append(name)
    if not grids:
        return ""
    tuned = "; ".join(f"{_listed(names)}: {counted_words(rates, 'learning rate')}, {counted_words(seeds, 'seed')} each"
                      for (rates, seeds), names in grids.items())
    per_row = (f"{counted_words(next(iter(rows)), 'seed')} a row" if len(rows) == 1 else
               "; ".join(f"{_listed(names)}: {counted_words(n, 'seed')} a row" for n, names in rows.items()))
    return (f"The compared rows: each unit at its own learning rate, chosen on validation ({tuned}), every run "
            f"stopped by patience on its best validation loss, {per_row}.")
