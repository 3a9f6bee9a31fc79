"""The results page of a budget: one self-contained HTML file a person reads, built from that budget's
tables, figures and scorecard, with no training and no network.

    python -m rnnrepro.results_page --run-config '{"budget": "smoke", "seeds": [1111], "studies": [...]}'

It is written to ``<results>/index.html`` (:func:`page_path`: ``results/index.html`` at the default
budget, ``results/<budget>/index.html`` at every other) by the workflow's ``results_page`` rule (part of
``all``, so ``make smoke`` writes the smoke one) and by ``python -m rnnrepro.records render`` from
recorded runs. What it shows, top to bottom:

- what was found: the scorecard's rows counted by verdict (held, not held, inconclusive, not testable at
  this scale, not tested), how many of the decided ones rest on exact parameter counts rather than
  training, the flags; the budget, the models' widths and parameters against the papers', the seeds,
  the machines the runs trained on and when (from their ``metrics.json``), and when the page was built;
- the scorecard (``tables/claims.csv``), one row per claim case: the claim in words, the paper's numbers,
  ours with the effect, its 90 % interval and flags, the scale, the other scale's verdict and effect
  where the study has one (``cpu_wide`` beside ``cpu``), the verdict in colour and word, the reason; each
  row links to the artifact whose table it reads;
- per study, each artifact: its caption (rnnrepro.report, the one the Snakemake report shows: what it
  shows, budget, data, seeds, where the paper's numbers come from), its figures and its tables inline,
  numbers as the tables publish them (rnnrepro.analysis.notebook.rounded), each ``paper_*`` column beside
  the column it is the paper's value of; an artifact without outputs says why.

The HTML comes from the Jinja2 template ``templates/results_page.html.j2``; figures are embedded as data
URIs, so the file can be mailed or opened anywhere. No torch.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import pandas as pd

from . import console, grid, layout
from .analysis.claims import (COUNTED, FRAGILE, CAPPED, HELD, INCONCLUSIVE, NOT_HELD, NOT_TESTABLE, NOT_TESTED,
                              STILL_IMPROVING, outputs as claims_outputs, read_scorecard)
from .analysis.notebook import readable
from .configuration import load_study
from .report import CAPTION_MARKDOWN, artifact_caption_markdown
from .train.files import write_text_atomic

PAGE = layout.RESULTS_PAGE
TEMPLATE = "results_page.html.j2"
VERDICTS = (HELD, NOT_HELD, INCONCLUSIVE, NOT_TESTABLE, NOT_TESTED)
#: a table longer than this shows its first rows; the CSV beside the page holds them all
MAX_ROWS = 40


def page_path(budget: str) -> Path:
    return Path(grid.results_dir(budget)) / PAGE


# ---------------------------------------------------------------- numbers and tables

def number_text(value) -> str:
    """A table's value as the page shows it: numbers as a published table gives them (four significant
    digits, or a paper's number as printed), thousands not grouped, nothing for a missing value."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        value = readable(value)
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:g}" if abs(value) >= 1e-4 \
            else f"{value:.3g}"
    return str(value)


def column_order(columns: list[str]) -> list[str]:
    """The columns a person reads, in the table's order, each ``paper_<x>`` right after ``<x>`` (after
    ``<x>_std`` where there is one); the per-seed ``<x>_samples`` left out (they are in the CSV)."""
    shown = [c for c in columns if not c.endswith("_samples")]
    papers = {c for c in shown if c.startswith("paper_") and c.removeprefix("paper_") in shown}
    order = []
    for column in shown:
        if column in papers:
            continue
        order.append(column)
        paper = f"paper_{column}"
        if paper in papers and f"{column}_std" not in shown:
            order.append(paper)
        if column.endswith("_std") and f"paper_{column.removesuffix('_std')}" in papers:
            order.append(f"paper_{column.removesuffix('_std')}")
    return order


