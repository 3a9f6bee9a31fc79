"""Effects over seeds (rnnrepro.analysis.effects): Welch's and the paired t interval against numbers
worked by hand, the decision rule and the fragile flag; how runs ended (rnnrepro.analysis.run_endings)
on hand-written run folders; the early area of a validation curve; which cells run in a fused kernel."""

import json
import math

import pandas as pd
import pytest

from rnnrepro.analysis import effects
from rnnrepro.analysis.autocomplete import early_area, early_validation_loss
from rnnrepro.analysis.run_endings import improving_pct_per_epoch, run_ending
from rnnrepro.cells import FUSED, LOOP, implementation


def test_t_quantiles_at_exact_degrees_of_freedom():
    """Student's 0.95 quantile as any table prints it at whole df, and at the fractional df Welch's
    interval uses (scipy.stats.t.ppf(0.95, 2.5) = 2.5582186141359, worked outside this project)."""
    assert effects.t_quantile(2) == pytest.approx(2.919986, abs=1e-6)
    assert effects.t_quantile(2.5) == pytest.approx(2.5582186141359, abs=1e-9)
    assert effects.t_quantile(2) > effects.t_quantile(2.5) > effects.t_quantile(3)
    assert effects.t_quantile(500) < effects.t_quantile(30) == pytest.approx(1.697261, abs=1e-6)


def test_welch_interval_worked_by_hand():
    # means 61 and 64, variances 1 and 1, n 3 and 3: se = sqrt(2/3) = 0.8165, df = 4, t = 2.131847
    effect = effects.independent([60.0, 61.0, 62.0], [63.0, 64.0, 65.0])
    half = 2.131847 * math.sqrt(2 / 3)
    assert effect.difference == pytest.approx(-3.0) and effect.method == effects.INDEPENDENT
    assert (effect.low, effect.high) == pytest.approx((-3.0 - half, -3.0 + half))
    assert effect.margin == pytest.approx(1.0) and effect.noise == pytest.approx(1.0)   # 62 against 63
    assert effects.direction(effect) == effects.BELOW and not effects.is_fragile(effect)


def test_unequal_variances_use_welch_satterthwaite_degrees_of_freedom():
    # variances 0.0025 and 4: df = (v1/3 + v2/3)^2 / ((v1/3)^2/2 + (v2/3)^2/2) = 2.0025, not rounded to 2;
    # scipy.stats.ttest_ind(equal_var=False).confidence_interval(0.9): [-6.319892629035, 0.419892629035]
    first, second = [1.0, 1.05, 1.1], [2.0, 4.0, 6.0]
    v1, v2 = 0.0025, 4.0
    error = math.sqrt(v1 / 3 + v2 / 3)
    freedom = error ** 4 / ((v1 / 3) ** 2 / 2 + (v2 / 3) ** 2 / 2)
    effect = effects.independent(first, second)
    assert effect.freedom == pytest.approx(freedom) == pytest.approx(2.0024999990234, abs=1e-9)
    assert (effect.low, effect.high) == pytest.approx((-6.319892629035, 0.419892629035), abs=1e-9)
    assert effect.high - effect.difference < 2.919986 * error     # narrower than at df 2


def test_the_rank_rule_and_the_interval_must_agree():
    """Every seed below every seed, but two seeds and a wide spread: the interval spans zero, so the
    pair is undecided; the interval clear of zero but the seeds overlapping: undecided too."""
    spread = effects.independent([3.0, 3.1], [1.0, 2.9])
    assert spread.margin > 0 and spread.low < 0 < spread.high
    assert effects.direction(spread) == effects.OVERLAP
    overlap = effects.independent([1.0] * 9 + [2.5], [2.0] * 10)
    assert overlap.high < 0 and overlap.margin < 0
    assert effects.direction(overlap) == effects.OVERLAP


def test_paired_interval_on_per_seed_differences():
    """Finetuning that lowers every seed's perplexity by 1.4, 3.1, 1.6: the pooled rows overlap (the
    seeds' spread is larger), the per-seed differences do not."""
    base, finetuned = [300.0, 310.0, 295.0], [298.6, 306.9, 293.4]
    assert effects.direction(effects.independent(finetuned, base)) == effects.OVERLAP
    effect = effects.paired(finetuned, base)
    differences = [-1.4, -3.1, -1.6]
    sd = pd.Series(differences).std()
    assert effect.method == effects.PAIRED and effect.difference == pytest.approx(sum(differences) / 3)
    assert effect.high == pytest.approx(effect.difference + 2.919986 * sd / math.sqrt(3))
    assert effect.high < 0 and effect.margin == pytest.approx(1.4) and effect.noise == pytest.approx(sd)
    assert effects.direction(effect) == effects.BELOW
    mixed = effects.paired([1.0, 3.0, 2.0], [2.0, 2.0, 2.5])
    assert mixed.margin < 0 and effects.direction(mixed) == effects.OVERLAP
    with pytest.raises(ValueError, match="one value per seed in both rows"):
        effects.paired([1.0, 2.0], [1.0])


