"""The claims scorecard (rnnrepro.analysis.claims), the claims of every study file, and recorded runs
(rnnrepro.records): verdicts on hand-written tables, smoke data never tested, rendering from records."""

import json
import math
import os
import re
import shutil

from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import copy_project, python_in, render_status, snakemake

from rnnrepro import grid
from rnnrepro.analysis.claims import (CAPPED, COLUMNS, COUNTED, FRAGILE, HELD, INCONCLUSIVE, NOT_HELD, NOT_TESTABLE,
                                      NOT_TESTED, NOT_YET_RUN, OTHER_SCALE_COLUMNS, RATE_AT_EDGE, STALLED, STILL_IMPROVING, ClaimError,
                                      beside_other_scales, cases, check_claims, check_holds, evaluate_study, scorecard,
                                      read_scorecard, seed_verdict)
from rnnrepro.analysis.claims import outputs as claims_outputs
from rnnrepro.configuration import ConfigError, load_run_config, load_study, load_yaml, REPO_ROOT


def toy_study(**claim_fields) -> dict:
    """A study with one artifact (table `toy_t`, datasets ptb and wt2) and one claim."""
    claim = {"id": "a_beats_b", "statement": "A is below B.", "source": "Table 1", "table": "toy_t",
             "value": "test_ppl", "check": "less_than", "rows": [{"model": "a"}, {"model": "b"}],
             "per": {"dataset": ["ptb", "wt2"]}, **claim_fields}
    value = claim["value"]  # test_ppl (judged in nats), or test_loss where a test reads the plain difference
    return {
        "study": "toy",
        "artifacts": {"t": {"notebook": "notebooks/t.py", "datasets": ["ptb", "wt2"], "models": ["a", "b", "c"],
                            "fractions": [100], "tables": ["toy_t"],
                            "columns": {"toy_t": ["dataset", "model", value, f"{value}_samples",
                                                  f"paper_{value}", "seed"]},
                            "figures": []}},
        "budgets": {"paper": {"gpu_hours": 12}, "reduced": {"gpu_hours": 1}, "cpu": {"cpu_hours": 2},
                    "smoke": {"datasets": {"ptb": "synth_ptb", "wt2": "synth_wt2"}}},
        "claims": [claim],
    }


def toy_table(a_ptb=60.0, a_wt2=70.0) -> pd.DataFrame:
    """Hand-written results: ours (test_ppl) beside the paper's (paper_test_ppl)."""
    rows = [("ptb", "a", a_ptb, 62.0), ("ptb", "b", 66.0, 66.0), ("ptb", "c", 64.0, 64.0),
            ("wt2", "a", a_wt2, 72.0), ("wt2", "b", 75.0, 75.0), ("wt2", "c", 74.0, 74.0)]
    return pd.DataFrame(rows, columns=["dataset", "model", "test_ppl", "paper_test_ppl"])


def verdicts(study, budget, table) -> dict:
    rows = evaluate_study(study, {"budget": budget, "seeds": [1111]}, {"toy_t": table})
    return {row["claim"]: row for row in rows}


def test_held_on_hand_written_table():
    result = verdicts(toy_study(), "reduced", toy_table())
    assert set(result) == {"a_beats_b[dataset=ptb]", "a_beats_b[dataset=wt2]"}
    for row in result.values():
        assert row["verdict"] == HELD and row["data"] == "real" and row["seeds"] == "1111"
        assert row["paper_check"] == HELD
    assert result["a_beats_b[dataset=ptb]"]["ours"] == "a 60; b 66"
    assert result["a_beats_b[dataset=ptb]"]["paper"] == "a 62; b 66"


def test_not_held_when_the_ordering_fails():
    result = verdicts(toy_study(), "reduced", toy_table(a_wt2=80.0))
    assert result["a_beats_b[dataset=ptb]"]["verdict"] == HELD
    assert result["a_beats_b[dataset=wt2]"]["verdict"] == NOT_HELD
    assert "fails on our numbers" in result["a_beats_b[dataset=wt2]"]["reason"]


def test_tolerance_counts_at_the_paper_budget_only():
    study = toy_study(tolerance={"relative": 0.05})
    table = toy_table(a_ptb=50.0)  # the ordering holds, but 50 is 19 % below the paper's 62
    at_paper = verdicts(study, "paper", table)["a_beats_b[dataset=ptb]"]
    assert at_paper["verdict"] == NOT_HELD and "beyond ±5%" in at_paper["reason"] and "a 50" in at_paper["reason"]
    assert verdicts(study, "paper", toy_table())["a_beats_b[dataset=ptb]"]["verdict"] == HELD
    assert verdicts(study, "reduced", table)["a_beats_b[dataset=ptb]"]["verdict"] == HELD


def test_not_tested_at_a_budget_the_claim_excludes_quotes_gpu_hours():
    row = verdicts(toy_study(testable=["paper"]), "reduced", toy_table())["a_beats_b[dataset=ptb]"]
    assert row["verdict"] == NOT_TESTED
    assert row["reason"] == "not testable at this budget (reduced): needs budget paper, about 12 GPU-hours on one H100"
    row = verdicts(toy_study(testable=["paper"], gpu_hours=3), "reduced", toy_table())["a_beats_b[dataset=ptb]"]
    assert "about 3 GPU-hours" in row["reason"]


def test_not_tested_on_synthetic_data():
    for row in verdicts(toy_study(), "smoke", toy_table()).values():
        assert row["verdict"] == NOT_TESTED and row["data"].startswith("synthetic")
        assert row["reason"].startswith("synthetic data (synth_")


def test_not_tested_when_the_budget_leaves_a_row_out():
    table = toy_table().query("not (dataset == 'wt2' and model == 'a')")
    result = verdicts(toy_study(), "reduced", table)
    assert result["a_beats_b[dataset=wt2]"]["verdict"] == NOT_TESTED
    assert result["a_beats_b[dataset=wt2]"]["reason"] == "no result for a in toy_t at this budget"
    assert result["a_beats_b[dataset=wt2]"]["paper_check"] == "n/a (a row is not in this budget's table)"
    assert result["a_beats_b[dataset=ptb]"]["verdict"] == HELD


def test_closer_to_paper():
    study = toy_study(check="closer_to_paper", rows=[{"model": "c"}, {"model": "a"}], paper_row={"model": "b"})
    result = verdicts(study, "paper", toy_table())
    # ptb: the paper's b is 66; c (64) is nearer than a (60). wt2: b 75; c 74 nearer than a 70.
    assert all(row["verdict"] == HELD for row in result.values())
    assert result["a_beats_b[dataset=ptb]"]["paper"] == "b 66"
    assert verdicts(study, "paper", toy_table(a_ptb=65.5))["a_beats_b[dataset=ptb]"]["verdict"] == NOT_HELD


def close_study(tolerance: dict | None = None) -> dict:
    """The toy study with one close_to_paper claim: model a's test perplexity near its paper number."""
    return toy_study(check="close_to_paper", rows=[{"model": "a"}], tolerance=tolerance or {"absolute": 3})


def test_close_to_paper_with_one_seed():
    """One row against its own paper number (a: 62 on PTB, 72 on WT-2): held within the tolerance,
    not held outside it, and the verdict says it rests on one seed."""
    result = verdicts(close_study(), "paper", toy_table(a_ptb=64.5, a_wt2=75.5))
    held, missed = result["a_beats_b[dataset=ptb]"], result["a_beats_b[dataset=wt2]"]
    assert held["verdict"] == HELD and held["reason"] == "within ±3 of the paper's 62 (1 seed)"
    # a perplexity's difference in nats, log(64.5 / 62), the points beside it
    assert held["difference"] == "+0.03953" and held["difference_points"] == "+2.5" and held["unit"] == "nats"
    assert held["samples"] == "1" and held["ours"] == "a 64.5"
    assert missed["verdict"] == NOT_HELD and missed["reason"] == "outside ±3 of the paper's 72 (1 seed)"
    assert held["paper_check"] == missed["paper_check"] == "n/a (compares ours with the paper's number)"
    # the tolerance is the check itself, so it counts at every budget, not only at the paper budget
    assert verdicts(close_study(), "cpu", toy_table(a_wt2=75.5))["a_beats_b[dataset=wt2]"]["verdict"] == NOT_HELD
    relative = verdicts(close_study({"relative": 0.05}), "cpu", toy_table(a_ptb=65.0))  # 65 is 4.8 % above 62
    assert relative["a_beats_b[dataset=ptb]"]["verdict"] == HELD


