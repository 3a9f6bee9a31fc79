"""What the figures draw (rnnrepro.analysis.plotting and the figure functions the notebooks call), read
back from the axes: one line per run, never one line through several seeds; models named in words;
runs their epoch cap stopped drawn open; ours and the paper's compared on one scale."""

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from rnnrepro.analysis import plotting, pru  # noqa: E402
from rnnrepro.analysis.run_endings import stopped_by_epoch_cap  # noqa: E402
from rnnrepro.configuration import load_study  # noqa: E402

# three seeds per model, each run of its own length, as early stopping leaves them
RUN_LENGTHS = {("lstm_m1000", "lstm", 96): [5, 8, 6], ("pru_g4_k2_m1400", "pru", 144): [7, 4, 9]}


def three_seed_histories(capped_run=("pru_g4_k2_m1400", 1113)) -> pd.DataFrame:
    rows = []
    for (model, cell, width), lengths in RUN_LENGTHS.items():
        for seed, epochs in zip((1111, 1112, 1113), lengths):
            for epoch in range(1, epochs + 1):
                rows.append({"dataset": "ptb", "corpus": "ptb", "model": model, "cell": cell, "M": width,
                             "seed": seed, "budget": "cpu", "epoch": epoch, "train_ppl": 900 / epoch + seed % 7,
                             "val_ppl": 1000 / epoch + 50 + seed % 5, "capped": (model, seed) == capped_run})
    return pd.DataFrame(rows)


def drawn_lines(ax) -> list:
    """The lines of an axes with more than one point (markers alone are single points)."""
    return [line for line in ax.get_lines() if len(line.get_xdata()) > 1]


def test_pru_figure_1_draws_one_line_per_run_never_one_through_several_seeds():
    histories = three_seed_histories()
    fig = pru.fig1_figure(histories, plotting.model_names(load_study("pru"), histories["model"]))
    try:
        panels = {ax.get_title(): ax for ax in fig.axes}
        assert set(panels) == {"LSTM", "PRU"}
        for title, ax in panels.items():
            lines = drawn_lines(ax)
            assert len(lines) == 3 * 2  # three seeds, training and validation each
            for line in lines:
                epochs = np.asarray(line.get_xdata(), dtype=float)
                # a line through several seeds would run from one run's last epoch back to epoch 1
                assert (np.diff(epochs) > 0).all(), f"{title}: a line goes back in epochs: {epochs}"
            lengths = sorted(len(line.get_xdata()) for line in lines)
            expected = next(v for (_, cell, _), v in RUN_LENGTHS.items() if cell.upper() == title)
            assert lengths == sorted(expected * 2)
        # the run its epoch cap stopped ends in an open triangle, the others in dots
        ends = [line for line in panels["PRU"].get_lines() if len(line.get_xdata()) == 1]
        assert sorted(line.get_marker() for line in ends) == sorted([">", plotting.STOPPED_MARKER, plotting.STOPPED_MARKER])
        assert [line.get_xdata()[0] for line in ends if line.get_marker() == ">"] == [9]
        legend = [text.get_text() for text in panels["PRU"].get_legend().get_texts()]
        assert "PRU g=4 M=1400" in legend and "pru_g4_k2_m1400" not in legend
    finally:
        plt.close(fig)


@pytest.mark.parametrize("study, models, names", [
    ("pru", ["lstm_m1000", "lstm_m1400", "pru_g1_k2_m1000", "pru_g4_k2_m1400", "awd_pru_g4_k2_m1400",
             "awd_pru_g4_k2_m1400_ft"],
     ["LSTM M=1000", "LSTM M=1400", "PRU g=1 M=1000", "PRU g=4 M=1400", "AWD-PRU g=4 M=1400",
      "AWD-PRU g=4 M=1400 finetuned"]),
    ("pru", ["lstm_m1000", "lstm_m1000_do05"], ["LSTM M=1000 dropout 0.4", "LSTM M=1000 dropout 0.5"]),
    ("pru", ["pru_g4_k2_m1400", "lstm_m1000"], ["PRU g=4 M=1400", "LSTM M=1000"]),
    ("nlstm", ["gru_2x600", "lstm_2x600", "nlstm_1x600_d2"], ["GRU", "LSTM", "Nested LSTM"]),
    ("lrn", ["lstm", "lstm_loop", "gru", "lrn"], ["LSTM", "LSTM (step loop)", "GRU", "LRN"]),
    ("lrn", ["lstm_ft", "lstm_wdi_ft"], ["LSTM", "LSTM weight drop 0.5"]),
    ("pru", ["lstm_m1000", "mgu_of_my_own"], ["LSTM M=1000", "mgu_of_my_own"]),
])
def test_models_are_named_in_words(study, models, names):
    assert list(plotting.model_names(load_study(study), models).values()) == names


