"""The results page's pieces on hand-written values: numbers as a table publishes them, the columns a
person reads, the verdicts' classes and counts (rnnrepro.results_page, rnnrepro.analysis.notebook)."""

import copy
import re

import pandas as pd
import pytest

from rnnrepro.analysis.claims import COUNTED, HELD, INCONCLUSIVE, NOT_HELD, NOT_TESTABLE, NOT_TESTED
from rnnrepro.analysis.notebook import readable, rounded
from rnnrepro.results_page import column_order, number_text, scorecard_seeds, verdict_class, verdict_counts


@pytest.mark.parametrize("value, shown", [
    (278.65515706, 278.7),      # a computed perplexity: four significant digits
    (62.42, 62.42),             # a paper's number as printed stays
    (2.1497, 2.1497),
    (0.559568, 0.559568),       # a size in millions stays (six digits)
    (0.0123456789, 0.01235),
    (1234567.891, 1235000.0),
    (0.0, 0.0),
])
def test_a_number_keeps_what_a_published_table_would(value, shown):
    assert readable(value) == shown


def test_rounded_tables_keep_the_seeds_values_whole_and_integers_as_integers():
    table = pd.DataFrame({"val_ppl": [278.65515706, 301.1234567], "epochs": [12.0, 40.0],
                          "val_ppl_samples": ["278.65515706;279.1", "301.1234567"], "model": ["a", "b"]})
    out = rounded(table)
    assert list(out["val_ppl"]) == [278.7, 301.1]
    assert str(out["epochs"].dtype) == "Int64" and list(out["epochs"]) == [12, 40]
    assert list(out["val_ppl_samples"]) == list(table["val_ppl_samples"])  # what the scorecard reads
    assert list(out["model"]) == ["a", "b"]


@pytest.mark.parametrize("value, text", [
    (278.65515706, "278.7"), (12.0, "12"), (float("nan"), ""), (None, ""), (True, "yes"), ("lstm", "lstm"),
    (2.885e6, "2885000"), (0.00001234, "1.23e-05"),
])
def test_numbers_on_the_page(value, text):
    assert number_text(value) == text


def test_each_paper_column_stands_beside_ours_and_samples_are_left_to_the_csv():
    columns = ["model", "paper_test_ppl", "test_ppl", "test_ppl_std", "val_ppl", "paper_val_ppl",
               "test_ppl_samples", "paper_params_m"]
    assert column_order(columns) == ["model", "test_ppl", "test_ppl_std", "paper_test_ppl", "val_ppl", "paper_val_ppl",
                                     "paper_params_m"]


def test_verdicts_are_counted_and_coloured_by_their_word():
    card = pd.DataFrame({"verdict": [HELD, HELD, NOT_HELD, INCONCLUSIVE, NOT_TESTABLE, NOT_TESTED, NOT_TESTED],
                         "data": ["real", COUNTED, "real", "real", "real", "", ""]})
    counts = {c["verdict"]: (c["rows"], c["counted"]) for c in verdict_counts(card)}
    assert counts == {HELD: (2, 1), NOT_HELD: (1, 0), INCONCLUSIVE: (1, 0), NOT_TESTABLE: (1, 0), NOT_TESTED: (2, 0)}
    assert [verdict_class(v) for v in (HELD, NOT_HELD, NOT_TESTABLE, "")] == [
        "held", "not-held", "not-testable", "not-tested"]


def test_the_page_names_the_seeds_the_rows_were_measured_over():
    card = pd.DataFrame({"seeds": ["1111,1112,1113", "1111", None, 1111]})
    assert scorecard_seeds(card) == [1111, 1112, 1113]


@pytest.mark.parametrize("run_config, said", [
    ("not json", "--run-config is not JSON"),
    ('{"budget": "cpu"}', "--run-config lacks seeds, studies"),
])
def test_a_wrong_run_config_is_named(run_config, said, capsys):
    from rnnrepro.results_page import main

    with pytest.raises(SystemExit) as stopped:
        main(["--run-config", run_config])
    assert stopped.value.code == 2 and said in capsys.readouterr().err


# ---------------------------------------------------------------- the page in words

STUDY_NAMES = ["pru", "nlstm", "lru", "lrn"]


