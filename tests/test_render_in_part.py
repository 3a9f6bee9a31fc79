"""A records tree grows unit by unit: an artifact whose records are current for some of its cells is
rendered over those (the seeds so far), its waiting rows named, and every claim it decides is flagged."""

from __future__ import annotations

import pandas as pd
from test_statistics import ppl_table, toy

from rnnrepro.analysis.claims import IN_PART, NOT_TESTED, SEEDS_SO_FAR, evaluate_study, table_problems
from rnnrepro.grid import load_study
from rnnrepro.records import rendering

CPU = {"budget": "cpu", "precision": "fp32", "device": "auto", "seeds": [1111]}


def recorded_only(monkeypatch, recorded: set[tuple[str, int]]) -> None:
    """Records current for exactly these (model, seed) cells; every other is "not recorded"."""
    monkeypatch.setattr(rendering, "record_problem", lambda study, config, cell, records: None
                        if (cell.model, cell.seed) in recorded else f"{cell.key}: not recorded")


def test_an_artifact_with_some_cells_recorded_renders_over_them_and_names_what_waits(monkeypatch, tmp_path):
    study = load_study("pru")
    recorded_only(monkeypatch, {("lstm_m1000", s) for s in (1111, 1112, 1113)} |
                  {("pru_g4_k2_m1400", s) for s in (1111, 1112)})
    metrics, note = rendering._in_part(study, CPU, "table1", tmp_path)
    assert [m.split("/")[-4:-1] for m in metrics] == (
        [["lstm_m1000", "frac10", f"seed{s}"] for s in (1111, 1112, 1113)]
        + [["pru_g4_k2_m1400", "frac10", f"seed{s}"] for s in (1111, 1112)])
    assert "seeds recorded so far: lstm_m1000 3 of 5, pru_g4_k2_m1400 2 of 5" in note
    assert "rows of lstm_m1400, pru_g1_k2_m1000, pru_g2_k2_m1200 wait for their records" in note
    # all or nothing current: rendered whole, or not at all
    recorded_only(monkeypatch, set())
    assert rendering._in_part(study, CPU, "table1", tmp_path) is None
    recorded_only(monkeypatch, {(m, s) for m in study["artifacts"]["table1"]["models"] for s in range(1111, 1116)})
    assert rendering._in_part(study, CPU, "table1", tmp_path) is None


def test_a_tuning_curve_counts_only_whole(monkeypatch, tmp_path):
    study = load_study("pru")
    recorded_only(monkeypatch, {(f"lstm_m1000__lrx{f}", 1000) for f in ("0p25", "0p5", "1", "2")}
                  | {(f"pru_g4_k2_m1400__lrx{f}", 1000) for f in ("0p25", "0p5", "1")})
    metrics, note = rendering._in_part(study, CPU, "tuning", tmp_path)
    assert {m.split("/")[-4] for m in metrics} == {f"lstm_m1000__lrx{f}" for f in ("0p25", "0p5", "1", "2")}
    assert "pru_g4_k2_m1400" in note.split("rows of ")[1]


def test_claims_on_a_table_in_part_are_flagged_or_wait():
    claim = {"id": "lt", "statement": "a below b.", "source": "s", "table": "toy_t", "value": "test_ppl",
             "check": "less_than", "rows": [{"model": "a"}, {"model": "b"}]}
    study = toy(claim, ["dataset", "model", "test_ppl", "test_ppl_samples", "paper_test_ppl"])
    why = f"{IN_PART} from records: seeds recorded so far: a 3 of 5, b 3 of 5"
    table = ppl_table([270.0, 271.0, 272.0], [290.0, 291.0, 292.0], 61.0, 62.0)
    row = evaluate_study(study, {"budget": "cpu", "seeds": [1]}, {"toy_t": table}, {"toy_t": why})[0]
    assert row["verdict"] != NOT_TESTED and SEEDS_SO_FAR in row["flags"]
    assert "seeds recorded so far: a 3 of 5" in row["flag_notes"]
    # without the note the same table decides the claim unflagged
    row = evaluate_study(study, {"budget": "cpu", "seeds": [1]}, {"toy_t": table})[0]
    assert SEEDS_SO_FAR not in str(row["flags"])
    # the case's own rows whole (every seed of the budget), other rows of the table waiting: unflagged
    other = f"{IN_PART} from records: rows of c wait for their records"
    row = evaluate_study(study, {"budget": "cpu", "seeds": [1, 2, 3]}, {"toy_t": table.assign(seeds=3)},
                         {"toy_t": other})[0]
    assert row["verdict"] != NOT_TESTED and SEEDS_SO_FAR not in str(row["flags"])
    row = evaluate_study(study, {"budget": "cpu", "seeds": [1, 2, 3, 4, 5]}, {"toy_t": table.assign(seeds=3)},
                         {"toy_t": other})[0]
    assert SEEDS_SO_FAR in row["flags"]
    # a row that waits: not tested, saying why
    waiting = f"{IN_PART} from records: rows of b wait for their records"
    row = evaluate_study(study, {"budget": "cpu", "seeds": [1]}, {"toy_t": table[table["model"] == "a"]},
                         {"toy_t": waiting})[0]
    assert row["verdict"] == NOT_TESTED and "rows of b wait for their records" in row["reason"]


def test_a_table_in_part_is_not_taken_for_a_damaged_one():
    study = load_study("pru")
    table = pd.DataFrame([{"dataset": "ptb", "model": "lstm_m1000"}])
    cut = [p for p in table_problems(table, study, CPU, "pru_table1") if p.startswith("no row for")]
    assert cut, "a table missing rows of its grid must be damaged"
    assert not [p for p in table_problems(table, study, CPU, "pru_table1", in_part=True) if p.startswith("no row for")]