@pytest.mark.parametrize("recipe, epochs, capped", [
    ({"epochs": 100, "early_stopping": {"patience": 6}}, 100, True),     # the cap came first
    ({"epochs": 100, "early_stopping": {"patience": 6}}, 57, False),     # stopped by itself
    ({"epochs": 10, "early_stopping": None, "stop_on_nonmono": True}, 10, True),
    ({"epochs": 13, "early_stopping": None, "stop_on_nonmono": False}, 13, False),  # a fixed schedule
    ({"epochs": 6}, 6, False),                                           # no rule of its own
])
def test_a_run_is_capped_when_its_epoch_cap_stopped_it_before_its_own_rule(recipe, epochs, capped):
    assert stopped_by_epoch_cap(recipe, epochs) is capped


def test_rows_against_the_baseline_put_ours_and_the_papers_on_one_scale():
    seeds = pd.DataFrame({"row": ["LSTM"] * 3 + ["PRU"] * 3, "value": [300, 310, 290, 285, 288, 282.0]})
    paper = pd.Series({"LSTM": 66.0, "PRU": 62.0})
    ours, theirs = plotting.relative_change(seeds, paper, "LSTM")
    assert ours.loc[ours["row"] == "PRU", "value"].tolist() == pytest.approx([-5.0, -4.0, -6.0])
    assert ours.loc[ours["row"] == "LSTM", "value"].mean() == pytest.approx(0.0)
    assert theirs["PRU"] == pytest.approx(100 * (62 / 66 - 1))

    fig, axes = plt.subplots(1, 2)
    try:
        plotting.compare_with_paper(axes, seeds.assign(capped=[False] * 5 + [True]), paper, ["LSTM", "PRU"],
                                    "test perplexity", baseline="LSTM")
        # right panel: every mark (ours and the paper's) within a few percent of 0, not at 66 or 300
        marks = np.concatenate([c.get_offsets()[:, 1] for c in axes[1].collections if len(c.get_offsets())])
        assert len(marks) == 6 + 2 and (np.abs(marks) < 10).all()
        # the capped seed is open (white), the others filled
        faces = [tuple(face) for c in axes[0].collections for face in c.get_facecolors() for _ in c.get_offsets()]
        assert faces.count((1.0, 1.0, 1.0, 1.0)) == 1
        # mean bars and ± 1 sd lines: two per row
        assert len(axes[0].get_lines()) == 4
        assert [t.get_text() for t in axes[0].get_xticklabels()] == ["LSTM", "PRU"]
    finally:
        plt.close(fig)


def test_a_ratio_axis_labels_each_tick_once_as_a_ratio():
    fig, ax = plt.subplots()
    try:
        ax.scatter([0.26, 0.8, 1.04], [0, 1, 2])
        plotting.ratio_axis(ax, "x", [0.26, 0.8, 1.04])
        fig.canvas.draw()
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0.25x", "0.5x", "1x", "2x"]
        assert [t.get_text() for t in ax.get_xticklabels(minor=True) if t.get_text()] == []
    finally:
        plt.close(fig)


def test_the_mean_over_seeds_covers_the_epochs_every_seed_reached():
    runs = three_seed_histories()
    lstm = runs[runs["model"] == "lstm_m1000"]
    mean = plotting.mean_curve(lstm, "epoch", "val_ppl")
    assert mean["epoch"].tolist() == [1, 2, 3, 4, 5]  # the shortest run has 5 epochs
    assert mean["val_ppl"].iloc[0] == pytest.approx(lstm.loc[lstm["epoch"] == 1, "val_ppl"].mean())


