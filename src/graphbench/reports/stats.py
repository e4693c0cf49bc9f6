"""Small-sample statistics for benchmark repeats, in pure Python (no numpy, no scipy, no torch).

- `median`, `quantile` (linear interpolation, numpy's default "linear" method), `iqr`,
  `spread_pct` ((max - min) / median, %) and `summarize` (the `summary` block of a result file).
- `mann_whitney_u`: the two-sided Mann-Whitney U test. Exact null distribution (no ties, small
  samples: n1 * n2 <= EXACT_MAX_CELLS) computed from the Gaussian binomial coefficient, whose
  coefficients count the arrangements with each value of U; otherwise the normal approximation
  with tie correction and continuity correction (as scipy.stats.mannwhitneyu(method="asymptotic")).
- `min_two_sided_p(n1, n2)`: the smallest p-value the exact test can give; when it is not below
  alpha, no amount of change can be significant (n1 = n2 = 3 -> 0.1; 4 -> 0.029; 5 -> 0.0079).
- `bootstrap_ratio_ci`: a seeded percentile-bootstrap confidence interval of
  median(current) / median(baseline).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from graphbench.errors import GraphbenchError

EXACT_MAX_CELLS = 2500  # exact distribution when there are no ties and n1 * n2 <= this
METHODS = ("auto", "exact", "asymptotic")


def _values(samples: Sequence[float], what: str = "samples") -> list[float]:
    values = [float(v) for v in samples]
    if not values:
        raise GraphbenchError(f"no {what}: need at least one value")
    if any(math.isnan(v) for v in values):
        raise GraphbenchError(f"{what} contain NaN")
    return values


def median(samples: Sequence[float]) -> float:
    """The median (mean of the two middle values for an even count)."""
    return quantile(samples, 0.5)


def quantile(samples: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) with linear interpolation between order statistics."""
    if not 0.0 <= q <= 1.0:
        raise GraphbenchError(f"quantile must be in [0, 1], got {q}")
    values = sorted(_values(samples))
    h = (len(values) - 1) * q
    lo = math.floor(h)
    frac = h - lo
    a = values[lo]
    if frac == 0 or lo + 1 >= len(values):
        return a
    b = values[lo + 1]
    if a == b:
        return a
    return a + frac * (b - a)


def quantiles(samples: Sequence[float], qs: Sequence[float]) -> list[float]:
    """Several quantiles at once."""
    return [quantile(samples, q) for q in qs]


def iqr(samples: Sequence[float]) -> float:
    """Interquartile range: q75 - q25."""
    return quantile(samples, 0.75) - quantile(samples, 0.25)


# A tokens/s spread above this between repeats is flagged in summaries (issue 5's bar for a steady
# measurement). Host-bound systems (eager or piecewise steps) cross it on unsteady hosts.
MAX_STEADY_SPREAD_PCT = 3.0


def spread_pct(samples: Sequence[float]) -> float | None:
    """(max - min) / median in percent; None when the median is 0."""
    values = _values(samples)
    m = median(values)
    if m == 0:
        return None
    return (max(values) - min(values)) / abs(m) * 100.0


def summarize(samples: Sequence[float]) -> dict[str, float | int | None]:
    """median, iqr, min, max, spread_pct and n: the per-metric `summary` block of a result file."""
    values = _values(samples)
    return {
        "median": median(values),
        "iqr": iqr(values),
        "min": min(values),
        "max": max(values),
        "spread_pct": spread_pct(values),
        "n": len(values),
    }


def ratio(current: float, baseline: float) -> float:
    """current / baseline; 1 when both are 0, inf when only the baseline is 0."""
    if baseline == 0:
        return 1.0 if current == 0 else math.copysign(math.inf, current)
    return current / baseline


# ---------------------------------------------------------------- Mann-Whitney U


@dataclass(frozen=True)
class MannWhitneyResult:
    u1: float  # U of the first sample: #(x > y) + 0.5 * #(x == y)
    u2: float  # n1 * n2 - u1
    p_value: float  # two-sided
    method: str  # "exact" or "asymptotic"
    n1: int
    n2: int


