"""The smoke run of the whole pipeline (`snakemake --profile profiles/smoke all`: every study's tables and
figures on synthetic stand-in corpora, real Snakemake, real papermill), made once in a temporary copy of
the project by the fixture smoke_project (tests/conftest.py), and every test that reads it: the workflow
(the run is complete, a failing notebook loses nothing), each study's artifacts, the claims scorecard
and the Snakemake report (opened in a real headless Chromium, which must show the figures; screenshots
in the test's output folder).

All of them sit in this one module so that pytest-xdist's `--dist loadfile` gives them, with the smoke
run, to one worker: no other worker waits for it. (The SLURM tests compare their numbers with it too, in
their own module: tests/test_slurm.py.)"""

import base64
import json
import math
import re
import shutil
import struct
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import copy_project, snakemake
from headless_browser import MISSING, HeadlessChromium, chromium_executable

from rnnrepro import grid
from rnnrepro.analysis import lru, table_formats
from rnnrepro.analysis.claims import COUNTED, HELD, NOT_HELD, NOT_TESTED, declared_columns
from rnnrepro.analysis.claims import outputs as claims_outputs
from rnnrepro.analysis.notebook import readable
from rnnrepro.configuration import REPO_ROOT, load_study

pytestmark = pytest.mark.slow

RUN_CONFIG = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
STUDIES = {name: load_study(name) for name in RUN_CONFIG["studies"]}


# --- the workflow ----------------------------------------------------------------------------------

def test_smoke_pipeline_produces_table1(smoke_project):
    smoke_run = smoke_project
    table = pd.read_csv(smoke_run / "results/smoke/tables/pru_table1.csv")
    smoke_models = load_study("pru")["budgets"]["smoke"]["artifacts"]["table1"]["models"]
    assert sorted(table["model"]) == sorted(smoke_models)
    assert set(table["dataset"]) == {"ptb"}
    assert set(table["corpus"]) == {"synth_ptb"}
    for column in ("val_ppl", "test_ppl", "params_m"):
        assert table[column].map(math.isfinite).all(), column
    assert (table["budget"] == "smoke").all()
    assert table["paper_test_ppl"].notna().all()
    # every reproduced number is the one the run wrote, as a published table gives it (four digits)
    for row in table.itertuples():
        metrics = json.loads((smoke_run / f"results/smoke/runs/pru/{row.corpus}/{row.model}/frac100/seed1111/"
                              "metrics.json").read_text())
        assert row.test_ppl == readable(metrics["test_ppl"])
    assert (smoke_run / "results/smoke/figures/pru_table1.png").stat().st_size > 10_000
    executed = json.loads((smoke_run / "results/smoke/notebooks/pru_table1.ipynb").read_text())
    assert executed["metadata"]["papermill"]["parameters"]["study"] == "pru"


def test_smoke_tables_have_the_columns_their_study_declares(smoke_project):
    """The claims are checked against the declared columns; every table the smoke run wrote has them."""
    for study in ("pru", "lru", "nlstm", "lrn"):
        built = grid.artifacts(load_study(study), {"budget": "smoke"})
        for table, (artifact, columns) in declared_columns(load_study(study)).items():
            if artifact not in built:  # left out of the smoke budget (its `omit`)
                continue
            written = pd.read_csv(smoke_project / f"results/smoke/tables/{table}.csv", nrows=0).columns
            assert sorted(written) == sorted(columns), (study, artifact, table)


def test_every_smoke_table_is_also_written_as_latex_and_markdown(smoke_project):
    tables = sorted((smoke_project / "results/smoke/tables").glob("*.csv"))
    assert "claims.csv" in [path.name for path in tables]
    for path in tables:
        assert path.with_suffix(".tex").read_text() == table_formats.texts(path)[".tex"], path.name
        assert path.with_suffix(".md").read_text() == table_formats.texts(path)[".md"], path.name


