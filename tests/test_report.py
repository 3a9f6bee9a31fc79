"""The Snakemake report's captions: every table and figure (and the claims scorecard) marked report()
has one, built from its notebook, study file and run config. The report itself, built from the smoke
run and opened in a headless Chromium, is checked in tests/test_smoke_run.py."""

import re
from html import unescape

import pytest
import yaml
from docutils.core import publish_parts

from rnnrepro import grid
from rnnrepro.configuration import REPO_ROOT, load_study
from rnnrepro.report import artifact_caption, claims_caption, notebook_header

RUN_CONFIG = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
SMOKE = dict(RUN_CONFIG, budget="smoke")
STUDIES = {name: load_study(name) for name in RUN_CONFIG["studies"]}


def text_of(rst: str) -> str:
    """The caption's text as the report shows it; a reStructuredText warning fails (halt_level 2)."""
    rendered = publish_parts(rst, writer="html", settings_overrides={"halt_level": 2, "report_level": 2})["body"]
    assert "<strong>" in rendered
    return " ".join(unescape(re.sub(r"<[^>]+>", "", rendered)).split())


@pytest.mark.parametrize("study, artifact", [(s, a) for s in STUDIES for a in STUDIES[s]["artifacts"]])
def test_caption_says_what_whence_budget_data_and_paper_source(study, artifact):
    spec = STUDIES[study]["artifacts"][artifact]
    text = text_of(artifact_caption(STUDIES[study], SMOKE, artifact, REPO_ROOT))
    title, description = notebook_header(REPO_ROOT / spec["notebook"])
    assert text.startswith(title.split("`")[0].split("*")[0].strip())    # what it shows
    assert description and " ".join(description.split()[:3]).split("`")[0] in text
    assert f"Replicates: {STUDIES[study]['title']}, artifact {artifact}." in text
    assert "Budget: smoke (synthetic stand-in corpora" in text
    for cell in grid.artifact_cells(STUDIES[study], SMOKE, artifact):   # the data under this budget
        dataset = grid.dataset_for(STUDIES[study], SMOKE, cell.corpus)
        corpus = grid.corpus_for(STUDIES[study], SMOKE, dataset)
        assert re.search(rf"Data: .*\b{dataset}\b" + (rf" \(trained on the stand-in {corpus}\)" if corpus != dataset
                                                      else ""), text)
    assert f"config/studies/{study}.yaml" in text                       # where the paper's numbers are
    if STUDIES[study]["paper"].get(artifact):                          # and where in the paper they are
        assert f"Their source: {' '.join(spec['paper_source'].replace('`', '').split())}." in text
    paper_budget = text_of(artifact_caption(STUDIES[study], RUN_CONFIG, artifact, REPO_ROOT))
    assert "Budget: paper." in paper_budget and "trained on the stand-in" not in paper_budget


def test_claims_caption_renders():
    text = text_of(claims_caption(SMOKE, STUDIES, REPO_ROOT))
    assert "Budget: smoke; seeds 1111" in text and "claim's source" in text