@lru_cache(maxsize=256)
def u_distribution(n1: int, n2: int) -> tuple[int, ...]:
    """counts[u] = number of the C(n1+n2, n1) orderings (no ties) whose U statistic is u.

    These are the coefficients of the Gaussian binomial [n1+n2 choose n1]_q, built as
    prod_{i=1..n1} (1 - q^(n2+i)) / (1 - q^i); each partial product is itself a polynomial
    ([n2+i choose i]_q), so the divisions are exact.
    """
    if n1 < 0 or n2 < 0:
        raise GraphbenchError("sample sizes must be >= 0")
    size = n1 * n2 + n1 + 1
    c = [0] * size
    c[0] = 1
    for i in range(1, n1 + 1):
        k = n2 + i
        for j in range(size - 1, k - 1, -1):  # multiply by (1 - q^k)
            c[j] -= c[j - k]
        for j in range(i, size):  # divide by (1 - q^i)
            c[j] += c[j - i]
    return tuple(c[: n1 * n2 + 1])


def min_two_sided_p(n1: int, n2: int) -> float:
    """The smallest two-sided p-value the exact test can reach: 2 / C(n1+n2, n1) (1 if a side is empty)."""
    if n1 < 1 or n2 < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))


def _ranks(values: list[float]) -> tuple[list[float], list[int]]:
    """Average ranks (1-based) and the sizes of the tie groups."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    ties: list[int] = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        avg = (i + j) / 2.0 + 1.0
        for k in range(i, j + 1):
            ranks[order[k]] = avg
        ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


def _normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def mann_whitney_u(
    x: Sequence[float], y: Sequence[float], *, method: str = "auto", continuity: bool = True
) -> MannWhitneyResult:
    """Two-sided Mann-Whitney U test of x against y.

    method: "exact" (only without ties), "asymptotic" (normal approximation with tie correction,
    continuity-corrected unless continuity=False), or "auto": exact when there are no ties and
    len(x) * len(y) <= EXACT_MAX_CELLS, asymptotic otherwise.
    """
    if method not in METHODS:
        raise GraphbenchError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    xs, ys = _values(x, "first sample"), _values(y, "second sample")
    n1, n2 = len(xs), len(ys)
    ranks, ties = _ranks(xs + ys)
    u1 = sum(ranks[:n1]) - n1 * (n1 + 1) / 2.0
    u2 = n1 * n2 - u1
    has_ties = any(t > 1 for t in ties)
    if method == "auto":
        method = "exact" if not has_ties and n1 * n2 <= EXACT_MAX_CELLS else "asymptotic"
    if method == "exact":
        if has_ties:
            raise GraphbenchError("the exact Mann-Whitney test needs samples without ties; use method='asymptotic'")
        counts = u_distribution(n1, n2)
        total = math.comb(n1 + n2, n1)
        u = round(u1)
        below = sum(counts[: u + 1])  # P(U <= u1) * total
        above = sum(counts[u:])  # P(U >= u1) * total
        p = min(1.0, 2.0 * min(below, above) / total)
        return MannWhitneyResult(u1, u2, p, "exact", n1, n2)

    n = n1 + n2
    mu = n1 * n2 / 2.0
    tie_term = sum(t**3 - t for t in ties)
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:  # every value equal: no evidence of any difference
        return MannWhitneyResult(u1, u2, 1.0, "asymptotic", n1, n2)
    u = max(u1, u2)
    z = (u - mu - (0.5 if continuity else 0.0)) / math.sqrt(var)
    p = min(1.0, max(0.0, 2.0 * _normal_sf(z)))
    return MannWhitneyResult(u1, u2, p, "asymptotic", n1, n2)


# ---------------------------------------------------------------- bootstrap


def bootstrap_ratio_ci(
    baseline: Sequence[float],
    current: Sequence[float],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap CI of median(current) / median(baseline), resampling each side independently.

    Seeded (random.Random(seed)): the same inputs give the same interval.
    """
    if not 0.0 < confidence < 1.0:
        raise GraphbenchError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise GraphbenchError(f"n_resamples must be >= 1, got {n_resamples}")
    base, cur = _values(baseline, "baseline samples"), _values(current, "current samples")
    rng = random.Random(seed)
    ratios = []
    for _ in range(n_resamples):
        b = median(rng.choices(base, k=len(base)))
        c = median(rng.choices(cur, k=len(cur)))
        ratios.append(ratio(c, b))
    tail = (1.0 - confidence) / 2.0
    return quantile(ratios, tail), quantile(ratios, 1.0 - tail)