def test_close_to_paper_with_seeds():
    """Every seed within: held; every seed outside: not held; seeds on both sides: inconclusive."""
    within = verdicts(close_study(), "cpu", seeded_table([60.0, 62.0, 64.0], [66.0]))["a_beats_b[dataset=ptb]"]
    assert within["verdict"] == HELD and within["reason"] == "within ±3 of the paper's 62 (3 seeds: every seed)"
    # mean log-perplexity minus log 62: (log 60 + log 62 + log 64) / 3 - log 62 = -0.000347
    assert within["spread"] == pytest.approx(2.0) and within["difference"] == "-0.000347"
    assert within["difference_points"] == "+0"
    outside = verdicts(close_study(), "cpu", seeded_table([66.0, 67.0, 65.5], [66.0]))["a_beats_b[dataset=ptb]"]
    assert outside["verdict"] == NOT_HELD and "3 seeds: every seed" in outside["reason"]
    mixed = verdicts(close_study(), "cpu", seeded_table([63.0, 66.0, 61.0], [66.0]))["a_beats_b[dataset=ptb]"]
    assert mixed["verdict"] == INCONCLUSIVE
    assert mixed["reason"] == "some seeds within ±3 of the paper's 62, some outside (3 seeds)"


def test_close_to_paper_without_a_paper_number_is_not_tested():
    table = toy_table().assign(paper_test_ppl=lambda t: t["paper_test_ppl"].where(t["dataset"] != "wt2"))
    row = verdicts(close_study(), "cpu", table)["a_beats_b[dataset=wt2]"]
    assert row["verdict"] == NOT_TESTED and row["reason"] == "no paper number for a in toy_t"


@pytest.mark.parametrize("kind, values, holds", [
    ("less_than", [1, 2], True), ("less_than", [2, 2], False), ("greater_than", [3, 2], True),
    ("increasing", [1, 2, 3], True), ("increasing", [1, 3, 2], False), ("decreasing", [3, 2, 1], True),
    ("lowest", [1, 3, 2], True), ("lowest", [2, 3, 1], False), ("highest", [3, 1, 2], True),
    ("highest", [3, 3, 2], False),
])
def test_check_kinds(kind, values, holds):
    assert check_holds(kind, values) is holds


@pytest.mark.parametrize("kind, samples, verdict", [
    # every seed of a below every seed of b, and the interval below zero: held; every one above: not held;
    # overlapping: inconclusive
    ("less_than", [[60.1, 60.5, 61.0], [62.0, 62.2, 63.0]], HELD),
    ("less_than", [[64.0, 64.5, 65.0], [62.0, 62.2, 63.0]], NOT_HELD),
    ("less_than", [[60.0, 62.5, 61.0], [62.0, 62.2, 63.0]], INCONCLUSIVE),
    ("greater_than", [[3.0, 3.1, 3.05], [1.0, 1.2, 1.1]], HELD),
    # every seed beyond every seed, but two seeds with a wide spread: the interval spans zero
    ("greater_than", [[3.0, 3.1], [1.0, 2.9]], INCONCLUSIVE),
    # chains: every needed pair must go the claimed way; one pair the other way is enough to fail
    ("decreasing", [[9.0, 9.5, 9.2], [7.0, 7.5, 7.2], [5.0, 5.5, 5.2]], HELD),
    ("decreasing", [[9.0, 9.5, 9.2], [7.0, 8.0, 7.5], [7.5, 8.5, 8.0]], INCONCLUSIVE),
    ("decreasing", [[9.0, 9.5, 9.2], [7.0, 7.5, 7.2], [8.5, 8.6, 8.55]], NOT_HELD),
    ("lowest", [[1.0, 1.1, 1.05], [2.0, 2.5, 2.2], [1.05, 3.0, 2.0]], INCONCLUSIVE),
    ("lowest", [[1.0, 1.1, 1.05], [2.0, 2.5, 2.2], [0.5, 0.6, 0.55]], NOT_HELD),
    ("highest", [[5.0, 5.1, 5.05], [2.0, 2.5, 2.2], [4.0, 4.1, 4.05]], HELD),
    # one seed each: the two numbers decide (a tie holds nothing)
    ("less_than", [[1.0], [2.0]], HELD), ("less_than", [[2.0], [2.0]], INCONCLUSIVE),
])
def test_seed_rule(kind, samples, verdict):
    assert seed_verdict(kind, samples) == verdict


@pytest.mark.parametrize("samples, verdict", [
    ([[112.0, 114.5, 117.5]], HELD),       # 117.5 is exactly 3 above: within
    ([[118.0, 110.0]], NOT_HELD),          # both seeds more than 3 away, on either side
    ([[113.0, 118.0]], INCONCLUSIVE),
    ([[111.4]], NOT_HELD), ([[111.5]], HELD),
])
def test_seed_rule_against_the_papers_number(samples, verdict):
    assert seed_verdict("close_to_paper", samples, 114.5, {"absolute": 3}) == verdict


def seeded_table(a: list[float], b: list[float], value: str = "test_ppl") -> pd.DataFrame:
    """A summary table as the notebooks write it: the mean, the per-seed values (<value>_samples)."""
    return pd.DataFrame([
        {"dataset": dataset, "model": model, value: sum(values) / len(values),
         f"{value}_samples": ";".join(map(repr, values)), f"paper_{value}": paper}
        for dataset in ("ptb", "wt2") for model, values, paper in (("a", a, 62.0), ("b", b, 66.0))])


def test_a_row_of_one_seed_against_a_row_of_two_is_decided_by_the_numbers_and_says_so():
    """While seeds are still being recorded a row may have one seed: no interval, no rank level, and the
    reason says the numbers decided (it used to print "one-sided level nan")."""
    study = toy_study(value="test_loss")
    row = verdicts(study, "cpu", seeded_table([66.0], [63.0, 64.0], "test_loss"))["a_beats_b[dataset=ptb]"]
    assert row["verdict"] == NOT_HELD and row["samples"] == "1 v 2"
    assert "nan" not in row["reason"]
    assert "a needed pair goes the other way by its numbers (a row of one seed: no interval, no rank level)" in row["reason"]


def test_verdicts_with_seeds_show_the_difference_and_the_spread():
    study = toy_study(value="test_loss")
    result = verdicts(study, "cpu", seeded_table([60.0, 61.0, 62.0], [63.0, 64.0, 65.0], "test_loss"))
    row = result["a_beats_b[dataset=ptb]"]
    assert row["verdict"] == HELD and row["samples"] == "3 v 3"
    assert "3 seeds per row" in row["reason"] and row["ours"] == "a 61; b 64"
    assert row["difference"] == "-3" and row["spread"] == pytest.approx(1.0) and row["unit"] == "test_loss"
    # equal variances and seeds: Welch's df is exactly 4; ±2.131847 x sqrt(2/3)
    assert row["interval_method"] == "Welch t (df 4)" and row["interval"] == "[-4.741, -1.259]"
    assert row["paper_difference"] == "-4" and row["flags"] == "" and row["difference_points"] == ""
    overlapping = verdicts(study, "cpu", seeded_table([60.0, 63.5, 62.0], [63.0, 64.0, 65.0], "test_loss"))
    assert overlapping["a_beats_b[dataset=ptb]"]["verdict"] == INCONCLUSIVE
    assert "its seeds overlap or its 90 % interval spans zero" in overlapping["a_beats_b[dataset=ptb]"]["reason"]
    reversed_ = verdicts(study, "cpu", seeded_table([66.0, 67.0, 68.0], [63.0, 64.0, 65.0], "test_loss"))
    assert reversed_["a_beats_b[dataset=ptb]"]["verdict"] == NOT_HELD


def test_one_seed_says_so():
    row = verdicts(toy_study(), "reduced", toy_table())["a_beats_b[dataset=ptb]"]
    assert row["verdict"] == HELD and "(1 seed)" in row["reason"] and row["samples"] == "1 v 1"
    assert math.isnan(row["spread"])