@dataclass
class TableView:
    name: str
    href: str                     # the CSV, relative to the page
    columns: list[str]
    paper_columns: list[str]
    rows: list[list[tuple[str, bool]]]   # (text, whether a number)
    total: int                    # rows in the CSV


class DamagedOutput(ValueError):
    """A table or figure the page would show cannot be read; the message names it and how to rebuild it."""


def _rebuild(path: Path, budget: str, what: str) -> DamagedOutput:
    return DamagedOutput(f"{path} {what}: the page shows no damaged table or figure. Rebuild it: `python -m "
                         f"rnnrepro.records render --budget {budget}` where the budget is recorded, else rerun "
                         f"your snakemake command with the target {path} and --force")


def table_view(path: Path, page_dir: Path, max_rows: int = MAX_ROWS, budget: str = "") -> TableView:
    try:
        table = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as e:
        raise _rebuild(path, budget, f"is not a CSV table ({str(e).strip().splitlines()[0]})") from None
    columns = column_order([str(c) for c in table.columns])
    rows = [[(number_text(value), isinstance(value, (int, float)) and not isinstance(value, bool)) for value in row]
            for row in table[columns].head(max_rows).itertuples(index=False)]
    return TableView(path.stem, path.relative_to(page_dir).as_posix(), columns,
                     [c for c in columns if c.startswith("paper_")], rows, len(table))


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def data_uri(png: Path, budget: str = "") -> str:
    data = png.read_bytes()
    if not data.startswith(PNG_SIGNATURE):
        raise _rebuild(png, budget, "is empty (0 bytes)" if not data else "is not a PNG image")
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


# ---------------------------------------------------------------- the scorecard

def verdict_class(verdict: str) -> str:
    """The CSS class of a verdict: ``held``, ``not-held``, ... (the template colours them)."""
    return verdict.split(" at ")[0].replace(" ", "-") if verdict else "not-tested"


def artifact_of_table(studies: dict[str, dict]) -> dict[tuple[str, str], str]:
    """(study, table) -> the artifact that writes it."""
    return {(name, table): artifact for name, study in studies.items()
            for artifact, spec in study["artifacts"].items() for table in spec["tables"]}


def _text(value) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def scorecard_rows(card: pd.DataFrame, studies: dict[str, dict]) -> list[dict]:
    """One dict per scorecard row with what the template shows: by verdict (held first, not tested last),
    in the scorecard's order within each."""
    owners = artifact_of_table(studies)
    rows = []
    rank = {verdict: i for i, verdict in enumerate(VERDICTS)}
    ordered = card.iloc[sorted(range(len(card)), key=lambda i: rank.get(card["verdict"].iloc[i], len(rank)))]
    for row in ordered.itertuples(index=False):
        claim, _, per = row.claim.partition("[")
        artifact = owners.get((row.study, row.table))
        rows.append({
            "study": row.study, "claim": claim, "per": per.rstrip("]"), "statement": row.statement,
            "source": _text(row.source), "paper": _text(row.paper), "ours": _text(row.ours),
            "difference": _text(row.difference), "paper_difference": _text(row.paper_difference),
            "interval": _text(row.interval), "interval_method": _text(row.interval_method),
            "unit": _text(row.unit), "ratio": _text(row.ratio), "ratio_interval": _text(row.ratio_interval),
            "mde": _text(row.mde), "underpowered": _text(row.underpowered),
            "flags": [f for f in _text(row.flags).split(", ") if f], "flag_notes": _text(row.flag_notes),
            "scale": _text(row.scale), "seeds": _text(row.samples),
            "other_scale": _text(row.other_scale), "other_verdict": _text(row.other_scale_verdict),
            "other_difference": _text(row.other_scale_difference), "other_interval": _text(row.other_scale_interval),
            "other_flags": _text(row.other_scale_flags),
            "verdict": row.verdict, "verdict_class": verdict_class(row.verdict), "reason": _text(row.reason),
            "counted": row.data == COUNTED,
            "anchor": f"{row.study}-{artifact}" if artifact else "",
            "artifact": artifact or row.table,
        })
    return rows


