"""The size of a compared difference over seeds: its mean, a 90 % interval, which way it goes, and
the smallest difference the seeds could have found.

Every comparison the scorecard makes is between two rows, each with its per-seed values (*samples*).
Three kinds of pair:

- **independent** rows (two models, each trained from its own seeds): the effect is the difference of
  the two means; its interval is Welch's t interval on that difference (unequal variances), at the
  exact Welch-Satterthwaite degrees of freedom (a real number, not rounded);
- **paired** rows (both read from the same seed's model: finetuning or dynamic evaluation against the
  model it started from): the effect is the mean of the per-seed differences; its interval is the
  one-sample t interval on those differences;
- **medians** (a claim on a median over all runs, e.g. epochs to the best validation loss): the effect
  is the difference of the two rows' medians, with no interval; it is decided by ranks alone.

The interval is two-sided at 90 %, so "the interval lies below zero" is a one-sided t test at 5 %
(t quantiles: rnnrepro.analysis.inference). Each effect also carries its *minimum detectable effect*:
the true difference a one-sided test at 5 % finds with 80 % power, given the pair's own seeds and its
pooled seed-to-seed standard deviation (paired: that of the per-seed differences).

With one sample in a row there is no interval (NaN bounds): the two numbers are all there is.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from . import inference

INDEPENDENT, PAIRED, ONE_SAMPLE, MEDIANS = "Welch t", "paired t", "one value", "medians, ranks"


def t_quantile(degrees_of_freedom: float) -> float:
    """The 0.95 quantile of Student's t at these (exact, possibly fractional) degrees of freedom."""
    return inference.t_quantile(1 - inference.ALPHA, degrees_of_freedom)


@dataclass(frozen=True)
class Effect:
    """One compared pair: ``difference`` (first minus second: the mean of the first row minus the mean
    of the second, the mean per-seed difference of a paired comparison, or the difference of medians),
    its 90 % interval ``low``..``high`` (NaN with one sample, and for medians), ``method`` (INDEPENDENT,
    PAIRED, MEDIANS or ONE_SAMPLE), ``margin`` (how far the pair clears zero at its weakest seed: the gap
    between the two rows' closest seeds, or the smallest per-seed difference, signed like
    ``difference``; negative where the seeds overlap or disagree), ``noise`` (the seed-to-seed standard
    deviation the margin is judged against: the larger of the two rows', or that of the per-seed
    differences; NaN with one sample), ``freedom`` (the interval's degrees of freedom), ``mde`` (the
    minimum detectable effect at 80 % power, one-sided 5 %, in the unit of ``difference``) and ``level``
    (the exact one-sided false-positive rate of the rank or sign half of the rule at these seeds)."""
    difference: float
    low: float
    high: float
    method: str
    margin: float
    noise: float
    freedom: float = math.nan
    mde: float = math.nan
    level: float = math.nan

    @property
    def has_interval(self) -> bool:
        return not math.isnan(self.low)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def independent(first: list[float], second: list[float]) -> Effect:
    """Two rows trained from their own seeds: difference of means, Welch's t interval (exact df)."""
    difference = _mean(first) - _mean(second)
    margin = max(min(second) - max(first), min(first) - max(second))
    if len(first) < 2 or len(second) < 2:
        return Effect(difference, math.nan, math.nan, ONE_SAMPLE, margin, math.nan)
    var_first, var_second = statistics.variance(first), statistics.variance(second)
    error = math.sqrt(var_first / len(first) + var_second / len(second))
    noise = max(math.sqrt(var_first), math.sqrt(var_second))
    mde = inference.minimum_detectable_effect(inference.pooled_sd(var_first, len(first), var_second, len(second)),
                                              len(first), len(second))
    level = inference.rank_level(len(first), len(second))
    if error == 0:
        return Effect(difference, difference, difference, INDEPENDENT, margin, noise, math.inf, mde, level)
    freedom = inference.welch_freedom(var_first, len(first), var_second, len(second))
    half = t_quantile(freedom) * error
    return Effect(difference, difference - half, difference + half, INDEPENDENT, margin, noise, freedom, mde, level)


def _sign_margin(differences: list[float]) -> float:
    if all(d > 0 for d in differences) or all(d < 0 for d in differences):
        return min(abs(d) for d in differences)
    return -min(max(differences), -min(differences))


def paired(first: list[float], second: list[float]) -> Effect:
    """Two rows read from the same seeds' models, sample i of each from seed i: the mean per-seed
    difference and the t interval on the differences."""
    if len(first) != len(second):
        raise ValueError(f"a paired comparison needs one value per seed in both rows; got {len(first)} "
                         f"and {len(second)} values")
    differences = [a - b for a, b in zip(first, second)]
    difference = _mean(differences)
    margin = _sign_margin(differences)
    if len(differences) < 2:
        return Effect(difference, math.nan, math.nan, ONE_SAMPLE, margin, math.nan)
    noise = statistics.stdev(differences)
    freedom = len(differences) - 1
    half = t_quantile(freedom) * noise / math.sqrt(len(differences))
    return Effect(difference, difference - half, difference + half, PAIRED, margin, noise, freedom,
                  inference.minimum_detectable_effect(noise, len(differences)), inference.sign_level(len(differences)))