def test_tables_with_one_row_per_seed_give_their_seeds():
    """A table with a row per seed (the LRN LM table) compares the seeds of each selected row."""
    table = pd.concat([toy_table().assign(seed=1111), toy_table(a_ptb=61.0).assign(seed=1112),
                       toy_table(a_ptb=70.0).assign(seed=1113)])
    row = verdicts(toy_study(), "cpu", table)["a_beats_b[dataset=ptb]"]
    # a: 60, 61, 70; b: 66 in every seed -> a's 70 is above b's 66: inconclusive
    assert row["verdict"] == INCONCLUSIVE and row["samples"] == "3 v 3"


def test_rows_that_disagree_are_an_error_naming_the_claim():
    table = pd.concat([toy_table(), toy_table(a_ptb=61.0)])  # two seeds' rows, no mean column
    with pytest.raises(ClaimError, match=r"claims.a_beats_b\[dataset=ptb\].*disagree on 'test_ppl'"):
        verdicts(toy_study(), "reduced", table)


def test_unknown_column_is_an_error_listing_the_columns():
    study = toy_study(value="val_ppl")
    study["artifacts"]["t"]["columns"]["toy_t"].append("val_ppl")  # declared, yet the table lacks it
    with pytest.raises(ClaimError, match=r"no column 'val_ppl'.*columns: dataset, model"):
        verdicts(study, "reduced", toy_table())


@pytest.mark.parametrize("change, message", [
    (lambda c: c.update(table="nope"), r"claims.a_beats_b.table: 'nope' is not a table"),
    (lambda c: c["rows"].append({"model": "c"}), r"check less_than takes 2 rows, got 3"),
    (lambda c: c.update(check="closer_to_paper"), r"paper_row: needed by check closer_to_paper"),
    (lambda c: c["rows"][0].update(dataset="ptb"), r"\['dataset'\] both in `per` and in a row selector"),
    (lambda c: c.update(value="val_ppl"), r"claims.a_beats_b: toy_t has no column 'val_ppl' \(its columns, "
                                          r"artifacts.t.columns.toy_t: dataset, model, test_ppl, test_ppl_samples, "
                                          r"paper_test_ppl, seed\)"),
    (lambda c: c["rows"][1].update(recipe="awd"), r"claims.a_beats_b: toy_t has no column 'recipe'"),
    (lambda c: c.update(per={"dataset": ["ptb"], "fraction": [100]}), r"toy_t has no column 'fraction'"),
    (lambda c: c.update(paper_value="paper_ppl"), r"toy_t has no column 'paper_ppl'"),
    (lambda c: c.update(check="close_to_paper", tolerance={"absolute": 3}), r"check close_to_paper takes 1 row, got 2"),
    (lambda c: c.update(check="close_to_paper", rows=[{"model": "a"}]), r"tolerance: check close_to_paper needs one"),
    (lambda c: c.update(rows=[{"model": "a"}]), r"check less_than takes 2 rows, got 1"),
    (lambda c: c.update(check="lowest", rows=[{"model": "a"}]), r"check lowest takes 2 rows or more, got 1"),
])
def test_check_claims_names_the_problem(change, message):
    study = toy_study()
    change(study["claims"][0])
    with pytest.raises(ConfigError, match=message):
        check_claims(study)


@pytest.mark.parametrize("change, message", [
    (lambda c: c["rows"][0].update(model="lstm_m1001"), r"claims.a_beats_b.rows: model 'lstm_m1001' is not one of "
                                                        r"artifact t's \(a, b, c\)"),
    (lambda c: c["rows"][1].update(model="bb"), r"model 'bb' is not one of artifact t's \(a, b, c\); did you mean 'b'\?"),
    (lambda c: c.update(per={"dataset": ["ptb", "wt3"]}), r"claims.a_beats_b.per: dataset 'wt3' is not one of "
                                                          r"artifact t's \(ptb, wt2, all\)"),
    (lambda c: c.update(per={"dataset": ["ptb"], "model": ["a", "d"]}, rows=[{"seed": 1}, {"seed": 2}]),
     r"per: model 'd'"),
    (lambda c: c.update(check="closer_to_paper", paper_row={"model": "e"}), r"claims.a_beats_b.paper_row: model 'e'"),
])
def test_a_claim_row_naming_what_its_artifact_lacks_is_refused(change, message):
    """A row that matches no row of its table would leave the claim "not tested" without a word: a model,
    dataset (or fraction, recipe, cell) its artifact does not have is refused when the workflow is parsed
    (a dry run too), with the nearest name."""
    study = toy_study()
    change(study["claims"][0])
    with pytest.raises(ConfigError, match=message):
        check_claims(study)
    check_claims(toy_study())  # the claim as written names only what the artifact has


def test_each_table_declares_its_columns():
    study = toy_study()
    study["artifacts"]["t"]["columns"] = {"toy_u": ["model"]}
    with pytest.raises(ConfigError) as error:
        check_claims(study)
    assert "artifacts.t.columns: no entry for its table 'toy_t'" in str(error.value)
    assert "artifacts.t.columns.toy_u: not one of its tables (toy_t)" in str(error.value)


def test_dry_run_stops_on_a_claim_naming_an_undeclared_column(tmp_path):
    project = copy_project(tmp_path)
    path = project / "config/studies/pru.yaml"
    text = path.read_text()
    claim = "  - id: pru_g4_beats_lstm_standard\n"
    value = "    value: test_ppl\n"
    start = text.index(claim)
    at = text.index(value, start)
    path.write_text(text[:at] + "    value: test_perplexity\n" + text[at + len(value):])
    result = snakemake(project, "-n", "results/tables/pru_table1.csv")
    said = result.stdout + result.stderr
    assert result.returncode != 0
    assert "config/studies/pru.yaml is invalid:" in said, said[-2000:]
    assert "claims.pru_g4_beats_lstm_standard: pru_table1 has no column 'test_perplexity'" in said


# A notebook that writes the pru_table1 table with one declared column missing and one undeclared added.
DRIFTED_NOTEBOOK = """# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% tags=["parameters"]
study = "pru"
artifact = "table1"
tables = []
figures = []

# %%
import pandas as pd

from rnnrepro.analysis.claims import declared_columns
from rnnrepro.configuration import load_study

_, columns = declared_columns(load_study(study))["pru_table1"]
columns = [c for c in columns if c != "paper_test_ppl"] + ["test_perplexity"]
pd.DataFrame(columns=columns).to_csv(tables[0], index=False)
"""


def test_a_table_whose_columns_drift_from_the_declaration_is_refused(tmp_path):
    from rnnrepro.analysis.run_notebook import run

    notebook = tmp_path / "pru_table1.py"
    notebook.write_text(DRIFTED_NOTEBOOK)
    table = tmp_path / "results/tables/pru_table1.csv"
    table.parent.mkdir(parents=True)
    with pytest.raises(RuntimeError) as error:
        run(notebook, tmp_path / "pru_table1.ipynb", {"study": "pru", "artifact": "table1", "tables": [str(table)],
                                                      "figures": []})
    message = str(error.value)
    assert "differ from those declared in config/studies/pru.yaml" in message
    assert ("(artifacts.table1.columns.pru_table1): written, not declared: test_perplexity; "
            "declared, not written: paper_test_ppl") in message


def test_duplicate_claim_ids_are_refused():
    study = toy_study()
    study["claims"].append(dict(study["claims"][0]))
    with pytest.raises(ConfigError, match="claims.a_beats_b: duplicate id"):
        check_claims(study)


def test_schema_refuses_an_unknown_check_kind(tmp_path):
    study = yaml.safe_load((REPO_ROOT / "config/studies/nlstm.yaml").read_text())
    study["claims"][0]["check"] = "smaller"
    (tmp_path / "config/studies").mkdir(parents=True)
    (tmp_path / "config/studies/nlstm.yaml").write_text(yaml.safe_dump(study))
    shutil.copytree(REPO_ROOT / "workflow", tmp_path / "workflow")
    with pytest.raises(ConfigError, match="check"):
        load_study("nlstm", root=tmp_path)


@pytest.fixture(scope="module")
def studies():
    config = load_yaml(REPO_ROOT / "config/config.yaml")
    return {name: load_study(name) for name in config["studies"]}


def test_every_study_file_has_valid_claims(studies):
    for name in ("pru", "lru", "nlstm"):
        assert studies[name]["claims"], f"{name} lists no claims"
    for study in studies.values():
        check_claims(study)