def scorecard_seeds(card: pd.DataFrame) -> list[int]:
    """The seeds the scorecard's rows were measured over (its ``seeds`` column: a budget's study files
    may give seeds of their own, so the run config's are not always the ones used)."""
    found = set()
    for text in card["seeds"].dropna().astype(str):
        found |= {int(float(seed)) for seed in text.replace(";", ",").split(",") if seed.strip()}
    return sorted(found)


def verdict_counts(card: pd.DataFrame) -> list[dict]:
    """Each verdict with its number of scorecard rows, and how many of them rest on exact counts."""
    return [{"verdict": verdict, "class": verdict_class(verdict), "rows": int((card["verdict"] == verdict).sum()),
             "counted": int(((card["verdict"] == verdict) & (card["data"] == COUNTED)).sum())}
            for verdict in VERDICTS]


def not_tested_reasons(card: pd.DataFrame) -> list[tuple[str, int]]:
    """Why rows are not tested, grouped as the scorecard figure groups them, with their counts."""
    reasons = card.loc[card["verdict"] == NOT_TESTED, "reason"].fillna("").astype(str)
    kinds = reasons.map(lambda r: "synthetic data" if r.startswith("synthetic") else
                        "needs a larger budget" if r.startswith("not testable at this budget") else
                        "no table at this budget (records missing or stale)" if r.startswith("not rendered") else
                        "no result")
    return list(kinds.value_counts().items())


def flag_counts(card: pd.DataFrame) -> list[tuple[str, int]]:
    decided = card[card["verdict"].isin([HELD, NOT_HELD, INCONCLUSIVE, NOT_TESTABLE])]
    flags = decided["flags"].fillna("").astype(str)
    return [(flag, int(flags.str.contains(flag).sum())) for flag in (FRAGILE, STILL_IMPROVING, CAPPED)]


# ---------------------------------------------------------------- scale and machines

def _span(values: list[float], form) -> str:
    low, high = min(values), max(values)
    return form(low) if form(low) == form(high) else f"{form(low)}-{form(high)}"


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
            "params": f"{_span([v / 1e6 for v in mine], lambda v: f'{v:.2g}')} M" if len(mine) else "",
            "paper_params": f"{_span([v / 1e6 for v in papers], lambda v: f'{v:.2g}')} M" if len(papers) else "",
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


# ---------------------------------------------------------------- the artifacts

@dataclass
class ArtifactView:
    study: str
    artifact: str
    anchor: str
    title: str
    caption: str                  # HTML (the Markdown caption, rendered)
    figures: list[tuple[str, str]] = field(default_factory=list)     # (name, data URI)
    tables: list[TableView] = field(default_factory=list)
    missing: str = ""             # why it has no outputs here


def artifact_views(studies: dict[str, dict], config: dict, root: Path, states: dict[str, str]) -> list[ArtifactView]:
    """Every artifact of the budget's studies, its outputs read from the results tree ``root``;
    ``states``: why an artifact was not made (``<study>/<artifact>`` -> reason, from a render)."""
    views = []
    project = Path(".")
    for name, study in studies.items():
        for artifact in grid.artifacts(study, config):
            spec = study["artifacts"][artifact]
            caption = artifact_caption_markdown(study, config, artifact, project)
            title = caption.splitlines()[0].strip("*")
            view = ArtifactView(name, artifact, f"{name}-{artifact}", title,
                                CAPTION_MARKDOWN.render("\n".join(caption.splitlines()[2:])))
            tables = [root / "tables" / f"{t}.csv" for t in spec["tables"]]
            figures = [root / "figures" / f"{f}.png" for f in spec["figures"]]
            view.tables = [table_view(t, root, budget=config["budget"]) for t in tables if t.is_file()]
            view.figures = [(f.stem, data_uri(f, config["budget"])) for f in figures if f.is_file()]
            absent = [p.name for p in tables + figures if not p.is_file()]
            if absent:
                state = states.get(f"{name}/{artifact}", "")
                view.missing = (f"{', '.join(absent)} not made" + (f": {state}" if state else
                                f" (build them with `snakemake {(tables + figures)[0]}`)"))
            views.append(view)
    return views


