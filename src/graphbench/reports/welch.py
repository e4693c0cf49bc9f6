"""Welch's two-sample t-test, in pure Python: what three repeats a side can still say.

The Mann-Whitney test assumes nothing about the repeats' distribution, and with 3 repeats a side it
can never reach p < 0.05 (its smallest p is 0.1). Welch's t-test assumes each side's repeats are
normal (variances may differ): with that assumption, 3 vs 3 repeats of a steady metric can show a
change as significant, as pyperf's compare does with its t-test. The report says which test a p
came from. The t distribution's tail is the regularized incomplete beta function, computed by its
continued fraction (Lentz's method).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from graphbench.errors import GraphbenchError


def welch_t_test(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p of Welch's t-test of x against y (each at least 2 values)."""
    if len(x) < 2 or len(y) < 2:
        raise GraphbenchError(f"Welch's t-test needs >= 2 values a side, got {len(x)} and {len(y)}")
    vx, vy = statistics.variance(x) / len(x), statistics.variance(y) / len(y)
    diff = statistics.fmean(x) - statistics.fmean(y)
    if vx + vy == 0:  # no spread on either side: equal means or a certain difference
        return 1.0 if diff == 0 else 0.0
    t = diff / math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1))
    return min(1.0, regularized_beta(df / (df + t * t), df / 2, 0.5))


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, for 0 <= x <= 1 and a, b > 0."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):  # the continued fraction converges fast here
        return math.exp(log_front) * _beta_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(1.0 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float, max_terms: int = 300, eps: float = 1e-15) -> float:
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, max_terms + 1):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h