def test_smoke_budget_tests_no_claim(studies):
    """Whatever the tables say, every claim on trained cells reads 'not tested (synthetic data)' on smoke;
    only claims on exact counts (artifacts that train nothing) are decided there."""
    config = load_run_config({**load_yaml(REPO_ROOT / "config/config.yaml"), "budget": "smoke"})
    card = scorecard(studies, config, [])
    expected = sum(len(cases(claim)) for study in studies.values() for claim in study.get("claims", []))
    assert len(card) == expected > 0
    trained = card[card["data"] != COUNTED]
    assert len(trained) < len(card)
    assert (trained["verdict"] == NOT_TESTED).all()
    assert trained["reason"].str.startswith("synthetic data").all()


def paper_as_ours(study: dict) -> pd.DataFrame:
    """A pru_table1 whose reproduced numbers ARE the paper's (hand-made from the study file)."""
    rows = []
    for dataset, models in study["paper"]["table1"].items():
        for model, values in models.items():
            spec = study["models"][model]
            rows.append({"dataset": dataset, "corpus": dataset, "model": model, "recipe": spec["recipe"],
                         "cell": spec["cell"], "g": spec["cell_options"].get("groups"),
                         "test_ppl": values["test_ppl"], "paper_test_ppl": values["test_ppl"]})
    return pd.DataFrame(rows)


def test_table1_claims_hold_on_the_papers_own_numbers(studies):
    """At the paper budget, a Table 1 whose numbers equal the paper's holds every Table 1 claim: the
    claims read the paper right (and the tolerance accepts an exact match)."""
    pru = studies["pru"]
    config = load_run_config({**load_yaml(REPO_ROOT / "config/config.yaml"), "budget": "paper"})
    claims = [c for c in pru["claims"] if c["table"] == "pru_table1"]
    rows = evaluate_study({**pru, "claims": claims}, config, {"pru_table1": paper_as_ours(pru)})
    assert len(rows) >= 5
    assert {row["verdict"] for row in rows} == {HELD}, [r for r in rows if r["verdict"] != HELD]
    assert {row["paper_check"] for row in rows} == {HELD}


def test_table1_claims_are_not_testable_at_the_reduced_budget(studies):
    """The reduced PRU budget is far from convergence: the scorecard says so, with the cost of the first
    budget that can answer each claim (the 2-core CPU hours of `cpu`, or the GPU-hours of `paper`)."""
    pru = studies["pru"]
    config = load_run_config({**load_yaml(REPO_ROOT / "config/config.yaml"), "budget": "reduced"})
    claims = [c for c in pru["claims"] if c["table"] == "pru_table1"]
    rows = evaluate_study({**pru, "claims": claims}, config, {"pru_table1": paper_as_ours(pru)})
    assert {row["verdict"] for row in rows} == {NOT_TESTED}
    for row in rows:
        assert row["data"] == "real"
        assert (re.fullmatch(r"not testable at this budget \(reduced\): needs budget paper, about .* GPU-hours on "
                             r"one H100", row["reason"]) or
                re.fullmatch(r"not testable at this budget \(reduced\): needs budget cpu, about .* hours of the "
                             r"study's cpu grid on a 2-core CPU", row["reason"])), row["reason"]
    assert any("needs budget cpu" in row["reason"] for row in rows)


# --- recorded runs ----------------------------------------------------------------------------------

# FIXTURE numbers: hand-written test perplexities of the reduced PRU dropout artifact's four cells.
# They were produced by no run and exist only in a temporary directory, to test the mechanism.
FIXTURE_TEST_PPL = {("ptb", "lstm_m1000"): 150.0, ("ptb", "lstm_m1000_do05"): 140.0,
                    ("wt2", "lstm_m1000"): 170.0, ("wt2", "lstm_m1000_do05"): 165.0}


