"""The runs recorded in this repository (records/, made on a GPU) render into their tables and the
scorecard on any machine. The mechanism itself is tested on hand-written fixtures in test_claims.py;
this checks the real records stay renderable as the notebooks and study files change."""

import shutil

import pandas as pd
import pytest
from conftest import copy_project, python_in

from rnnrepro.configuration import REPO_ROOT, load_study

RECORDED_BUDGETS = sorted(p.name for p in (REPO_ROOT / "records").iterdir() if p.is_dir())


@pytest.mark.parametrize("budget", RECORDED_BUDGETS)
def test_recorded_runs_render_into_tables_and_the_scorecard(budget, tmp_path):
    project = copy_project(tmp_path)
    shutil.copytree(REPO_ROOT / "records", project / "records")
    result = python_in(project, "-m", "rnnrepro.records", "render", "--budget", budget)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    status = {key.removeprefix(f"{budget}:"): state
              for key, state in (line.split(None, 1) for line in result.stdout.strip().splitlines())}
    rendered = [key for key, state in status.items() if state == "rendered" and key != "claims"]
    assert rendered and status["claims"] == "rendered", status

    card = pd.read_csv(project / "results" / budget / "tables/claims.csv")
    tables = {table for key in rendered for table in _tables(*key.split("/"))}
    for table in tables:
        mine = card[card["table"] == table]
        assert (mine["budget"] == budget).all() and (mine["data"] == "real").all(), table
    # a verdict only where its table was rendered from the records
    assert set(card[card["verdict"].isin(["held", "not held", "inconclusive"])]["table"]) <= tables


def _tables(study: str, artifact: str) -> list[str]:
    return load_study(study)["artifacts"][artifact]["tables"]