def _scorecard(studies: dict) -> pd.DataFrame:
    """A scorecard with a row per claim of the studies: the headline claims decided (in turn held, not
    held, inconclusive), two exact-count checks held, every other claim not tested."""
    from rnnrepro.analysis.claims import COLUMNS

    rows, verdicts = [], [HELD, NOT_HELD, INCONCLUSIVE]
    for name, study in studies.items():
        for number, claim in enumerate(study["claims"]):
            row = dict.fromkeys(COLUMNS, "")
            row.update(study=name, claim=f"{claim['id']}[dataset=ptb]", statement=claim["statement"],
                       source=claim["source"], table=claim["table"], value=claim["value"], data="real",
                       verdict=NOT_TESTED, reason="not testable at this budget (cpu): needs budget paper",
                       seeds="1111,1112,1113", budget="cpu")
            if claim.get("headline"):
                row.update(verdict=verdicts[number % 3], difference="-3.268", paper_difference="-3.87",
                           samples="3 v 3", reason="the check")
            elif claim["id"] == "more_levels_fewer_ru_params":   # checked on exact counts, no training
                row.update(verdict=HELD, data=COUNTED, difference="+1.8e+05; +1.35e+05; +7.98e+04",
                           ours="1,True,released 2.885e+06; 2,True,released 2.705e+06; 3,True,released 2.57e+06; "
                                "4,True,released 2.49e+06")
            rows.append(row)
    return pd.DataFrame(rows)


@pytest.fixture
def page(tmp_path, monkeypatch):
    """The cpu results page built from a hand-written scorecard in an empty results tree."""
    from rnnrepro.configuration import load_study
    from rnnrepro.results_page import build

    studies = {name: load_study(name) for name in STUDY_NAMES}
    card = _scorecard(studies)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results/cpu/tables").mkdir(parents=True)
    card.to_csv(tmp_path / "results/cpu/tables/claims.csv", index=False)
    path = build({"budget": "cpu", "seeds": [1111, 1112, 1113], "studies": STUDY_NAMES})
    return tmp_path / path, studies, card


def test_every_study_names_headline_claims():
    from rnnrepro.configuration import load_study

    for name in STUDY_NAMES:
        assert any(claim.get("headline") for claim in load_study(name)["claims"]), name


def test_count_checks_are_apart_from_trained_verdicts_and_read_as_numbers(page):
    path, studies, card = page
    html = path.read_text()
    assert html.count('<tr class="claim ') == len(card)       # every row of claims.csv, some folded
    assert "<li>K = 1: 2,885,000</li>" in html and "+180,000; +135,000; +79,800" in html
    assert "2.885e+06" not in html and "1,True,released" not in html
    assert "Checks of the paper&#39;s arithmetic" in html and "Verdicts from training" in html
    assert html.count('<details class="fold">') == len(STUDY_NAMES)   # one fold per paper: one reason here
    assert "Checks of the paper&#39;s arithmetic (exact parameter counts, no training): 1 of 1 held." in html
    headline = sum(bool(c.get("headline")) for s in studies.values() for c in s["claims"])
    tiles = re.findall(r'<a class="tile [^"]+" href="#scorecard"><span class="n">(\d+)</span>([^<]+)', html)
    assert [(int(n), word) for n, word in tiles[:4]] == [
        (sum(v == verdict for v in card.loc[card["data"] != COUNTED, "verdict"]), verdict)
        for verdict in (HELD, NOT_HELD, INCONCLUSIVE, NOT_TESTABLE)]
    assert sum(int(n) for n, _ in tiles[:4]) == headline and (int(tiles[4][0]), tiles[4][1]) == (1, HELD)


def test_the_first_screen_names_every_papers_headline_claims_and_their_verdicts(page, tmp_path):
    """In a 1400 x 1000 window, without scrolling: each headline claim's statement and its verdict."""
    from headless_browser import MISSING, HeadlessChromium, chromium_executable

    if chromium_executable() is None:
        pytest.skip(MISSING)
    path, studies, card = page
    expected = {row.statement: row.verdict for row in card.itertuples()
                if any(c.get("headline") and c["statement"] == row.statement for c in studies[row.study]["claims"])}
    assert len(expected) >= len(STUDY_NAMES)
    with HeadlessChromium(tmp_path / "chromium-profile", width=1400, height=1000) as browser:
        browser.open(path.as_uri())
        browser.wait_for("document.querySelector('.papers') !== null", "the papers' paragraphs")
        shown = browser.evaluate("""[...document.querySelectorAll('.papers .headline > li')].map(li => {
            const a = li.querySelector('a'), badge = li.querySelector('.badge');
            return [a.innerText, a.getBoundingClientRect().bottom, badge.innerText,
                    badge.getBoundingClientRect().bottom, badge.getBoundingClientRect().height]; })""")
        browser.screenshot(tmp_path / "first-screen.png")
    found = {text: (bottom, verdict, badge_bottom, height) for text, bottom, verdict, badge_bottom, height in shown}
    for statement, verdict in expected.items():
        assert statement in found, statement
        bottom, shown_verdict, badge_bottom, height = found[statement]
        assert shown_verdict == verdict and max(bottom, badge_bottom) <= 1000, (statement, found[statement])
        assert height < 30, f"the verdict pill of {statement!r} wraps"