def write_fixture_run(project: Path, budget: str, dataset: str, model: str, test_ppl: float) -> Path:
    """A run folder as rnnrepro.train leaves it (config.json resolved by the grid; hand-written FIXTURE
    history and metrics; a model.pt, a checkpoint and a progress.json that records must not keep)."""
    study = load_study("pru")
    config = load_run_config({**load_yaml(REPO_ROOT / "config/config.yaml"), "budget": budget})
    corpus = grid.corpus_for(study, config, dataset)
    cell = grid.Cell("pru", corpus, model, 100, 1111, budget)
    run_dir = project / cell.run_dir
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(grid.resolve_cell(study, config, cell)))
    (run_dir / "history.csv").write_text("epoch,train_loss,val_loss\n1,6.0,5.5\n")
    loss = math.log(test_ppl)
    (run_dir / "metrics.json").write_text(json.dumps({
        "fixture": "hand-written test data, not a run", "study": "pru", "dataset": dataset, "corpus": corpus,
        "model": model, "fraction": 100, "seed": 1111, "budget": budget, "params": 1000, "epochs": 1,
        "wall_seconds": 1.0, "val_loss": loss, "val_ppl": test_ppl, "test_loss": loss, "test_ppl": test_ppl}))
    (run_dir / "model.pt").write_bytes(b"weights")
    (run_dir / "checkpoint.pt").write_bytes(b"resume state")
    (run_dir / "progress.json").write_text(json.dumps({"state": "done", "host": "node17", "pid": 4242}))
    return run_dir


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A project copy whose results/runs held the FIXTURE runs of the reduced PRU dropout artifact (and
    one smoke run), packed into records/ and then removed with the rest of results/."""
    project = copy_project(tmp_path_factory.mktemp("records"))
    config = yaml.safe_load((project / "config/config.yaml").read_text())
    config["studies"] = ["pru"]  # render one study (quicker); the others are the same code path
    (project / "config/config.yaml").write_text(yaml.safe_dump(config))
    for (dataset, model), ppl in FIXTURE_TEST_PPL.items():
        write_fixture_run(project, "reduced", dataset, model, ppl)
    write_fixture_run(project, "smoke", "ptb", "lstm_m1000", 300.0)
    # an evaluation's output beside one run, and speed results of two budgets (FIXTURE content)
    run_dir = project / "results/reduced/runs/pru/ptb/lstm_m1000/frac100/seed1111"
    (run_dir / "dynamic_eval.json").write_text(json.dumps({"fixture": "not a run", "budget": "reduced"}))
    for budget, tree in (("reduced", "results/reduced"), ("smoke", "results/smoke")):
        (project / tree / "speed").mkdir(parents=True)
        (project / tree / "speed/lrn.json").write_text(json.dumps({"fixture": "not a run", "budget": budget,
                                                                   "rows": []}))
    packed = python_in(project, "-m", "rnnrepro.records", "pack")
    assert packed.returncode == 0, packed.stderr
    # the synthetic-data (smoke) run and speed result are not records
    assert "recorded 4 runs and 1 speed results" in packed.stdout
    shutil.rmtree(project / "results")
    return project


def test_records_hold_only_the_small_files(recorded):
    runs = recorded / "records/reduced/runs/pru"
    assert len(list(runs.glob("*/*/frac100/seed1111/metrics.json"))) == 4
    assert {p.name for p in runs.glob("**/*") if p.is_file()} == {"config.json", "history.csv", "metrics.json",
                                                                   "dynamic_eval.json"}
    assert [p.name for p in runs.glob("**/dynamic_eval.json")] == ["dynamic_eval.json"]
    assert [p.name for p in (recorded / "records/reduced/speed").iterdir()] == ["lrn.json"]
    assert not (recorded / "records/smoke").exists()


@pytest.mark.slow
def test_render_from_records_without_training(recorded):
    result = python_in(recorded, "-m", "rnnrepro.records", "render", "--budget", "reduced")
    assert result.returncode == 0, result.stdout + result.stderr
    status = render_status(result.stdout)
    assert status["reduced:pru/dropout"] == "rendered"
    # an artifact with some cells recorded renders over them, naming the rows that wait
    assert status["reduced:pru/table1"].startswith("rendered in part (") and "not recorded" in status["reduced:pru/table1"]
    # an artifact that reads evaluation outputs is rendered from records too, once they are all there
    assert re.fullmatch(r"not rendered: 2 of its 4 records are missing or unusable, e\.g\. .*pru_g4_k2_m1400.*",
                        status["reduced:pru/dynamic_eval"]), status["reduced:pru/dynamic_eval"]
    assert status["reduced:claims"] == "rendered"
    tree = recorded / "results/reduced"
    table = pd.read_csv(tree / "tables/pru_dropout.csv")
    assert {(r.dataset, r.model): r.test_ppl for r in table.itertuples()} == pytest.approx(FIXTURE_TEST_PPL)
    assert set(table["dropout"]) == {0.4, 0.5} and (table["budget"] == "reduced").all()
    assert (tree / "figures/pru_dropout.png").stat().st_size > 0
    card = pd.read_csv(tree / "tables/claims.csv")
    dropout = card[card["table"] == "pru_dropout"]
    assert len(dropout) == 4 and (dropout["data"] == "real").all() and (dropout["budget"] == "reduced").all()
    assert dropout["reason"].str.startswith("not testable at this budget (reduced)").all()
    # the true reason a claim is not tested: which rows wait, and which record
    # (Table 1's claims are testable at other budgets only: that is their reason, not the rows that wait;
    # a testable claim reading a waiting row says which, tests/test_render_in_part.py)
    table1 = card[card["table"] == "pru_table1"]
    assert (table1["verdict"] == "not tested").all()
    assert table1["reason"].str.startswith("not testable at this budget (reduced)").all()
    # the artifact's section on the results page names the rows that wait
    assert "rendered in part: rows of " in (tree / "index.html").read_text()
    assert (tree / "figures/claims.png").exists()
    assert (recorded / "results/claims_by_budget.png").exists()


@pytest.mark.slow
def test_a_second_render_refreshes_changed_records_and_leaves_out_stale_ones(recorded):
    """After a render, two records change (one render checks both): one recorded again with another
    result replaces the copy the first render restored; one whose config.json is no longer what the
    study file resolves (the recipe changed) is stale, and its artifact is not rendered from it."""
    changed = recorded / "records/reduced/runs/pru/ptb/lstm_m1000_do05/frac100/seed1111/metrics.json"
    config_file = recorded / "records/reduced/runs/pru/wt2/lstm_m1000/frac100/seed1111/config.json"
    originals = {changed: changed.read_text(), config_file: config_file.read_text()}
    if not (recorded / "results/reduced/runs/pru/ptb/lstm_m1000_do05/frac100/seed1111/metrics.json").exists():
        # no earlier test of this module has rendered these records yet
        assert python_in(recorded, "-m", "rnnrepro.records", "render", "--budget", "reduced").returncode == 0
    try:
        changed.write_text(json.dumps({**json.loads(originals[changed]), "test_ppl": 141.0}))
        config = json.loads(originals[config_file])
        config["recipe"]["lr"] = 20.0
        config_file.write_text(json.dumps(config))
        result = python_in(recorded, "-m", "rnnrepro.records", "render", "--budget", "reduced")
        assert result.returncode == 0, result.stderr
        status = render_status(result.stdout)["reduced:pru/dropout"]
        assert "stale record (the study file changed: recipe.lr 20.0 -> 30.0)" in status, status
        card = pd.read_csv(recorded / "results/reduced/tables/claims.csv")
        assert card[card["table"] == "pru_dropout"]["reason"].str.contains("stale").all()
        # the refreshed copy, as the table of the artifact (rendered in part over the current records) reads it
        copy = recorded / "results/reduced/runs/pru/ptb/lstm_m1000_do05/frac100/seed1111/metrics.json"
        assert json.loads(copy.read_text())["test_ppl"] == 141.0
    finally:
        for path, text in originals.items():
            path.write_text(text)


@pytest.mark.slow
def test_render_never_overwrites_a_different_run(recorded):
    metrics = next((recorded / "records/reduced/runs").glob("**/metrics.json"))
    target = recorded / "results/reduced/runs" / metrics.relative_to(recorded / "records/reduced/runs")
    target.parent.mkdir(parents=True, exist_ok=True)
    original = target.read_text() if target.exists() else None
    target.write_text(json.dumps({**json.loads(metrics.read_text()), "test_ppl": 1.0}))
    try:
        result = python_in(recorded, "-m", "rnnrepro.records", "render", "--budget", "reduced")
        assert result.returncode == 1
        assert f"{target.relative_to(recorded)} differs from its record" in result.stderr
        assert "was not written by an earlier render" in result.stderr
    finally:
        if original is None:
            target.unlink()
        else:
            target.write_text(original)


@pytest.mark.slow
def test_render_of_an_unrecorded_budget_says_which_exist(recorded):
    result = python_in(recorded, "-m", "rnnrepro.records", "render", "--budget", "paper")
    assert result.returncode == 1
    assert "no recorded runs for budget 'paper'" in result.stderr and "recorded budgets: reduced" in result.stderr


@pytest.mark.parametrize("budget, tree", [("paper", "results"), ("reduced", "results/reduced"),
                                          ("smoke", "results/smoke")])
def test_budgets_have_their_own_results(budget, tree):
    """Two budgets on one corpus never share a run folder, a table or a speed result: the default budget
    (paper) at results/, every other one at results/<budget>/."""
    study = load_study("pru")
    config = load_run_config({**load_yaml(REPO_ROOT / "config/config.yaml"), "budget": budget})
    cells = grid.artifact_cells(study, config, "table1")
    assert cells and all(cell.run_dir.startswith(f"{tree}/runs/pru/") for cell in cells)


@pytest.mark.slow
@pytest.mark.parametrize("budget", ["paper", "reduced", "smoke"])
def test_dry_run_plans_the_scorecard(tmp_path_factory, budget):
    project = copy_project(tmp_path_factory.mktemp(f"dry_{budget}"))
    result = snakemake(project, "-n", f"{grid.results_dir(budget)}/tables/claims.csv", "--config", f"budget={budget}")
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout + result.stderr
    assert "rule claims:" in out and "notebook_pru_table1" in out and "notebook_lru_accuracy" in out


@pytest.mark.slow
def test_claims_rule_command_writes_the_scorecard(tmp_path):
    """The claims rule's command (python -m rnnrepro.analysis.claims) on a hand-written nlstm table."""
    project = copy_project(tmp_path)
    rows = [("gru_2x600", 2.2, 3.0, 2.1497), ("lstm_2x600", 2.3, 2.9, 2.2899), ("nlstm_1x600_d2", 2.6, 2.8, 2.6051)]
    declared = load_study("nlstm")["artifacts"]["test"]["columns"]["nlstm_test"]  # the others empty
    table = pd.DataFrame(
        [{"dataset": "text8_autocomplete", "model": m, "seed": 1111, "test_cross_entropy_mean": ce,
          "early_val_area_mean": early, "paper_test_cross_entropy": paper} for m, ce, early, paper in rows],
        columns=declared)
    (project / "results/tables").mkdir(parents=True)
    table.to_csv(project / "results/tables/nlstm_test.csv", index=False)
    run_config = json.dumps({"budget": "reduced", "seeds": [1111], "studies": ["nlstm"]})
    result = python_in(project, "-m", "rnnrepro.analysis.claims", "notebooks/claims.py", "results/notebooks/claims.ipynb",
                       "--run-config", run_config, "--tables-in", "results/tables/nlstm_test.csv",
                       "--tables", "results/tables/claims.csv", "results/tables/claims_effects.csv",
                       "--figures", "results/figures/claims.png", "results/figures/claims_effects_nlstm.png")
    assert result.returncode == 0, result.stderr
    card = pd.read_csv(project / "results/tables/claims.csv").set_index("claim")
    assert card.loc["cross_entropy_ranking", "verdict"] == HELD
    assert card.loc["nlstm_converges_faster_at_first", "verdict"] == HELD
    assert card.loc["cross_entropy_ranking", "paper"] == "gru_2x600 2.15; lstm_2x600 2.29; nlstm_1x600_d2 2.605"
    assert (project / "results/figures/claims.png").stat().st_size > 0


def test_early_validation_loss_is_the_check_an_eighth_of_the_way():
    from rnnrepro.analysis.autocomplete import early_validation_loss
    curves = pd.DataFrame({"model": ["a"] * 5 + ["b"] * 5, "seed": [1] * 10,
                           "iteration": [100, 200, 300, 400, 800] * 2,
                           "val_loss": [5.0, 4.0, 3.0, 2.0, 1.0, 6.0, 5.5, 5.0, 4.5, 4.0]})
    early = early_validation_loss(curves).set_index("model")
    assert early.loc["a", "early_iteration"] == 100 and early.loc["a", "early_val_loss"] == 5.0
    assert early.loc["b", "early_val_loss_mean"] == 6.0


