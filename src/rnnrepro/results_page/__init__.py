"""The results page of a budget: one self-contained HTML file a person reads, built from that budget's
tables, figures and scorecard, with no training and no network.

    python -m rnnrepro.results_page --run-config '{"budget": "smoke", "seeds": [1111], "studies": [...]}'

It is written to ``<results>/index.html`` (:func:`page_path`: ``results/index.html`` at the default
budget, ``results/<budget>/index.html`` at every other) by the workflow's ``results_page`` rule (part of
``all``, so ``make smoke`` writes the smoke one) and by ``python -m rnnrepro.records render`` from
recorded runs. What it shows, top to bottom:

- the papers in words (:mod:`.summary`): per paper its headline claims (``headline: true`` in the study
  file's claims) with their verdicts, then a paragraph: what held, what did not, what could not be tested,
  at what scale and how sure. Trained verdicts only; exact parameter counts are counted apart, as checks of
  the paper's arithmetic, in the tiles too; then the budget's seeds, machines and the claims-by-budget
  figure;
- the scorecard (``tables/claims.csv``, :mod:`.scorecard`), by paper: its headline claims first, its other
  trained verdicts, its count checks, and the cases not tested folded, one line per reason. Each row: the
  claim in words, the paper's numbers and ours per compared row with the model's name and the size we
  trained, the effect, its 90 % interval and flags, the scale, the other scale's verdict where the study has
  one (``cpu_wide`` beside ``cpu``), the verdict and the reason, linked to the artifact whose table it reads;
- a cell of your own (docs/custom_cells.md) in a section of its own, against each baseline, not counted
  among the papers' claims;
- per study, each artifact (:mod:`.tables`): its caption (rnnrepro.report), its figures and its tables
  inline; an artifact without outputs says why.

The HTML comes from the Jinja2 template ``templates/results_page.html.j2``; figures are embedded as data
URIs, so the file can be mailed or opened anywhere. No torch.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import jinja2

from .. import grid, layout
from ..analysis.claims import outputs as claims_outputs, read_scorecard
from ..train.files import write_text_atomic
from .facts import machines, study_scales
from .scorecard import (artifact_of_table, paper_groups, not_tested_reasons, scorecard_seeds, tiles,
                        verdict_class, verdict_counts)
from .summary import headline_claims, paragraph, protocol
from .tables import DamagedOutput, artifact_views, column_order, data_uri, number_text
from .words import Namer, trained_sizes

__all__ = ["build", "column_order", "main", "number_text", "page_path", "scorecard_seeds", "verdict_class",
           "verdict_counts"]
PAGE = layout.RESULTS_PAGE
TEMPLATE = "results_page.html.j2"


def page_path(budget: str) -> Path:
    return Path(grid.results_dir(budget)) / PAGE


# ---------------------------------------------------------------- the page

def environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("rnnrepro", "templates"),
                              autoescape=jinja2.select_autoescape(["html", "j2"]), trim_blocks=True,
                              lstrip_blocks=True, undefined=jinja2.StrictUndefined)


def build(run_config: dict, states: dict[str, str] | None = None, now: datetime.datetime | None = None) -> Path:
    """Write the budget's results page from its results tree; returns its path. ``states``: why an
    artifact was not made (a render from records)."""
    from ..analysis.run_endings import run_endings

    budget = run_config["budget"]
    root = Path(grid.results_dir(budget))
    studies = {name: grid.load_study(name) for name in run_config["studies"]}
    config = {"budget": budget, "seeds": run_config["seeds"]}
    scorecard = Path(claims_outputs(str(root), list(studies))["tables"][0])
    if not scorecard.is_file():
        raise FileNotFoundError(f"{scorecard} does not exist: the results page shows the scorecard first; build it "
                                f"(snakemake {scorecard}, or python -m rnnrepro.records render --budget {budget})")
    card = read_scorecard(scorecard)
    runs = run_endings(studies, config, root)
    sizes = trained_sizes(runs)
    papers, mine = paper_groups(card, studies, {name: Namer(study, sizes) for name, study in studies.items()},
                                artifact_of_table(studies), grid.results_dir)
    scales = {s["study"]: s for s in study_scales(studies, config, runs, card)}
    seeds = scorecard_seeds(card) or run_config["seeds"]
    for paper in papers:
        paper["claims"] = headline_claims(paper)
        paper["paragraph"] = paragraph(paper, scales[paper["id"]], seeds, budget)
    figures = claims_outputs(str(root), list(studies))["figures"]
    effect_figures = {name: Path(path) for name, path in zip(studies, figures[1:])}
    by_budget = Path(grid.RESULTS) / layout.BY_BUDGET[1]
    views = artifact_views(studies, config, root, states or {})
    page = environment().get_template(TEMPLATE).render(
        budget=budget, synthetic=budget == grid.SMOKE, seeds=seeds, protocol=protocol(studies, budget),
        built=(now or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y-%m-%d %H:%M UTC"),
        total=len(card), papers=papers, mine=mine, tiles=tiles(papers), not_tested=not_tested_reasons(papers),
        other_scales=sorted({s for s in card["other_scale"].fillna("").astype(str) if s}),
        scales=list(scales.values()), machines=machines(root),
        overview=data_uri(Path(figures[0]), budget) if Path(figures[0]).is_file() else "",
        by_budget=data_uri(by_budget, budget) if by_budget.is_file() else "",
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