@pytest.fixture
def pru_cpu(monkeypatch):
    from rnnrepro.configuration import REPO_ROOT, load_study

    monkeypatch.chdir(REPO_ROOT)
    study = copy.deepcopy(load_study("pru"))  # changed by the tests: never the loaded one
    return study, {"budget": "cpu", "seeds": [1111, 1112, 1113]}


def test_a_caption_cannot_put_html_into_the_page(pru_cpu, tmp_path):
    """Captions quote the study file (and a config's cells of your own): raw HTML there is shown as text,
    and a javascript: link is no link."""
    from rnnrepro.results_page import artifact_views

    study, config = pru_cpu
    study["title"] = 'PRU <script>alert("title")</script>'
    artifact = next(a for a in study["artifacts"] if study["paper"].get(a))
    study["artifacts"][artifact]["paper_source"] = ('<img src=x onerror="alert(1)"> [read me](javascript:alert(2)) '
                                                    '<a href="javascript:alert(3)">x</a>')
    view = next(v for v in artifact_views({"pru": study}, config, tmp_path, {}) if v.artifact == artifact)
    assert "<script" not in view.caption and "<img" not in view.caption and "<a href" not in view.caption
    assert 'href="javascript' not in view.caption, view.caption
    assert "&lt;script&gt;" in view.caption and "&lt;img src=x" in view.caption


def test_an_empty_table_or_figure_stops_the_page_naming_it(pru_cpu, tmp_path):
    from rnnrepro.results_page import DamagedOutput, artifact_views

    study, config = pru_cpu
    spec = study["artifacts"]["table1"]
    table = tmp_path / "tables" / f"{spec['tables'][0]}.csv"
    table.parent.mkdir()
    table.write_text("")
    with pytest.raises(DamagedOutput, match=f"{table} is not a CSV table .*render --budget cpu"):
        artifact_views({"pru": study}, config, tmp_path, {})
    table.unlink()
    figure = tmp_path / "figures" / f"{study['artifacts']['fig1']['figures'][0]}.png"
    figure.parent.mkdir()
    figure.write_bytes(b"")
    with pytest.raises(DamagedOutput, match=rf"{figure} is empty \(0 bytes\)"):
        artifact_views({"pru": study}, config, tmp_path, {})
    figure.write_bytes(b"<html>")
    with pytest.raises(DamagedOutput, match=f"{figure} is not a PNG image"):
        artifact_views({"pru": study}, config, tmp_path, {})


def test_each_table_links_its_latex_and_markdown_beside_its_csv(tmp_path, monkeypatch):
    """The page links the .tex and .md written beside each CSV (rnnrepro.analysis.table_formats)."""
    from rnnrepro.analysis.table_formats import texts
    from rnnrepro.configuration import load_study
    from rnnrepro.results_page import build

    studies = {name: load_study(name) for name in STUDY_NAMES}
    monkeypatch.chdir(tmp_path)
    tables = tmp_path / "results/cpu/tables"
    tables.mkdir(parents=True)
    _scorecard(studies).to_csv(tables / "claims.csv", index=False)
    csv = tables / "pru_table1.csv"
    csv.write_text("model,test_ppl,paper_test_ppl\nlstm_m1000,120.5,66.29\n")
    for suffix, text in texts(csv).items():
        csv.with_suffix(suffix).write_text(text)
    html = (tmp_path / build({"budget": "cpu", "seeds": [1111], "studies": STUDY_NAMES})).read_text()
    for href in ("tables/pru_table1.csv", "tables/pru_table1.tex", "tables/pru_table1.md"):
        assert f'<a href="{href}">' in html, href
    assert "LaTeX" in html and "Markdown" in html


def test_the_protocol_sentence_counts_each_studys_grid_from_its_study_file():
    from rnnrepro import grid
    from rnnrepro.results_page.summary import protocol

    studies = {name: grid.load_study(name) for name in ("pru", "lru", "lrn", "nlstm")}
    rates = {name: len(grid.tuned_settings(study, {"budget": "cpu"})["tuning"]["lr_factors"])
             for name, study in studies.items()}
    sentence = protocol(studies, "cpu")
    for count in set(rates.values()):
        named = [name for name, n in rates.items() if n == count]
        assert f"{named[-1]}: {count} learning rates, 1 seed each" in sentence, sentence
    assert "5 seeds a row" in sentence
    # a study whose grid grows is counted apart from the others
    wider = copy.deepcopy(studies)
    count = max(rates.values()) + 1  # a grid no other study has
    wider["pru"]["budgets"]["cpu"]["artifacts"]["tuning"]["tuning"]["lr_factors"] = [2.0 ** k for k in range(count)]
    assert f"pru: {count} learning rates, 1 seed each" in protocol(wider, "cpu")
    # the recipes' own rates (no tuning) and the synthetic smoke run say nothing of a protocol
    assert protocol(studies, "paper") == protocol(studies, "smoke") == ""
