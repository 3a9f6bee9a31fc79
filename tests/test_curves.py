"""Learning curves of every model of an artifact on one figure (rnnrepro.analysis.curves): PRU Table 1
with a cell of your own, and the LRN language models (base, then finetuning), from the repository's
cpu records."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from rnnrepro.analysis.curves import curves_figure, read_curves  # noqa: E402
from rnnrepro.configuration import REPO_ROOT  # noqa: E402
from rnnrepro.grid import load_study  # the study with the run's cells of your own

RUNS = REPO_ROOT / "records" / "cpu" / "runs"


@pytest.fixture
def results(tmp_path, monkeypatch):
    """The cpu records of two studies where a render puts them (a finetuned cell names its base there)."""
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "cpu").symlink_to(REPO_ROOT / "records" / "cpu")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def metrics(study: str, *models: str) -> list[str]:
    return [str(path.relative_to(REPO_ROOT / "records").as_posix()).replace("cpu/", "results/cpu/", 1)
            for model in models for path in sorted((RUNS / study / "ptb" / model / "frac10").glob("seed*/metrics.json"))]


def drawn(fig) -> tuple[list, list]:
    lines = [line for ax in fig.axes for line in ax.get_lines() if line.get_linestyle() != "None"]
    return [line for line in lines if line.get_linewidth() >= 2], [line for line in lines if line.get_linewidth() < 2]


def test_every_model_of_pru_table1_with_a_cell_of_your_own_is_one_bold_line_over_faint_seeds(results):
    files = metrics("pru", "lstm_m1000", "pru_g4_k2_m1400", "mgu")
    curves = read_curves(files)
    assert set(curves["stage"]) == {"train"} and (curves["val_ppl"] > 1).all()
    fig = curves_figure(curves, {"lstm_m1000": "LSTM M=1000", "pru_g4_k2_m1400": "PRU g=4"}, "PRU Table 1")
    bold, faint = drawn(fig)
    assert len(bold) == 3 and len(faint) == len(files)  # a mean per model, a line per seed
    labels = [text.get_text() for text in fig.legends[0].get_texts()]
    seeds = curves.groupby("model")["seed"].nunique()
    assert f"mgu ({seeds['mgu']} seeds)" in labels and f"LSTM M=1000 ({seeds['lstm_m1000']} seeds)" in labels
    assert fig.axes[0].get_ylabel() == "validation perplexity" and fig.axes[0].get_xlabel() == "epoch"


def test_the_lrn_language_models_curves_run_on_from_their_base_into_their_finetuning(results):
    curves = read_curves(metrics("lrn", "lstm_ft", "lrn_ft"))
    for (model, seed), run in curves.groupby(["model", "seed"]):
        base, finetune = run[run["stage"] == "base"], run[run["stage"] == "finetune"]
        assert len(base) and len(finetune), (model, seed)
        assert finetune["epoch"].min() == base["epoch"].max() + 1  # numbered on
    fig = curves_figure(curves, {"lstm_ft": "LSTM", "lrn_ft": "LRN"}, "LRN Table 6")
    assert any(line.get_linestyle() == "--" for line in fig.axes[0].get_lines())  # the finetuning, dashed
    assert len(drawn(fig)[0]) == 2


def test_the_curves_figures_are_declared_beside_their_tables():
    assert "pru_table1_curves" in load_study("pru", custom_cells={})["artifacts"]["table1"]["figures"]
    assert "lrn_lm_curves" in load_study("lrn", custom_cells={})["artifacts"]["lm"]["figures"]


def test_a_short_run_fills_its_panel():
    """Two epochs that move little (77.6 to 77.4, as a smoke run): the axis spans the points with a
    margin of a twentieth of their range, not a fixed 3 % below them that leaves the panel empty."""
    import pandas as pd

    curves = pd.DataFrame({"dataset": "ptb", "corpus": "synth_ptb", "model": "lrn_ft", "fraction": 100, "seed": 1111,
                           "budget": "smoke", "capped": False, "stage": "train", "epoch": [1, 2], "val_ppl": [77.6, 77.4]})
    low, high = curves_figure(curves, {}, "LRN Table 6").axes[0].get_ylim()
    assert 77.3 < low < 77.4 and 77.6 <= high < 77.7
