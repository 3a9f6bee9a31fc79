"""What a verdict rests on besides its numbers: the budget's scales, whether the claim is testable there,
the runs behind a row (their flags) and the parameters compared.
"""

from __future__ import annotations

import math

import pandas as pd

from ... import grid
from .. import run_endings

from .spec import CAPPED, COUNTED, Case, DEFAULT_TESTABLE, RATE_AT_EDGE, STALLED, STILL_IMPROVING, is_synthetic
from .rules import _label, _matches, _number, pairs_needed


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
    """(flag, what it rests on) for the runs behind each row: still improving, capped, rate at grid edge,
    stalled."""
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
    parts = []
    for runs in behind:
        if "lr_edge" not in runs:
            continue
        for model, own in runs.drop_duplicates(["model", "dataset", "seed"]).groupby("model", sort=False):
            edge = own[own["lr_edge"].fillna("") != ""]
            if not edge.empty:
                first = edge.iloc[0]
                parts.append(f"{model} at {first['lr_factor']:g} x its recipe's rate (lr {first['lr']:g}), the "
                             f"{first['lr_edge']} factor its tuning tried")
    if parts:
        notes.append((RATE_AT_EDGE, "; ".join(dict.fromkeys(parts))))
    parts = []
    for runs in behind:
        if "stalled" not in runs:
            continue
        for model, own in runs.drop_duplicates(["model", "dataset", "seed"]).groupby("model", sort=False):
            hit = own[own["stalled"].fillna(False).astype(bool)]
            if not hit.empty:
                seeds = ", ".join(str(int(s)) for s in hit["seed"])
                parts.append(f"{model} {len(hit)}/{len(own)} seeds (seed {seeds}) no better than the training "
                             f"split's unigram frequencies")
    if parts:
        notes.append((STALLED, "; ".join(dict.fromkeys(parts))))
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