def test_fragile_when_the_closest_seeds_are_nearer_than_one_seed_deviation():
    robust = effects.independent([1.630, 1.631, 1.632], [1.655, 1.658, 1.661])
    assert effects.direction(robust) == effects.BELOW and not effects.is_fragile(robust)
    # separated by 0.0004 with a seed-to-seed deviation of 0.004, and a narrow enough interval
    close = effects.independent([1.600, 1.604, 1.608, 1.612, 1.6156], [1.6160, 1.620, 1.624, 1.628, 1.632])
    assert effects.direction(close) == effects.BELOW and effects.is_fragile(close)
    assert close.margin == pytest.approx(0.0004)
    undecided = effects.independent([1.0, 2.0], [1.5, 2.5])
    assert not effects.is_fragile(undecided)


def test_one_value_per_row_has_no_interval_and_the_numbers_decide():
    effect = effects.independent([1.0], [2.0])
    assert effect.method == effects.ONE_SAMPLE and not effect.has_interval
    assert effects.direction(effect) == effects.BELOW and not effects.is_fragile(effect)
    assert effects.interval_text(effect) == "n/a (one value per row)"
    assert effects.direction(effects.independent([2.0], [2.0])) == effects.OVERLAP


# --- how runs ended -------------------------------------------------------------------------------

def write_run(folder, history: pd.DataFrame, cap: int, model="a", seed=1, early_stopping=True):
    """A hand-written run folder (FIXTURE numbers, no training): config, metrics and history; its recipe
    stops by itself (early stopping) unless ``early_stopping`` is False (a fixed schedule)."""
    folder.mkdir(parents=True)
    recipe = {"epochs": cap, "early_stopping": {"patience": 6, "min_delta": 0.002} if early_stopping else None}
    (folder / "config.json").write_text(json.dumps({"recipe": recipe, "model": model}))
    (folder / "metrics.json").write_text(json.dumps({"model": model, "dataset": "ptb", "seed": seed, "params": 1234,
                                                     "epochs": int(history["epoch"].max())}))
    history.to_csv(folder / "history.csv", index=False)
    return folder


def test_a_run_still_falling_at_its_last_epoch_and_its_rate(tmp_path):
    # validation loss falls 0.002 nats an epoch over 20 epochs: the rate is 1 - exp(-0.002) = 0.1998 %
    history = pd.DataFrame({"epoch": range(1, 21), "val_loss": [6.0 - 0.002 * e for e in range(1, 21)]})
    ending = run_ending(write_run(tmp_path / "run", history, cap=100))
    assert ending["capped"] is False and ending["epochs"] == 20 and ending["params"] == 1234
    assert ending["improving_pct"] == pytest.approx(100 * (1 - math.exp(-0.002)))


def test_a_run_past_its_best_is_not_improving_and_a_run_at_its_cap_is_capped(tmp_path):
    history = pd.DataFrame({"epoch": [1, 2, 3, 4], "val_loss": [5.0, 4.0, 4.1, 4.2]})
    ending = run_ending(write_run(tmp_path / "run", history, cap=4))
    assert math.isnan(ending["improving_pct"]) and ending["capped"] is True
    # a fixed schedule (no rule of its own) is never stopped by its cap
    fixed = run_ending(write_run(tmp_path / "fixed", history, cap=4, early_stopping=False))
    assert fixed["capped"] is False


def test_improvement_of_checks_within_epochs_is_per_epoch():
    # 2 epochs of 100 iterations, checked every 20: the loss falls 0.001 per iteration, 0.1 nats an epoch
    iterations = list(range(0, 201, 20))
    history = pd.DataFrame({"iteration": iterations, "epoch": [min(i // 100 + 1, 2) for i in iterations],
                            "val_loss": [5.0 - 0.001 * i for i in iterations]})
    assert improving_pct_per_epoch(history) == pytest.approx(100 * (1 - math.exp(-0.1)))


# --- the early part of a validation curve ---------------------------------------------------------

def test_early_area_is_the_mean_loss_over_the_first_quarter():
    # a straight line from 8 at iteration 0 to 0 at iteration 800: over the first quarter (0..200) it
    # averages 7, wherever the checks fall
    for checks in ([0, 100, 200, 400, 800], [0, 50, 300, 800], [0, 150, 250, 800]):
        curve = pd.DataFrame({"iteration": checks, "val_loss": [8 - c / 100 for c in checks]})
        assert early_area(curve, 1 / 4) == pytest.approx(7.0)


def test_early_validation_table_gives_both_readings_and_their_seed_means():
    curves = pd.DataFrame({"model": ["a"] * 10, "seed": [1] * 5 + [2] * 5,
                           "iteration": [0, 100, 200, 400, 800] * 2,
                           "val_loss": [8.0, 7.0, 6.0, 4.0, 0.0, 8.0, 7.0, 6.0, 4.0, 0.0]})
    table = early_validation_loss(curves)
    assert table["early_val_area"].tolist() == pytest.approx([7.0, 7.0])
    assert table["early_val_area_mean"].iloc[0] == pytest.approx(7.0)
    assert table["early_val_area_mean_samples"].iloc[0] == "7.0;7.0"


def test_which_cells_run_in_a_fused_kernel():
    assert implementation("lstm_single_bias", "cpu") == implementation("lstm", "cuda") == FUSED
    assert implementation("gru", "cuda") == FUSED and implementation("gru", "cpu") == LOOP
    assert implementation("lrn", "cuda") == implementation("gru_single_bias", "cuda") == LOOP