# --- a table read by the scorecard is checked as it is read -------------------------------------------

def toy_table_file(tmp_path, change=None) -> Path:
    table = toy_table().assign(test_ppl_samples=lambda t: t["test_ppl"].map(lambda v: f"{v};{v + 1}"), seed=1111)
    table = table[["dataset", "model", "test_ppl", "test_ppl_samples", "paper_test_ppl", "seed"]]
    if change is not None:
        table = change(table.astype(object))
    path = tmp_path / "toy_t.csv"
    table.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("change, said", [
    (lambda t: t.iloc[:4], "no row for 2 of the 6 dataset x model of artifact t at budget cpu (wt2/b, wt2/c)"),
    (lambda t: t[t["model"] != "c"], "no row for 2 of the 6 dataset x model"),
    (lambda t: t.assign(test_ppl=["abc", *t["test_ppl"][1:]]), "column test_ppl holds 'abc' in row 1, not a number"),
    (lambda t: t.assign(paper_test_ppl=[*t["paper_test_ppl"][:-1], float("inf")]), "column paper_test_ppl is inf in row 6"),
    (lambda t: t.assign(test_ppl_samples=["60.0;x", *t["test_ppl_samples"][1:]]),
     "column test_ppl_samples holds '60.0;x' in row 1: 'x' is not a number"),
    (lambda t: t.drop(columns=["seed"]), "declared columns missing: seed"),
    (lambda t: t.assign(extra=1), "columns not declared for it: extra"),
])
def test_a_damaged_or_cut_table_stops_the_scorecard_naming_it(tmp_path, change, said):
    """A table cut short, a word in a number column, an infinity: the scorecard used to read them and
    give "not tested" or "n/a" with exit status 0; it stops, naming the file and how to rebuild it."""
    from rnnrepro.analysis.claims import DamagedTable

    study, config = toy_study(), {"budget": "cpu", "seeds": [1111]}
    good = scorecard({"toy": study}, config, [str(toy_table_file(tmp_path))])
    assert set(good["verdict"]) == {HELD}
    path = toy_table_file(tmp_path, change)
    with pytest.raises(DamagedTable) as error:
        scorecard({"toy": study}, config, [str(path)])
    assert str(error.value).startswith(f"{os.path.relpath(path)} is damaged: ")
    assert said in str(error.value), str(error.value)
    assert "Rebuild it" in str(error.value)


def test_a_file_that_is_no_table_and_a_damaged_scorecard_are_named(tmp_path):
    from rnnrepro.analysis.claims import DamagedTable, read_scorecard

    path = tmp_path / "toy_t.csv"
    path.write_text('dataset,"model\nptb,a\n')
    with pytest.raises(DamagedTable, match="toy_t.csv is damaged: not a CSV table"):
        scorecard({"toy": toy_study()}, {"budget": "cpu", "seeds": [1111]}, [str(path)])
    card = scorecard({"toy": toy_study()}, {"budget": "cpu", "seeds": [1111]}, [str(toy_table_file(tmp_path))])
    card.to_csv(tmp_path / "claims.csv", index=False)
    assert read_scorecard(str(tmp_path / "claims.csv"))["verdict"].tolist() == card["verdict"].tolist()
    card.assign(verdict="maybe").to_csv(tmp_path / "claims.csv", index=False)
    with pytest.raises(DamagedTable, match="claims.csv is damaged: row 1 has verdict 'maybe'"):
        read_scorecard(str(tmp_path / "claims.csv"))


# --- effects, paired comparisons, claims not testable at a scale, flags ------------------------------

def scaled_study(**claim_fields) -> dict:
    """The toy study with a second scale of its cpu budget (cpu_wide, `scale_of: cpu`)."""
    study = toy_study(**claim_fields)
    study["budgets"]["cpu_wide"] = {"cpu_hours": 1, "scale_of": "cpu"}
    return study


def test_a_paired_claim_compares_each_seeds_difference():
    """Finetuning lowers every seed by 1.4, 3.1 and 1.6, but the seeds spread wider than that: pooled, the
    rows overlap (inconclusive); paired by seed, the claim holds, with the paired t interval."""
    table = seeded_table([298.6, 306.9, 293.4], [300.0, 310.0, 295.0], "test_loss")
    pooled = verdicts(toy_study(value="test_loss"), "cpu", table)["a_beats_b[dataset=ptb]"]
    assert pooled["verdict"] == INCONCLUSIVE and pooled["interval_method"].startswith("Welch t (df ")
    paired = verdicts(toy_study(paired=True, value="test_loss"), "cpu", table)["a_beats_b[dataset=ptb]"]
    assert paired["verdict"] == HELD and paired["interval_method"] == "paired t (df 2)"
    assert "paired by seed" in paired["reason"] and "paired t interval (one-sided 5 %)" in paired["reason"]
    # -2.033 ± t(2) 2.919986 x sd 0.929 / sqrt(3)
    assert paired["difference"] == "-2.033" and paired["interval"] == "[-3.6, -0.4669]"


def test_a_budget_that_is_a_scale_of_another_is_testable_where_that_one_is():
    study = scaled_study(testable=["cpu"])
    table = seeded_table([60.0, 61.0, 62.0], [63.0, 64.0, 65.0])
    assert verdicts(study, "cpu_wide", table)["a_beats_b[dataset=ptb]"]["verdict"] == HELD
    assert verdicts(study, "reduced", table)["a_beats_b[dataset=ptb]"]["verdict"] == NOT_TESTED


def test_a_claim_not_testable_at_a_scale_says_why_and_shows_its_effect():
    study = scaled_study(not_testable={"cpu": "the paper's regime is overfitting; these models are capacity-limited"},
                         value="test_loss")
    table = seeded_table([60.0, 61.0, 62.0], [63.0, 64.0, 65.0], "test_loss")
    for budget in ("cpu", "cpu_wide"):  # the second scale takes its base's reason
        row = verdicts(study, budget, table)["a_beats_b[dataset=ptb]"]
        assert row["verdict"] == NOT_TESTABLE and row["reason"].startswith("the paper's regime is overfitting")
        assert row["difference"] == "-3" and row["interval"] == "[-4.741, -1.259]"
    assert verdicts(study, "reduced", table)["a_beats_b[dataset=ptb]"]["verdict"] == HELD


def test_rows_that_must_be_alike_and_are_not_are_not_testable():
    study = toy_study(alike=["implementation"])
    study["artifacts"]["t"]["columns"]["toy_t"].append("implementation")
    table = toy_table().assign(implementation=lambda t: t["model"].map({"a": "loop", "b": "fused", "c": "loop"}))
    row = verdicts(study, "cpu", table)["a_beats_b[dataset=ptb]"]
    assert row["verdict"] == NOT_TESTABLE
    assert row["reason"] == "the rows differ in implementation (b: fused; a: loop), so the comparison measures that, not the claim"
    alike = verdicts(study, "cpu", table.assign(implementation="loop"))["a_beats_b[dataset=ptb]"]
    assert alike["verdict"] == HELD


def test_a_single_measurement_within_its_noise_is_not_testable():
    study = toy_study(noise_floor={"relative": 0.1})
    close = verdicts(study, "cpu", toy_table(a_ptb=63.0))["a_beats_b[dataset=ptb]"]   # 63 against 66: 4.5 %
    assert close["verdict"] == NOT_TESTABLE
    assert close["reason"] == "within the measurement's noise (±10%, one measurement each): a 63 against b 66"
    assert verdicts(study, "cpu", toy_table(a_ptb=50.0))["a_beats_b[dataset=ptb]"]["verdict"] == HELD


def test_fragile_flag_on_a_pair_decided_by_less_than_one_seed_deviation():
    table = seeded_table([1.600, 1.604, 1.608, 1.612, 1.6156], [1.6160, 1.620, 1.624, 1.628, 1.632], "test_loss")
    row = verdicts(toy_study(value="test_loss"), "cpu", table)["a_beats_b[dataset=ptb]"]
    assert row["verdict"] == HELD and row["flags"] == FRAGILE
    assert row["flag_notes"].startswith("fragile: a - b: closest seeds 0.0004 apart, seed-to-seed sd 0.00")
    clear = verdicts(toy_study(value="test_loss"), "cpu", seeded_table([60.0, 61.0, 62.0], [63.0, 64.0, 65.0], "test_loss"))
    assert clear["a_beats_b[dataset=ptb]"]["flags"] == ""