def test_second_run_has_nothing_to_do(smoke_project):
    result = snakemake(smoke_project, "-n", "--profile", "profiles/smoke", "all")
    assert result.returncode == 0, result.stderr
    assert "Nothing to be done" in result.stdout + result.stderr


def test_failing_notebook_is_reported_and_loses_nothing(smoke_project, tmp_path):
    project = copy_project(tmp_path)
    for part in ("results", "data", ".snakemake"):
        shutil.copytree(smoke_project / part, project / part)
    metrics = sorted((project / "results/smoke/runs").rglob("metrics.json"))
    before = {p: p.stat().st_mtime_ns for p in metrics}
    with open(project / "notebooks/pru_table1.py", "a") as f:
        f.write('\n# %%\nraise RuntimeError("deliberately broken")\n')
    result = snakemake(project, "--profile", "profiles/smoke", "all")
    assert result.returncode != 0
    log = (project / "logs/smoke/notebooks/pru_table1.log").read_text()
    assert "notebooks/pru_table1.py failed in cell" in log and "deliberately broken" in log
    assert (project / "logs/smoke/notebooks/pru_table1.failed.ipynb").exists()
    assert {p: p.stat().st_mtime_ns for p in metrics} == before  # no training cell was rerun


# --- LRU -------------------------------------------------------------------------------------------

def test_smoke_run_produces_every_lru_artifact(smoke_project):
    for name in ("lru_curves", "lru_variant_curves", "lru_convergence", "lru_stat_efficiency",
                 "lru_variant_stat_efficiency"):
        assert (smoke_project / f"results/smoke/figures/{name}.png").stat().st_size > 10_000, name
    accuracy = pd.read_csv(smoke_project / "results/smoke/tables/lru_accuracy.csv")
    assert len(accuracy) == 7 and set(accuracy["seeds"]) == {1} and set(accuracy["corpus"]) == {"synth_char_small"}
    assert accuracy["test_loss"].map(math.isfinite).all() and accuracy["paper_test_loss"].notna().all()
    # both published to four significant digits
    assert accuracy["test_bpc"].tolist() == pytest.approx((accuracy["test_loss"] / math.log(2)).tolist(), rel=1e-3)
    convergence = pd.read_csv(smoke_project / "results/smoke/tables/lru_convergence.csv")
    assert set(convergence["dataset"]) == {"all", "ptb_char"} and (convergence["runs"] == 1).all()
    efficiency = pd.read_csv(smoke_project / "results/smoke/tables/lru_stat_efficiency.csv")
    assert len(efficiency) == 2 * 2 and set(efficiency["dataset"]) == {"ptb_char"}
    tokens = efficiency.pivot_table(index="model", columns="fraction", values="train_tokens")
    assert (tokens[20] < tokens[100]).all()
    for path in (smoke_project / "results/smoke/runs/lru").rglob("metrics.json"):
        metrics = json.loads(path.read_text())
        history = pd.read_csv(path.parent / "history.csv")
        assert metrics["params"] > 0 and metrics["param_budget"] in (10_000, 24_000)
        assert lru.epochs_to_best(history) == metrics["best_epoch"]


# --- Nested LSTM autocomplete ----------------------------------------------------------------------

NLSTM_MODELS = ["gru_2x600", "lstm_2x600", "nlstm_1x600_d2"]


def test_smoke_run_produces_the_nlstm_artifacts(smoke_project):
    project = smoke_project
    models = pd.read_csv(project / "results/smoke/tables/nlstm_models.csv")
    assert models["model"].tolist() == NLSTM_MODELS and models["equal_to_paper"].all()
    test = pd.read_csv(project / "results/smoke/tables/nlstm_test.csv")
    assert test["model"].tolist() == NLSTM_MODELS and (test["corpus"] == "synth_autocomplete").all()
    for column in ("test_cross_entropy", "test_accuracy_pct", "paper_test_cross_entropy", "paper_test_accuracy_pct"):
        assert test[column].map(math.isfinite).all(), column
    for row in test.itertuples():
        metrics = json.loads((project / f"results/smoke/runs/nlstm/synth_autocomplete/{row.model}/frac100/"
                              f"seed{row.seed}/metrics.json").read_text())
        assert row.test_cross_entropy == readable(metrics["test_cross_entropy"])
    for figure in ("nlstm_convergence", "nlstm_examples"):
        assert (project / f"results/smoke/figures/{figure}.png").stat().st_size > 10_000