# ---------------------------------------------------------------- the page

def environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("rnnrepro", "templates"),
                              autoescape=jinja2.select_autoescape(["html", "j2"]), trim_blocks=True,
                              lstrip_blocks=True, undefined=jinja2.StrictUndefined)


def build(run_config: dict, states: dict[str, str] | None = None, now: datetime.datetime | None = None) -> Path:
    """Write the budget's results page from its results tree; returns its path. ``states``: why an
    artifact was not made (a render from records)."""
    from .analysis.run_endings import run_endings

    budget = run_config["budget"]
    root = Path(grid.results_dir(budget))
    studies = {name: load_study(name) for name in run_config["studies"]}
    config = {"budget": budget, "seeds": run_config["seeds"]}
    scorecard = Path(claims_outputs(str(root), list(studies))["tables"][0])
    if not scorecard.is_file():
        raise FileNotFoundError(f"{scorecard} does not exist: the results page shows the scorecard first; build it "
                                f"(snakemake {scorecard}, or python -m rnnrepro.records render --budget {budget})")
    card = read_scorecard(scorecard)
    runs = run_endings(studies, config, root)
    figures = claims_outputs(str(root), list(studies))["figures"]
    effect_figures = {name: Path(path) for name, path in zip(studies, figures[1:])}
    views = artifact_views(studies, config, root, states or {})
    page = environment().get_template(TEMPLATE).render(
        budget=budget, synthetic=budget == grid.SMOKE,
        seeds=scorecard_seeds(card) or run_config["seeds"],
        built=(now or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y-%m-%d %H:%M UTC"),
        total=len(card), claims=len({(r.study, r.claim.partition("[")[0]) for r in card.itertuples()}),
        counts=verdict_counts(card), not_tested=not_tested_reasons(card), flags=flag_counts(card),
        rows=scorecard_rows(card, studies),
        other_scales=sorted({s for s in card["other_scale"].fillna("").astype(str) if s}),
        scales=study_scales(studies, config, runs, card), machines=machines(root),
        overview=data_uri(Path(figures[0]), budget) if Path(figures[0]).is_file() else "",
        studies=[{"id": name, "title": study["title"], "artifacts": [v for v in views if v.study == name],
                  "effects": data_uri(effect_figures[name], budget) if effect_figures[name].is_file() else ""}
                 for name, study in studies.items()],
        scorecard_href=scorecard.relative_to(root).as_posix())
    path = root / PAGE
    write_text_atomic(path, page)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnrepro.results_page", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-config", required=True, help="JSON: the run config (budget, seeds, studies)")
    args = parser.parse_args(argv)
    try:
        run_config = json.loads(args.run_config)
    except json.JSONDecodeError as error:
        parser.error(f"--run-config is not JSON ({error}): give the object the rule passes, e.g. "
                     '\'{"budget": "cpu", "seeds": [1111], "studies": ["pru"]}\'')
    missing = [key for key in ("budget", "seeds", "studies") if not isinstance(run_config, dict) or key not in run_config]
    if missing:
        parser.error(f"--run-config lacks {', '.join(missing)}: it needs the budget, its seeds and its studies")
    try:
        path = build(run_config)
    except (FileNotFoundError, DamagedOutput) as error:
        print(f"[rnnrepro] error: {error}", file=sys.stderr)
        return 1
    print(f"[rnnrepro] the results page: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(console.run_command(main))
