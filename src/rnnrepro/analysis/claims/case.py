"""One claim case evaluated on one budget's tables: the verdict, its effect, interval, power and reason,
and the scale of the models.
"""

from __future__ import annotations

import math
import statistics

import pandas as pd

from ... import grid
from .. import comparability, effects
from ...configuration import ConfigError

from .spec import (
    COLUMNS, COUNTED, Case, DEFAULT_TESTABLE, EVERY_DATASET, FRAGILE, HELD, INCONCLUSIVE, NOT_HELD,
    IN_PART, NOT_TESTABLE, NOT_TESTED, SEEDS_SO_FAR, SYMBOLS, cases, check_claims,
)
from .rules import (
    NATS, _describe, _label, _matches, _number, _paper_check, _tolerance_text, _within, is_median,
    is_perplexity, measure, pair_effect, pairs_needed, samples_of, seed_verdict, select,
)
from .context import (
    _alike_problem, _artifact_of, _declared_untestable, _flag_notes, _gpu_hours, _mean_of, _noise_problem,
    _our_params, _pair_label, _paper_params, _provenance, _runs_behind, _spread, _testable_at,
)


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
    # the rule of a pair with seeds on both sides where there is one (a row of one seed has no interval)
    rule = _rule_text(next((p[1] for p in pairs if p[1].method != effects.ONE_SAMPLE), pairs[0][1])) \
        if max(counts) > 1 else ""
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
    if effect.method == effects.ONE_SAMPLE:
        return "its numbers (a row of one seed: no interval, no rank level)"
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


def _so_far(row: dict, why: str) -> dict:
    """A case decided on a table rendered from the records of some of its cells: flagged, with what the
    table has so far (a verdict that may change as the rest are recorded)."""
    if row["verdict"] in (HELD, NOT_HELD, INCONCLUSIVE):
        note = why.removeprefix(f"{IN_PART} from records: ")
        row["flags"] = ", ".join(filter(None, [row["flags"], SEEDS_SO_FAR]))
        row["flag_notes"] = " | ".join(filter(None, [row["flag_notes"], f"{SEEDS_SO_FAR}: {note}"]))
        for pair in row.get("pairs", []):
            pair["flags"] = row["flags"]
    return row


def _rows_whole(table: pd.DataFrame, case: Case, seeds: str) -> bool:
    """Whether every row a case compares has all of the budget's seeds (``seeds``, comma-separated) in
    a table rendered in part: then its verdict no longer waits on anything (other rows may)."""
    if "seeds" not in table.columns or not seeds:
        return False
    for row in case.rows:
        found = _matching(table, row)
        if found.empty or (~(pd.to_numeric(found["seeds"], errors="coerce") >= len(seeds.split(",")))).any():
            return False
    return True


def _matching(table: pd.DataFrame, row: dict) -> pd.DataFrame:
    """The rows of ``table`` that a claim's row selector (column -> value) names."""
    for key, value in row.items():
        if key in table.columns:
            table = table[table[key].astype(str) == str(value)]
    return table


def _rows_present(table: pd.DataFrame, case: Case) -> bool:
    """Whether every row a claim case compares matches a row of the table."""
    return not any(_matching(table, row).empty for row in case.rows)


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
    absent = grid.absent_custom_cells(study, config)
    for claim in study.get("claims", []):
        if any(row.get("model") in absent for row in claim["rows"]):
            continue  # a cell of your own this budget leaves out (its records are at other budgets)
        artifact = _artifact_of(study, claim["table"])
        if artifact not in built:
            testable = claim.get("testable", DEFAULT_TESTABLE)
            later = next((b for b in testable if b != budget), testable[0])
            reason = (f"not testable at this budget ({budget}): its grid leaves out artifact {artifact}; "
                      f"needs budget {later}, {_gpu_hours(study, claim, later)}")
            rows += [_untested_row(study, claim, case, config, reason) for case in cases(claim)]
            continue
        if claim["table"] in tables:
            table, waiting = tables[claim["table"]], (unrendered or {}).get(claim["table"])
            for case in cases(claim):
                if waiting and not _rows_present(table, case) and _testable_at(study, claim, budget):
                    # a table rendered from the records of some of its rows: this case reads one that waits
                    data, seeds = _provenance(study, config, case)
                    rows.append(_untested_row(study, claim, case, config, waiting, data, seeds))
                elif waiting and not _rows_whole(table, case, _provenance(study, config, case)[1]):
                    rows.append(_so_far(evaluate_case(study, config, table, case, runs), waiting))
                else:
                    rows.append(evaluate_case(study, config, table, case, runs))
            continue
        # only when rendering from recorded runs: an artifact with no records has no table
        for case in cases(claim):
            data, seeds = _provenance(study, config, case)
            reason = (f"synthetic data {data.removeprefix('synthetic ')}" if data.startswith("synthetic")
                      else (unrendered or {}).get(claim["table"], f"table {claim['table']} was not built"))
            rows.append(_untested_row(study, claim, case, config, reason, data, seeds))
    return rows
