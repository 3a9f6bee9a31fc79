"""Which budgets a cell of your own joins when records are rendered (docs/custom_cells.md): only those whose
records hold runs of it, so that another budget's artifacts still render from their baselines' records."""

from __future__ import annotations

from pathlib import Path

import pytest

from rnnrepro import grid
from rnnrepro.analysis.claims import evaluate_study
from rnnrepro.configuration import REPO_ROOT, load_yaml
from rnnrepro.grid import load_study  # the study with the run's cells of your own
from rnnrepro.records import _artifact_problem, _load
from rnnrepro.records.units import recorded_budgets

EXAMPLE = REPO_ROOT / "examples" / "mgu.yaml"
RUN_CONFIG = Path("config/config.yaml")


@pytest.fixture(autouse=True)
def in_repository(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)


def fake_record(records: Path, budget: str, study: str, corpus: str, model: str) -> None:
    run = records / budget / "runs" / study / corpus / model / "frac100" / "seed1111"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text("{}")


def test_a_cell_joins_only_the_rendered_budgets_that_record_it(tmp_path):
    custom = load_yaml(EXAMPLE)["custom_cells"]
    fake_record(tmp_path, "cpu", "pru", "ptb", "mgu")
    fake_record(tmp_path, "cpu_wide", "pru", "ptb", "lstm_m1000")
    limited = recorded_budgets(custom, ["cpu", "cpu_wide"], tmp_path)
    assert limited["mgu"]["studies"]["pru"]["budgets"] == ["cpu"]
    assert limited["mgu"]["studies"]["lru"]["budgets"] == []  # no War and Peace record of it here
    pru = load_study("pru", custom_cells=limited, custom_source=str(EXAMPLE))
    config = load_yaml(REPO_ROOT / "config" / "config.yaml")
    at = {budget: {**config, "budget": budget} for budget in ("cpu", "cpu_wide")}
    assert "mgu" in grid.artifact_spec(pru, at["cpu"], "table1")["models"]
    assert "mgu" not in grid.artifact_spec(pru, at["cpu_wide"], "table1")["models"]
    # the budgets that share cuts through the YAML merge keep their baselines
    assert set(grid.artifact_spec(pru, at["cpu_wide"], "table1")["models"]) == set(
        grid.artifact_spec(load_study("pru", custom_cells={}), at["cpu_wide"], "table1")["models"])
    assert any(c.model.startswith("mgu__") for c in grid.artifact_cells(pru, at["cpu"], "tuning"))
    assert not any(c.model.startswith("mgu__") for c in grid.artifact_cells(pru, at["cpu_wide"], "tuning"))
    # its claims belong to the budgets it joins
    ids = {row["claim"] for row in evaluate_study(pru, {**at["cpu_wide"], "seeds": [1111]}, {})}
    assert ids and not any(claim.startswith("mgu_") for claim in ids)
    ids = {row["claim"] for row in evaluate_study(pru, {**at["cpu"], "seeds": [1111]}, {})}
    assert any(claim.startswith("mgu_vs_") for claim in ids)


def test_the_wide_budget_renders_its_baselines_beside_a_cell_recorded_at_cpu():
    """records render --budget cpu --budget cpu_wide --configfile examples/mgu.yaml: cpu_wide has no mgu
    records, so its PRU Table 1 and LRU accuracy stand or fall on the baselines' records alone, as without
    the config file."""
    records = Path("records")
    plain, alone = _load("cpu_wide", RUN_CONFIG, records=records)
    config, studies = _load("cpu_wide", RUN_CONFIG, custom_file=EXAMPLE, rendered=["cpu_wide", "cpu"],
                            records=records)
    for study, artifact in (("pru", "table1"), ("lru", "accuracy")):
        assert "mgu" not in {c.model for c in grid.artifact_cells(studies[study], config, artifact)}
        assert (_artifact_problem(studies[study], config, artifact, records)
                == _artifact_problem(alone[study], plain, artifact, records)), (study, artifact)
    config, studies = _load("cpu", RUN_CONFIG, custom_file=EXAMPLE, rendered=["cpu_wide", "cpu"], records=records)
    assert "mgu" in {c.model for c in grid.artifact_cells(studies["pru"], config, "table1")}