def write_toy_run(root: Path, model: str, seed: int, losses: list[float], cap: int) -> None:
    """A hand-written run folder of the toy study's cpu grid (FIXTURE numbers, no training)."""
    folder = root / "runs" / grid.Cell("toy", "ptb", model, 100, seed, "cpu").key
    folder.mkdir(parents=True)
    # a recipe that stops by itself: at its cap, the cap stopped it (run_endings.stopped_by_epoch_cap)
    (folder / "config.json").write_text(json.dumps({"recipe": {"epochs": cap, "early_stopping": {"patience": 6}}}))
    (folder / "metrics.json").write_text(json.dumps({"model": model, "dataset": "ptb", "seed": seed,
                                                     "params": 5000 if model == "a" else 7000}))
    pd.DataFrame({"epoch": range(1, len(losses) + 1), "val_loss": losses}).to_csv(folder / "history.csv", index=False)


def test_flags_for_runs_still_improving_or_capped(tmp_path):
    """Row a's runs were still falling 0.2 % an epoch when they stopped; row b's ran to their cap of 4."""
    from rnnrepro.analysis.run_endings import run_endings

    study = {**toy_study(value="test_loss"), "models": {"a": {}, "b": {}, "c": {}}}
    config = {"budget": "cpu", "seeds": [1, 2, 3]}
    for seed in (1, 2, 3):
        write_toy_run(tmp_path, "a", seed, [5.0 - 0.002 * e for e in range(1, 11)], cap=100)
        write_toy_run(tmp_path, "b", seed, [5.0, 4.8, 4.9, 4.95], cap=4)
    runs = run_endings({"toy": study}, config, tmp_path)
    assert len(runs) == 6
    table = seeded_table([60.0, 61.0, 62.0], [63.0, 64.0, 65.0], "test_loss")
    row = {r["claim"]: r for r in evaluate_study(study, config, {"toy_t": table}, runs=runs)}["a_beats_b[dataset=ptb]"]
    assert row["flags"] == f"{STILL_IMPROVING}, {CAPPED}"
    assert "still improving: a 3/3 seeds, val perplexity falling 0.2 %/epoch" in row["flag_notes"]
    assert "capped: b 3/3 seeds at the 4-epoch cap" in row["flag_notes"]
    assert row["params"] == 6000 and row["pairs"][0]["params"] == 6000


def card_row(study: str, claim: str, verdict: str, **more) -> dict:
    return {"study": study, "claim": claim, "verdict": verdict, "difference": "-3", "interval": "[-4, -2]",
            "flags": "", "params": 5000.0, **more}


def test_the_other_scale_is_shown_beside_or_said_not_yet_run():
    study = scaled_study()
    card = pd.DataFrame([card_row("toy", "a_beats_b[dataset=ptb]", HELD)] + [card_row("other", "x", HELD)])
    card = card.assign(**{column: "" for column in OTHER_SCALE_COLUMNS})
    studies = {"toy": study, "other": toy_study()}
    waiting = beside_other_scales(card, studies, "cpu", {"cpu_wide": None}).set_index("claim")
    assert waiting.loc["a_beats_b[dataset=ptb]", "other_scale"] == "cpu_wide"
    assert waiting.loc["a_beats_b[dataset=ptb]", "other_scale_verdict"] == NOT_YET_RUN
    assert waiting.loc["x", "other_scale_verdict"] == ""   # a study with no second scale
    wide = pd.DataFrame([card_row("toy", "a_beats_b[dataset=ptb]", INCONCLUSIVE, difference="-1.5",
                                  interval="[-4, +1]", flags=FRAGILE, params=20000.0)])
    shown = beside_other_scales(card, studies, "cpu", {"cpu_wide": wide}).set_index("claim")
    assert shown.loc["a_beats_b[dataset=ptb]", ["other_scale_verdict", "other_scale_difference",
                                                "other_scale_interval", "other_scale_flags",
                                                "other_scale_params"]].tolist() == [
        INCONCLUSIVE, "-1.5", "[-4, +1]", FRAGILE, "2e+04"]


def scale_project(tmp_path, with_wide: bool):
    """A project copy with hand-written lru_accuracy tables (FIXTURE numbers) of the cpu budget and, if
    asked, of cpu_wide with its scorecard built first, as `records render` orders them. The tables have
    every declared column and a row for every model of the grid (the scorecard checks them), empty
    where the numbers are not needed."""
    project = copy_project(tmp_path)
    study = load_study("lru")
    def write(budget, lru, gru, rhn):
        given = {m: {"test_loss": sum(v) / 3, "test_loss_samples": ";".join(map(str, v)), "paper_test_loss": p,
                     "params": 1.2e5 if budget == "cpu" else 4.8e5}
                 for m, v, p in (("lru_24m", lru, 1.151), ("gru_24m", gru, 1.165), ("rhn_24m", rhn, 1.202))}
        spec = grid.artifact_spec(study, {"budget": budget, "seeds": [1111]}, "accuracy")
        rows = [{"dataset": dataset, "model": model, **given.get(model, {})}
                for dataset in spec["datasets"] for model in spec["models"]]
        folder = project / grid.results_dir(budget) / "tables"
        folder.mkdir(parents=True)
        columns = study["artifacts"]["accuracy"]["columns"]["lru_accuracy"]
        pd.DataFrame(rows, columns=columns).to_csv(folder / "lru_accuracy.csv", index=False)
        return folder / "lru_accuracy.csv"

    def claims(budget, table):
        root = grid.results_dir(budget)
        files = claims_outputs(root, ["lru"])
        result = python_in(project, "-m", "rnnrepro.analysis.claims", "notebooks/claims.py", f"{root}/notebooks/claims.ipynb",
                           "--run-config", json.dumps({"budget": budget, "seeds": [1111, 1112, 1113], "studies": ["lru"]}),
                           "--tables-in", str(table.relative_to(project)), "--tables", *files["tables"],
                           "--figures", *files["figures"])
        assert result.returncode == 0, result.stderr[-3000:]
        return read_scorecard(project / files["tables"][0]).set_index("claim"), pd.read_csv(project / files["tables"][1])

    cpu_table = write("cpu", [1.630, 1.633, 1.636], [1.655, 1.658, 1.661], [1.636, 1.639, 1.642])
    if with_wide:
        claims("cpu_wide", write("cpu_wide", [1.50, 1.51, 1.52], [1.55, 1.56, 1.57], [1.53, 1.54, 1.55]))
    return project, *claims("cpu", cpu_table)


@pytest.mark.slow
@pytest.mark.parametrize("with_wide", [False, True])
def test_the_cpu_scorecard_reads_its_second_scale(tmp_path, with_wide):
    project, card, pairs = scale_project(tmp_path, with_wide)
    row = card.loc["lru_beats_gru[dataset=warpeace]"]
    assert row["verdict"] == HELD and row["difference"] == "-0.025" and row["paper_difference"] == "-0.014"
    assert row["params"] == 1.2e5 and row["paper_params"] == 24e6
    assert row["other_scale"] == "cpu_wide"
    figure = project / "results/cpu/figures/claims_effects_lru.png"
    assert figure.stat().st_size > 0
    mine = pairs[pairs["claim"] == "lru_beats_gru[dataset=warpeace]"]
    if not with_wide:
        assert row["other_scale_verdict"] == NOT_YET_RUN and set(mine["budget"]) == {"cpu"}
        return
    assert row["other_scale_verdict"] == HELD and row["other_scale_difference"] == "-0.05"
    assert row["other_scale_params"] == "4.8e+05"
    assert set(mine["budget"]) == {"cpu", "cpu_wide"}
    assert mine.set_index("budget").loc["cpu_wide", "params"] == 4.8e5
    assert mine.set_index("budget").loc["cpu", "paper_params"] == 24e6


def test_scale_budgets_render_before_their_base():
    from rnnrepro.records import scales_first

    assert scales_first(["cpu", "reduced", "cpu_wide", "cpu"], REPO_ROOT / "config/config.yaml") == [
        "cpu_wide", "cpu", "reduced"]


