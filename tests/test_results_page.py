"""The results page's pieces on hand-written values: numbers as a table publishes them, the columns a
person reads, the verdicts' classes and counts (rnnrepro.results_page, rnnrepro.analysis.notebook)."""

import copy

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
