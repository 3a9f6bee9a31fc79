"""The size of a compared difference over seeds: its mean, a 90 % interval, and which way it goes.

Every comparison the scorecard makes is between two rows, each with its per-seed values (*samples*).
Two kinds of pair:

- **independent** rows (two models, each trained from its own seeds): the effect is the difference of
  the two means; its interval is Welch's t interval on that difference (unequal variances), with the
  Welch-Satterthwaite degrees of freedom rounded down (a little wider than the exact interval);
- **paired** rows (both read from the same seed's model: finetuning or dynamic evaluation against the
  model it started from): the effect is the mean of the per-seed differences; its interval is the
  one-sample t interval on those differences.

The interval is two-sided at 90 %, so "the interval lies below zero" is a one-sided t test at 5 %. The
t quantiles come from :data:`T_95` (the 0.95 quantile of Student's t by degrees of freedom, as printed in
any statistics table); beyond 30 degrees of freedom the value at 30 is used (wider than the exact one).

With one sample in a row there is no interval (NaN bounds): the two numbers are all there is.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

INDEPENDENT, PAIRED, ONE_SAMPLE = "Welch t", "paired t", "one value"
#: 0.95 quantile of Student's t distribution, by degrees of freedom 1..30 (two-sided 90 % intervals)
T_95 = (6.313752, 2.919986, 2.353363, 2.131847, 2.015048, 1.943180, 1.894579, 1.859548, 1.833113, 1.812461,
        1.795885, 1.782288, 1.770933, 1.761310, 1.753050, 1.745884, 1.739607, 1.734064, 1.729133, 1.724718,
        1.720743, 1.717144, 1.713872, 1.710882, 1.708141, 1.705618, 1.703288, 1.701131, 1.699127, 1.697261)


def t_quantile(degrees_of_freedom: float) -> float:
    """The 0.95 quantile of Student's t for these degrees of freedom, rounded down to a whole number
    (at least 1; past 30, the value at 30): never narrower than the exact interval."""
    whole = max(1, min(len(T_95), math.floor(degrees_of_freedom)))
    return T_95[whole - 1]


@dataclass(frozen=True)
class Effect:
    """One compared pair: ``difference`` (first minus second: the mean of the first row minus the mean
    of the second, or the mean per-seed difference of a paired comparison), its 90 % interval
    ``low``..``high`` (NaN with one sample), ``method`` (INDEPENDENT, PAIRED or ONE_SAMPLE), ``margin``
    (how far the pair clears zero at its weakest seed: the gap between the two rows' closest seeds, or
    the smallest per-seed difference, signed like ``difference``; negative where the seeds overlap or
    disagree) and ``noise`` (the seed-to-seed standard deviation the margin is judged against: the larger
    of the two rows', or that of the per-seed differences; NaN with one sample)."""
    difference: float
    low: float
    high: float
    method: str
    margin: float
    noise: float

    @property
    def has_interval(self) -> bool:
        return not math.isnan(self.low)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def independent(first: list[float], second: list[float]) -> Effect:
    """Two rows trained from their own seeds: difference of means, Welch's t interval."""
    difference = _mean(first) - _mean(second)
    margin = max(min(second) - max(first), min(first) - max(second))
    if len(first) < 2 or len(second) < 2:
        return Effect(difference, math.nan, math.nan, ONE_SAMPLE, margin, math.nan)
    var_first, var_second = statistics.variance(first), statistics.variance(second)
    terms = (var_first / len(first), var_second / len(second))
    error = math.sqrt(sum(terms))
    noise = max(math.sqrt(var_first), math.sqrt(var_second))
    if error == 0:
        return Effect(difference, difference, difference, INDEPENDENT, margin, noise)
    freedom = error ** 4 / (terms[0] ** 2 / (len(first) - 1) + terms[1] ** 2 / (len(second) - 1))
    half = t_quantile(freedom) * error
    return Effect(difference, difference - half, difference + half, INDEPENDENT, margin, noise)


def paired(first: list[float], second: list[float]) -> Effect:
    """Two rows read from the same seeds' models, sample i of each from seed i: the mean per-seed
    difference and the t interval on the differences."""
    if len(first) != len(second):
        raise ValueError(f"a paired comparison needs one value per seed in both rows; got {len(first)} "
                         f"and {len(second)} values")
    differences = [a - b for a, b in zip(first, second)]
    difference = _mean(differences)
    if all(d > 0 for d in differences) or all(d < 0 for d in differences):
        margin = min(abs(d) for d in differences)
    else:
        margin = -min(max(differences), -min(differences))
    if len(differences) < 2:
        return Effect(difference, math.nan, math.nan, ONE_SAMPLE, margin, math.nan)
    noise = statistics.stdev(differences)
    half = t_quantile(len(differences) - 1) * noise / math.sqrt(len(differences))
    return Effect(difference, difference - half, difference + half, PAIRED, margin, noise)


def against_number(samples: list[float], number: float) -> Effect:
    """One row's seeds against a fixed number (the paper's): our mean minus it, the one-sample t
    interval; the margin is how far the nearest seed is from the number on the mean's side."""
    return paired(samples, [number] * len(samples))


BELOW, ABOVE, OVERLAP = "below", "above", "overlapping"


def direction(effect: Effect) -> str:
    """BELOW when every seed of the first row is below every seed of the second (paired: every per-seed
    difference is negative) *and* the interval lies wholly below zero; ABOVE the same way round;
    OVERLAP otherwise. With one sample per row (no interval) the two numbers decide."""
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
    return "n/a (one value per row)" if not effect.has_interval else f"[{number(effect.low)}, {number(effect.high)}]"
