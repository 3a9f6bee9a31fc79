"""The Snakemake report: every table and figure (and the claims scorecard) marked report(), each with a
caption built from its notebook, study file and run config; built from the smoke run and opened in a
real headless Chromium, which must show the figures (screenshots in the test's output folder)."""

import base64
import re
import struct
from html import unescape
from pathlib import Path

import pytest
import yaml
from conftest import snakemake
from docutils.core import publish_parts
from headless_browser import MISSING, HeadlessChromium, chromium_executable

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


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def report(smoke_project, tmp_path_factory) -> Path:
    """`snakemake --report` over the smoke run (the report of what `make smoke` built)."""
    path = tmp_path_factory.mktemp("report") / "report.html"
    result = snakemake(smoke_project, "--profile", "profiles/smoke", "--report", str(path), "all")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return path


def artifact_files(project: Path) -> list[Path]:
    files = sorted(project.glob("results/tables/*.csv")) + sorted(project.glob("results/figures/*.png"))
    assert files
    return files


@pytest.mark.slow
def test_report_holds_every_table_and_figure_and_the_scorecard(smoke_project, report):
    text = report.read_text()
    for path in artifact_files(smoke_project):
        assert f"filename={path.name};base64" in text, f"{path.name} is not in the report"
    assert "claims.csv" in text and "claims.png" in text and "Claims scorecard" in text
    # one self-contained file: the figures are embedded, not linked
    figure = next(iter(sorted(smoke_project.glob("results/figures/*.png"))))
    embedded = re.search(rf"data:image/png;charset=utf8;filename={re.escape(figure.name)};base64,([A-Za-z0-9+/=]+)",
                         text)
    assert embedded and base64.b64decode(embedded.group(1)) == figure.read_bytes()


ROWS = "[...document.querySelectorAll('tr')].filter(r => r.querySelector('a[iconname=eye]'))"


def show_files(browser: HeadlessChromium, url: str, category: str, subcategory: str | None) -> None:
    """Results > the category (> the subcategory, which the report skips when it is the only one)."""
    browser.open(url)
    browser.click_text("Results")
    browser.click_text(category)
    if subcategory and not browser.evaluate(f"{ROWS}.length"):
        browser.click_text(subcategory)
    browser.wait_for(f"{ROWS}.length", f"the files of {category} / {subcategory}")


def click_in_row(browser: HeadlessChromium, name: str, icon: str) -> None:
    browser.evaluate(f"{ROWS}.find(r => [...r.children].some(c => c.textContent.trim() === {name!r}))"
                     f".querySelector('a[iconname={icon}]').click()")


@pytest.mark.slow
def test_report_opens_in_a_browser_and_shows_the_figures(smoke_project, report, tmp_path):
    if chromium_executable() is None:
        pytest.skip(MISSING)
    places = [(study["title"], artifact, spec["figures"]) for study in STUDIES.values()
              for artifact, spec in study["artifacts"].items() if spec["figures"]]
    places.append(("Claims scorecard", None, ["claims"]))
    assert ({f"{figure}.png" for *_, figures in places for figure in figures}
            == {p.name for p in smoke_project.glob("results/figures/*.png")})
    url, shown = report.as_uri(), {}
    with HeadlessChromium(tmp_path / "chromium-profile") as browser:
        browser.open(url)
        browser.wait_for("document.body.innerText.includes('budget')", "the workflow description")
        browser.screenshot(tmp_path / "report-home.png")
        for category, artifact, figures in places:
            show_files(browser, url, category, artifact)
            for figure in figures:
                show_figure(browser, figure, tmp_path, shown)
            # the artifact's caption (one per artifact), which replaces the file list
            click_in_row(browser, figures[0], "information-circle")
            browser.wait_for("document.body.innerText.includes('Replicates: ') && "
                             "document.body.innerText.includes('Budget: smoke')", f"the caption of {figures[0]}")
    for figure, size in shown.items():
        assert size == png_size((smoke_project / "results/figures" / f"{figure}.png").read_bytes()), figure
    print(f"screenshots in {tmp_path}")


def show_figure(browser: HeadlessChromium, figure: str, screenshots: Path, shown: dict) -> None:
    """Click a figure's eye in the file list: the page must show the image (the list stays)."""
    click_in_row(browser, figure, "eye")
    size = browser.wait_for(f"""(() => {{ const img = [...document.querySelectorAll('img')].find(i =>
        i.src.includes('filename={figure}.png;') && i.complete && i.naturalWidth > 0);
        return img ? [img.naturalWidth, img.naturalHeight] : null; }})()""", f"figure {figure}")
    shown[figure] = tuple(size)
    browser.screenshot(screenshots / f"report-{figure}.png")