@pytest.mark.parametrize("low, high, expected", [(190, 1500, ["200", "300", "500", "700", "1000", "1500"]),
                                                 (78.5, 85.1, ["78", "80", "82", "84", "86"])])
def test_a_log_axis_is_labelled_with_plain_numbers_however_narrow_its_range(low, high, expected):
    fig, ax = plt.subplots()
    try:
        ax.plot([1, 2], [low, high])
        plotting.plain_log_axis(ax, "y", [low, high])
        fig.canvas.draw()
        assert [t.get_text() for t in ax.get_yticklabels()] == expected
        assert [t.get_text() for t in ax.get_yticklabels(minor=True) if t.get_text()] == []
    finally:
        plt.close(fig)


# ---------------------------------------------------------------- what each figure draws, against its words

def test_the_nlstm_convergence_marks_are_the_scorecards_own_values():
    """The marks stand at the value the claim "at first" compares (the mean over the first quarter of
    training, the column the claim names), not at the loss of one check."""
    from rnnrepro.analysis.autocomplete import EARLY_CLAIM, early_marks, early_validation_loss

    study = load_study("nlstm")
    iterations = np.arange(0, 801, 50)
    curves = pd.concat([pd.DataFrame({"model": model, "seed": seed, "iteration": iterations,
                                      "val_loss": 2 + scale * np.exp(-iterations / 150) + 0.01 * seed})
                        for model, scale in (("gru_2x600", 3.0), ("lstm_2x600", 4.0), ("nlstm_1x600_d2", 2.0))
                        for seed in (1, 2)], ignore_index=True)
    table = early_validation_loss(curves)
    marks = early_marks(table, curves, study).set_index("model")
    column = next(c["value"] for c in study["claims"] if c["id"] == EARLY_CLAIM)
    assert set(marks["column"]) == {column}
    for model, mark in marks.iterrows():
        assert mark["value"] == pytest.approx(table.loc[table["model"] == model, column].iloc[0])
        assert mark["value"] != pytest.approx(table.loc[table["model"] == model, "early_val_loss_mean"].iloc[0])
        assert (mark["start"], mark["end"]) == (0, 200)  # from the first check to a quarter of 800 iterations


@pytest.mark.parametrize("trained", [["gru", "lru"], ["lstm", "gru", "grid_lstm", "rhn", "ps_lru", "rg_lru", "lru"]])
def test_the_two_lru_efficiency_figures_differ_and_draw_every_unit_their_titles_name(trained):
    from rnnrepro.analysis import lru

    table = pd.DataFrame({"cell": trained, "model": [f"{c}_10m" for c in trained], "test_loss": 1.3})
    plans = lru.comparison_figures(table, {"model.png": lru.MODEL_COMPARISON, "variant.png": lru.VARIANT_COMPARISON},
                                   "cpu")
    for plan, units in zip(plans, (lru.MODEL_COMPARISON, lru.VARIANT_COMPARISON)):
        named = plan["title"].split(" (")[0]   # what the title says is drawn; the rest says what is not
        in_title = {unit for unit, label in lru.UNIT_LABELS.items()
                    if re.search(rf"(?<![-\w]){re.escape(label)}(?![-\w])", named)}
        assert in_title == set(plan["units"]) or plan["same_as"], plan
        assert set(plan["units"]) <= set(trained)
        assert all(lru.UNIT_LABELS[unit] in plan["title"] for unit in units if unit not in trained)
    first, second = plans
    assert first["units"] == [u for u in lru.MODEL_COMPARISON if u in trained]
    # never the same image twice: the second draws its own units, or says the first already draws them
    assert second["units"] != first["units"]
    assert bool(second["same_as"]) == (set(trained) == {"gru", "lru"})


@pytest.mark.parametrize("rates, drawn", [((0.4, 0.5), {0.4: True, 0.5: True}), ((0.4,), {0.4: True, 0.5: False})])
def test_the_dropout_figure_draws_every_rate_trained_and_names_the_rest(rates, drawn):
    table = pd.DataFrame({"dropout": list(rates), "model": ["lstm_m1000", "lstm_m1000_do05"][:len(rates)]})
    assert pru.dropout_rates(load_study("pru"), table) == drawn