# --- LRN -------------------------------------------------------------------------------------------

LRN_CELLS = ["lstm", "lstm_loop", "gru", "atr", "sru", "lrn"]
LRN_TARGETS = ["results/smoke/tables/lrn_lm.csv", "results/smoke/figures/lrn_lm.png", "results/smoke/tables/lrn_speed.csv",
               "results/smoke/figures/lrn_speed.png", "results/smoke/tables/lrn_unfolded.csv", "results/smoke/figures/lrn_unfolded.png"]


def test_smoke_artifacts_exist_with_every_stage(smoke_project):
    for target in LRN_TARGETS:
        assert (smoke_project / target).stat().st_size > 0, target
    lm = pd.read_csv(smoke_project / "results/smoke/tables/lrn_lm.csv")
    assert set(lm["stage"]) == {"base", "finetune", "dynamic"} and set(lm["corpus"]) == {"synth_ptb"}
    assert lm[["val_ppl", "test_ppl"]].notna().all().all() and lm["paper_test_ppl"].notna().all()
    assert (lm["weight_drop"] == "as released (none)").all() and (lm["head"] == "mixture of 15 softmaxes").all()
    speed = pd.read_csv(smoke_project / "results/smoke/tables/lrn_speed.csv")
    assert list(speed["model"]) == LRN_CELLS and speed.loc[0, "lm_ratio"] == 1.0
    assert speed["paper_snli_ratio"].round(3).tolist() == [1.0, 1.0, 0.935, 0.802, 0.985, 0.798]
    unfolded = pd.read_csv(smoke_project / "results/smoke/tables/lrn_unfolded.csv")
    assert set(unfolded["activation"]) == {"identity", "tanh"}
    assert unfolded["weight_to_last"].between(0, 1).all()
    speed_json = json.loads((smoke_project / "results/smoke/speed/lrn.json").read_text())
    assert speed_json["batch_size"] == 4   # the smoke budget's shapes reached the benchmark


# --- the claims scorecard --------------------------------------------------------------------------

def test_smoke_pipeline_scorecard(smoke_project):
    card = pd.read_csv(smoke_project / "results/smoke/tables/claims.csv")
    assert {"pru", "lru", "nlstm"} <= set(card["study"])
    # claims about exact parameter counts need no training: decided at every budget, smoke included
    counted = card["data"].str.startswith("none (exact counts")
    assert counted.any() and card[counted]["verdict"].isin([HELD, NOT_HELD]).all()
    trained = card[~counted]
    assert (trained["verdict"] == NOT_TESTED).all() and trained["reason"].str.startswith("synthetic data").all()
    assert (card["budget"] == "smoke").all()
    assert (smoke_project / "results/smoke/figures/claims.png").stat().st_size > 0


# --- the Snakemake report --------------------------------------------------------------------------

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
    files = sorted(project.glob("results/smoke/tables/*.csv")) + sorted(project.glob("results/smoke/figures/*.png"))
    assert files
    return files


def test_report_holds_every_table_and_figure_and_the_scorecard(smoke_project, report):
    text = report.read_text()
    for path in artifact_files(smoke_project):
        assert f"filename={path.name};base64" in text, f"{path.name} is not in the report"
    assert "claims.csv" in text and "claims.png" in text and "Claims scorecard" in text
    # one self-contained file: the figures are embedded, not linked
    figure = next(iter(sorted(smoke_project.glob("results/smoke/figures/*.png"))))
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