def medians(first: list[float], second: list[float]) -> Effect:
    """Two rows compared by their medians over all runs: the difference of medians, no interval; decided
    by ranks alone (every run of one row beyond every run of the other)."""
    difference = statistics.median(first) - statistics.median(second)
    margin = max(min(second) - max(first), min(first) - max(second))
    if len(first) < 2 or len(second) < 2:
        return Effect(difference, math.nan, math.nan, ONE_SAMPLE, margin, math.nan)
    noise = max(statistics.stdev(first), statistics.stdev(second))
    return Effect(difference, math.nan, math.nan, MEDIANS, margin, noise,
                  level=inference.rank_level(len(first), len(second)))


def against_number(samples: list[float], number: float) -> Effect:
    """One row's seeds against a fixed number (the paper's): our mean minus it, the one-sample t
    interval; the margin is how far the nearest seed is from the number on the mean's side."""
    return paired(samples, [number] * len(samples))


BELOW, ABOVE, OVERLAP = "below", "above", "overlapping"


def direction(effect: Effect) -> str:
    """BELOW or ABOVE by the decision rule of the pair's method, else OVERLAP:

    - independent rows: every seed of the first row below (above) every seed of the second *and* the
      interval wholly below (above) zero;
    - paired rows: the interval of the per-seed differences wholly below (above) zero (the paired t
      test, one-sided 5 %; a sign rule alone would err at 2⁻ⁿ, 1/8 with three seeds);
    - medians, and one sample per row: every seed of one row beyond every seed of the other (with one
      sample, the two numbers)."""
    if effect.method == PAIRED:
        if effect.low <= 0 <= effect.high:
            return OVERLAP
        return BELOW if effect.difference < 0 else ABOVE
    if effect.margin <= 0:
        return OVERLAP
    if effect.has_interval and effect.low <= 0 <= effect.high:
        return OVERLAP
    return BELOW if effect.difference < 0 else ABOVE


def is_fragile(effect: Effect) -> bool:
    """A decided pair whose weakest seed clears zero by less than one seed-to-seed standard deviation
    (``noise``): one more seed would likely overlap."""
    return direction(effect) != OVERLAP and not math.isnan(effect.noise) and effect.margin < effect.noise


def number(value: float) -> str:
    """A number as the scorecard prints it: four significant digits, signed."""
    return "n/a" if value is None or math.isnan(value) else f"{value:+.4g}"


def interval_text(effect: Effect) -> str:
    if effect.method == MEDIANS:
        return "n/a (medians: decided by ranks)"
    return "n/a (one value per row)" if not effect.has_interval else f"[{number(effect.low)}, {number(effect.high)}]"


@dataclass(frozen=True)
class AgainstPaper:
    """One pair's effect beside the paper's (the Open Science Collaboration 2015 criteria): ``ratio``
    ours / paper with its interval (ours' interval divided by the paper's effect, ``ratio_low`` <=
    ``ratio_high``), ``significant`` ("yes": our interval excludes zero on the paper's side; "no";
    "n/a" without a paper effect or an interval), ``inside`` ("yes" when the paper's effect lies in our
    interval) and ``underpowered`` ("yes" when our MDE exceeds the paper's effect in size)."""
    ratio: float
    ratio_low: float
    ratio_high: float
    significant: str
    inside: str
    underpowered: str


def against_paper(effect: Effect, paper: float) -> AgainstPaper:
    """Our effect beside the paper's, in the same unit."""
    if paper is None or math.isnan(paper):
        return AgainstPaper(math.nan, math.nan, math.nan, "n/a", "n/a", "n/a")
    ratio = effect.difference / paper if paper else math.nan
    bounds = sorted([effect.low / paper, effect.high / paper]) if paper and effect.has_interval else [math.nan] * 2
    if effect.has_interval:
        significant = "yes" if (effect.low > 0 and paper > 0) or (effect.high < 0 and paper < 0) else "no"
        inside = "yes" if effect.low <= paper <= effect.high else "no"
    else:
        significant = inside = "n/a"
    underpowered = "n/a" if math.isnan(effect.mde) else "yes" if effect.mde > abs(paper) else "no"
    return AgainstPaper(ratio, bounds[0], bounds[1], significant, inside, underpowered)


def relative_size(effect: Effect, second_mean: float, logged: bool) -> tuple[float, float, float]:
    """The pair's size as the first row over the second, minus 1, with its interval: exp of the effect
    minus 1 where the effect is a difference of logs (nats), else the effect over the second row's mean."""
    if logged:
        return tuple(math.expm1(v) for v in (effect.difference, effect.low, effect.high))
    return tuple(v / abs(second_mean) for v in (effect.difference, effect.low, effect.high))


def size_outcome(relative: tuple[float, float, float], target: float, within: float) -> str:
    """"held" when the interval of the size (or, with no interval, the size) lies within target ±
    within, "not held" when it lies wholly outside, "inconclusive" when it straddles an edge."""
    value, low, high = relative
    lower, upper = target - within, target + within
    if math.isnan(low):
        return "held" if lower <= value <= upper else "not held"
    if lower <= low and high <= upper:
        return "held"
    if high < lower or low > upper:
        return "not held"
    return "inconclusive"
