"""What the figures draw (rnnrepro.analysis.plotting and the figure functions the notebooks call), read
back from the axes: one line per run, never one line through several seeds; models named in words;
runs their epoch cap stopped drawn open; ours and the paper's compared on one scale."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from rnnrepro.analysis import plotting, pru  # noqa: E402
from rnnrepro.analysis.results import stopped_by_epoch_cap  # noqa: E402
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
        assert sorted(line.get_marker() for line in ends) == [">", "o", "o"]
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
    assert stopped_by_epoch_cap({"epochs": epochs}, {"recipe": recipe}) is capped


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