def test_report_opens_in_a_browser_and_shows_the_figures(smoke_project, report, tmp_path):
    if chromium_executable() is None:
        pytest.skip(MISSING)
    places = [(study["title"], artifact, spec["figures"]) for study in STUDIES.values()
              for artifact, spec in study["artifacts"].items()
              if spec["figures"] and artifact in grid.artifacts(study, {"budget": "smoke"})]
    places.append(("Claims scorecard", None, [Path(p).stem for p in
                                              claims_outputs("results/smoke", list(STUDIES))["figures"]]))
    assert ({f"{figure}.png" for *_, figures in places for figure in figures}
            == {p.name for p in smoke_project.glob("results/smoke/figures/*.png")})
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
        assert size == png_size((smoke_project / "results/smoke/figures" / f"{figure}.png").read_bytes()), figure
    print(f"screenshots in {tmp_path}")


def show_figure(browser: HeadlessChromium, figure: str, screenshots: Path, shown: dict) -> None:
    """Click a figure's eye in the file list: the page must show the image (the list stays)."""
    click_in_row(browser, figure, "eye")
    size = browser.wait_for(f"""(() => {{ const img = [...document.querySelectorAll('img')].find(i =>
        i.src.includes('filename={figure}.png;') && i.complete && i.naturalWidth > 0);
        return img ? [img.naturalWidth, img.naturalHeight] : null; }})()""", f"figure {figure}")
    shown[figure] = tuple(size)
    browser.screenshot(screenshots / f"report-{figure}.png")


def test_the_results_page_loads_offline_with_every_image_and_one_row_per_claim(smoke_project, tmp_path):
    """`all` ends with the budget's results page: one self-contained file (opened from a copy in a
    folder of its own, so nothing beside it can be read) whose first screen counts the verdicts, whose
    scorecard has one row per row of claims.csv, and whose every image loads."""
    if chromium_executable() is None:
        pytest.skip(MISSING)
    page = smoke_project / "results/smoke/index.html"
    card = pd.read_csv(smoke_project / "results/smoke/tables/claims.csv")
    alone = tmp_path / "alone" / "index.html"
    alone.parent.mkdir()
    shutil.copy(page, alone)
    text = alone.read_text()
    assert "http://" not in text.replace("http://www.w3.org", "") and "https://" not in text.split("<body>")[0]
    with HeadlessChromium(tmp_path / "chromium-profile") as browser:
        browser.open(alone.as_uri())
        browser.wait_for("document.querySelector('table.scorecard') !== null", "the scorecard")
        rows = browser.evaluate("document.querySelectorAll('table.scorecard tbody tr').length")
        assert rows == len(card)
        images = browser.wait_for("""(() => { const all = [...document.images];
            return all.length && all.every(i => i.complete) ? all.map(i => [i.alt, i.naturalWidth]) : null; })()""",
                                  "every image")
        figures = {p.stem for p in smoke_project.glob("results/smoke/figures/*.png")}
        assert figures <= {alt for alt, _ in images}, figures - {alt for alt, _ in images}
        assert all(width > 0 for _, width in images), [alt for alt, width in images if not width]
        tiles = browser.evaluate("[...document.querySelectorAll('.tile')].map(t => t.innerText)")
        lines = [[line.strip() for line in t.splitlines() if line.strip()] for t in tiles]
        # verdicts from training first, then the checks of the paper's arithmetic (exact counts), then not tested
        counted = card["data"] == COUNTED
        trained = card.loc[~counted & (card["verdict"] != NOT_TESTED), "verdict"].value_counts()
        assert [ls[:2] for ls in lines[:2]] == [[str(trained.get(v, 0)), v] for v in (HELD, NOT_HELD)], tiles
        assert lines[4][:2] == [str(int((counted & (card["verdict"] == HELD)).sum())), HELD], tiles
        assert lines[-1][:2] == [str(int((card["verdict"] == NOT_TESTED).sum())), NOT_TESTED], tiles
        # the verdicts are on the first screen
        top = browser.evaluate("document.querySelector('.tile').getBoundingClientRect().bottom")
        assert top < 1000
        browser.screenshot(tmp_path / "page.png")
