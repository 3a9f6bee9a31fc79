"""The distributions and error rates behind the scorecard's intervals and verdicts, without scipy.

- :func:`t_cdf` and :func:`t_quantile`: Student's t at any positive, not necessarily whole, number of
  degrees of freedom (Welch's interval uses the Welch-Satterthwaite value as it is, with no rounding).
  The cdf is the regularized incomplete beta function, evaluated by its continued fraction (Lentz's
  method, as in Numerical Recipes §6.4); the quantile inverts it by bisection to 1e-12.
- :func:`welch_freedom`: the Welch-Satterthwaite degrees of freedom of a difference of two means.
- :func:`minimum_detectable_effect`: the smallest true difference that a one-sided test at 5 % finds
  with 80 % power, for a row's own seeds and seed-to-seed standard deviation: (t(0.95, ν) + t(0.80, ν))
  × the standard error, the usual normal-theory formula with t quantiles (ν = n₁ + n₂ − 2 for two rows
  with a pooled standard deviation, n − 1 for per-seed differences).
- :func:`rank_level` and :func:`sign_level`: the exact one-sided false-positive rate of "every seed of
  one row beyond every seed of the other" (the Mann-Whitney statistic at its extreme: 1 / C(n₁ + n₂,
  n₁)) and of "every per-seed difference of one sign" (the sign test at its extreme: 2⁻ⁿ), both under
  the null of no difference with continuous values.
"""

from __future__ import annotations

import math

#: the one-sided level of every decision (a two-sided 90 % interval), and the power an MDE is quoted at
ALPHA, POWER = 0.05, 0.80


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for numerator in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                          -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            return h
    raise ArithmeticError(f"incomplete beta ({a}, {b}, {x}): the continued fraction did not converge")


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), 0 <= x <= 1."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1 - front * _beta_fraction(b, a, 1 - x) / b


def t_cdf(value: float, freedom: float) -> float:
    """P(T <= value) for Student's t with ``freedom`` (> 0) degrees of freedom."""
    if freedom <= 0 or math.isnan(freedom):
        raise ValueError(f"Student's t needs positive degrees of freedom, got {freedom}")
    tail = 0.5 * incomplete_beta(freedom / 2, 0.5, freedom / (freedom + value * value))
    return 1 - tail if value > 0 else tail


def t_quantile(probability: float, freedom: float) -> float:
    """The ``probability`` quantile of Student's t with ``freedom`` degrees of freedom (any real > 0)."""
    if not 0 < probability < 1:
        raise ValueError(f"a quantile needs a probability in (0, 1), got {probability}")
    if probability < 0.5:
        return -t_quantile(1 - probability, freedom)
    low, high = 0.0, 1.0
    while t_cdf(high, freedom) < probability:
        low, high = high, high * 2
    while high - low > 1e-12 * max(1.0, high):
        middle = (low + high) / 2
        low, high = (middle, high) if t_cdf(middle, freedom) < probability else (low, middle)
    return (low + high) / 2


def welch_freedom(var_first: float, n_first: int, var_second: float, n_second: int) -> float:
    """The Welch-Satterthwaite degrees of freedom of the difference of two means (exact, not rounded)."""
    terms = (var_first / n_first, var_second / n_second)
    return sum(terms) ** 2 / (terms[0] ** 2 / (n_first - 1) + terms[1] ** 2 / (n_second - 1))


def pooled_sd(var_first: float, n_first: int, var_second: float, n_second: int) -> float:
    """The pooled seed-to-seed standard deviation of two rows."""
    return math.sqrt(((n_first - 1) * var_first + (n_second - 1) * var_second) / (n_first + n_second - 2))


def minimum_detectable_effect(sd: float, n_first: int, n_second: int | None = None) -> float:
    """The MDE at 80 % power of a one-sided test at 5 %: two rows of ``n_first`` and ``n_second`` seeds
    with pooled standard deviation ``sd``, or (``n_second`` None) ``n_first`` per-seed differences with
    standard deviation ``sd``. NaN where the seeds leave no degrees of freedom."""
    if n_second is None:
        freedom, error = n_first - 1, sd / math.sqrt(n_first)
    else:
        freedom, error = n_first + n_second - 2, sd * math.sqrt(1 / n_first + 1 / n_second)
    if freedom < 1 or math.isnan(sd):
        return math.nan
    return (t_quantile(1 - ALPHA, freedom) + t_quantile(POWER, freedom)) * error


def rank_level(n_first: int, n_second: int) -> float:
    """One-sided false-positive rate of "every seed of the first row below every seed of the second"
    when both rows come from one distribution: 1 / C(n₁ + n₂, n₁) (1/20 at 3 seeds each)."""
    return 1 / math.comb(n_first + n_second, n_first)


def sign_level(n: int) -> float:
    """One-sided false-positive rate of "every one of n per-seed differences negative" when each is as
    likely positive as negative: 2⁻ⁿ (1/8 at 3 seeds, 1/32 at 5)."""
    return 0.5 ** n
