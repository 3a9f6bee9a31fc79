"""The facts under the results page's first screen: the models' scale against the papers' per study,
and the machines, torch versions and dates the runs were made with."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .. import grid


def _span(values: list[float], form) -> str:
    low, high = min(values), max(values)
    return form(low) if form(low) == form(high) else f"{form(low)}-{form(high)}"


def _sizes(values: list[float]) -> str:
    """Parameter counts as a span: "49-120 k", "0.55-4.7 M"."""
    if not values:
        return ""
    if max(values) < 1e6:
        return f"{_span([v / 1e3 for v in values], lambda v: f'{v:.0f}' if v >= 10 else f'{v:.2g}')} k"
    return f"{_span([v / 1e6 for v in values], lambda v: f'{v:.2g}')} M"


def study_scales(studies: dict[str, dict], config: dict, runs: pd.DataFrame, card: pd.DataFrame) -> list[dict]:
    """Per study: the widths of its models at this budget as a share of the paper's, their parameter
    counts (from the runs) and the paper's (from the scorecard's paper_params)."""
    found = []
    paper = {**config, "budget": "paper"}
    for name, study in studies.items():
        ratios = []
        for artifact in grid.artifacts(study, config):
            spec = study["artifacts"][artifact]
            if not grid.artifact_cells(study, config, artifact):  # exact counts of the paper's models
                continue
            for model in spec.get("models", []):
                for dataset in spec.get("datasets", []) or [None]:
                    try:
                        corpus = grid.corpus_for(study, config, dataset)
                        ours = grid.architecture(study, config, model, corpus, dataset)["hidden_size"]
                        theirs = grid.architecture(study, paper, model, grid.corpus_for(study, paper, dataset),
                                                   dataset)["hidden_size"]
                    except Exception:  # a model or dataset this budget sizes otherwise: no ratio
                        continue
                    if isinstance(ours, int) and isinstance(theirs, int) and theirs:
                        ratios.append(ours / theirs)
        mine = runs[runs["study"] == name]["params"].dropna() if len(runs) else pd.Series(dtype=float)
        papers = card.loc[card["study"] == name, "paper_params"].dropna()
        found.append({
            "study": name, "title": study["title"],
            "width": f"x{_span(ratios, lambda r: f'{r:.2g}')}" if ratios else "",
            "params": _sizes(list(mine)), "paper_params": _sizes(list(papers)),
        })
    return found


def machines(root: Path) -> dict:
    """The machines, torch versions and dates of the runs in a results tree (their metrics.json)."""
    names, torches, dates, runs = set(), set(), [], 0
    for path in sorted((root / "runs").glob("*/*/*/frac*/seed*/metrics.json")):
        try:
            metrics = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        runs += 1
        machine = metrics.get("machine") or {}
        gpu = machine.get("gpu") or (metrics.get("device_name") if metrics.get("device") != "cpu" else None)
        cpu = machine.get("cpu") or metrics.get("device_name") or "unknown CPU"
        cores = f", {machine['cpus']} cores" if machine.get("cpus") else ""
        names.add(f"{gpu} GPU" if gpu else f"{cpu} CPU{cores}")
        if metrics.get("torch_version"):
            torches.add(str(metrics["torch_version"]))
        if metrics.get("finished_at"):
            dates.append(str(metrics["finished_at"])[:10])
    return {"runs": runs, "machines": sorted(names), "torch": sorted(torches),
            "dates": (min(dates), max(dates)) if dates else None}