# --- the README's scorecard section --------------------------------------------------------------

def readme_card(budget: str) -> pd.DataFrame:
    """A hand-written rendered scorecard: one verdict from real data, one from exact counts, one not tested."""
    base = {column: "" for column in COLUMNS}
    rows = [{**base, "study": "toy", "claim": "a_beats_b[dataset=ptb]", "statement": "A is below B.", "verdict": HELD,
             "paper": "a 62; b 66", "ours": "a 61; b 64", "difference": "-0.04802", "paper_difference": "-0.06252",
             "interval": "[-0.0771, -0.0189]", "unit": "nats", "ratio": "0.768", "ratio_interval": "[0.302, 1.23]",
             "mde": "0.0218", "flags": FRAGILE, "budget": budget, "data": "real",
             "other_scale": "cpu_wide" if budget == "cpu" else "", "other_scale_verdict": NOT_YET_RUN if budget == "cpu" else ""},
            {**base, "study": "toy", "claim": "counts", "statement": "Sizes order.", "verdict": HELD, "budget": budget,
             "data": COUNTED},
            {**base, "study": "toy", "claim": "later", "statement": "Later.", "verdict": NOT_TESTED, "budget": budget,
             "data": "real"}]
    return pd.DataFrame(rows)


def test_readme_section_lists_each_verdict_from_real_data():
    from rnnrepro.readme_scorecard import section

    text = section({"cpu": readme_card("cpu"), "reduced": readme_card("reduced")})
    assert text.startswith("Of the 6 scorecard rows of these budgets, 2 have a verdict from real data "
                           "(1 at `cpu`, 1 at `reduced`):")
    assert ("| A is below B. (`a_beats_b`, cpu; dataset=ptb) | a 62; b 66 | a 61; b 64 | -0.04802 (paper -0.06252) "
            "nats | [-0.0771, -0.0189] | 0.768 [0.302, 1.23] | 0.0218 | held | fragile | cpu_wide: not yet run |") in text
    assert "Decided from exact parameter counts, without training: 1 at `cpu`, 1 at `reduced`." in text


def test_readme_check_fails_when_the_section_differs(tmp_path, monkeypatch):
    from rnnrepro.readme_scorecard import BEGIN, END, section, update

    monkeypatch.chdir(tmp_path)
    (tmp_path / grid.results_dir("cpu") / "tables").mkdir(parents=True)
    readme_card("cpu").to_csv(tmp_path / grid.results_dir("cpu") / "tables/claims.csv", index=False)
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\n{BEGIN}\nold numbers\n{END}\n\nafter\n")
    fresh, message = update(readme, ["cpu"], check=True)
    assert not fresh and "differs from the rendered scorecards of cpu" in message
    assert "old numbers" in readme.read_text()
    assert update(readme, ["cpu"], check=False)[0]
    assert readme.read_text() == f"# title\n\n{BEGIN}\n{section({'cpu': readme_card('cpu')})}{END}\n\nafter\n"
    assert update(readme, ["cpu"], check=True) == (True, f"{readme}: the scorecard section matches cpu")
    readme.write_text("# no markers\n")
    with pytest.raises(ValueError, match="needs exactly one pair of scorecard markers"):
        update(readme, ["cpu"], check=True)


def test_readme_section_shows_the_other_scales_effect():
    from rnnrepro.readme_scorecard import section

    card = readme_card("cpu")
    card.loc[0, ["other_scale_verdict", "other_scale_difference", "other_scale_interval"]] = [
        HELD, "-0.05", "[-0.07, -0.03]"]
    assert "| held | fragile | cpu_wide: held, -0.05 [-0.07, -0.03] |" in section({"cpu": card})
    # the other scale's flags are kept beside its effect
    card.loc[0, "other_scale_flags"] = f"{FRAGILE}, {STILL_IMPROVING}"
    assert "| held | fragile | cpu_wide: held, -0.05 [-0.07, -0.03] (fragile, still improving) |" in section({"cpu": card})


def test_rate_at_grid_edge_flag_names_the_model_its_rate_and_the_end(tmp_path):
    """Row a's runs train at the lowest rate of their tuning grid, row b's at one inside it: only a is
    flagged, with its rate; a run no tuning chose (no `tuning` in its config) is never flagged."""
    from rnnrepro.analysis.run_endings import rate_at_edge, run_endings

    study = {**toy_study(value="test_loss"), "models": {"a": {}, "b": {}, "c": {}}}
    config = {"budget": "cpu", "seeds": [1, 2, 3]}
    for seed in (1, 2, 3):
        for model, factor in (("a", 0.5), ("b", 1)):
            write_toy_run(tmp_path, model, seed, [5.0, 4.0, 4.5, 4.6, 4.7, 4.8, 4.9, 5.0], cap=100)
            folder = tmp_path / "runs" / grid.Cell("toy", "ptb", model, 100, seed, "cpu").key
            run_config = json.loads((folder / "config.json").read_text())
            run_config["recipe"]["lr"] = 0.001 * factor
            run_config["tuning"] = {"lr_factor": factor, "lr_factors": [0.5, 1, 2, 4], "seeds": [1000]}
            (folder / "config.json").write_text(json.dumps(run_config))
    runs = run_endings({"toy": study}, config, tmp_path)
    assert list(runs.drop_duplicates("model").set_index("model")["lr_edge"]) == ["lowest", ""]
    table = seeded_table([60.0, 61.0, 62.0], [63.0, 64.0, 65.0], "test_loss")
    row = {r["claim"]: r for r in evaluate_study(study, config, {"toy_t": table}, runs=runs)}["a_beats_b[dataset=ptb]"]
    assert row["flags"] == RATE_AT_EDGE
    assert row["flag_notes"] == f"{RATE_AT_EDGE}: a at 0.5 x its recipe's rate (lr 0.0005), the lowest factor its tuning tried"
    assert rate_at_edge({"tuning": {"lr_factor": 4, "lr_factors": [0.5, 1, 2, 4]}}) == "highest"
    assert rate_at_edge({"recipe": {"lr": 30}}) == ""


def test_stalled_flag_names_the_seeds_that_never_left_the_unigram_plateau(tmp_path):
    """Seed 2 of row a ends at 5.70 nats against a unigram loss of 5.71 (stalled); its other seeds and
    row b end far below it; a run without `val_unigram_loss` (recorded before it was written) is not
    flagged."""
    from rnnrepro.analysis.run_endings import run_endings, stalled

    study = {**toy_study(value="test_loss"), "models": {"a": {}, "b": {}, "c": {}}}
    config = {"budget": "cpu", "seeds": [1, 2, 3]}
    for seed in (1, 2, 3):
        for model in ("a", "b"):
            write_toy_run(tmp_path, model, seed, [5.0, 4.0, 4.5, 4.6, 4.7, 4.8, 4.9, 5.0], cap=100)
            folder = tmp_path / "runs" / grid.Cell("toy", "ptb", model, 100, seed, "cpu").key
            metrics = json.loads((folder / "metrics.json").read_text())
            metrics["val_loss"] = 5.70 if (model, seed) == ("a", 2) else 4.0
            if (model, seed) != ("b", 3):
                metrics["val_unigram_loss"] = 5.71
            (folder / "metrics.json").write_text(json.dumps(metrics))
    runs = run_endings({"toy": study}, config, tmp_path)
    assert runs.sort_values(["model", "seed"])["stalled"].tolist() == [False, True, False, False, False, False]
    table = seeded_table([60.0, 61.0, 62.0], [63.0, 64.0, 65.0], "test_loss")
    row = {r["claim"]: r for r in evaluate_study(study, config, {"toy_t": table}, runs=runs)}["a_beats_b[dataset=ptb]"]
    assert row["flags"] == STALLED
    assert row["flag_notes"] == (f"{STALLED}: a 1/3 seeds (seed 2) no better than the training split's unigram "
                                 f"frequencies")
    # the threshold: 5 % below the unigram loss has learned; less has not
    assert stalled({"val_cross_entropy": 5.42, "val_unigram_loss": 5.71}) is False
    assert stalled({"val_cross_entropy": 5.43, "val_unigram_loss": 5.71}) is True
    assert stalled({"val_cross_entropy": 5.43}) is False
