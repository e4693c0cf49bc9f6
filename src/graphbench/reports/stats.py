"""Small-sample statistics for benchmark repeats; the tests themselves come from scipy.stats.

- `median`, `quantile` (linear interpolation, numpy's default "linear" method), `iqr`,
  `spread_pct` ((max - min) / median, %) and `summarize` (the `summary` block of a result file):
  a few lines of pure Python each, so reading and summarising results needs no numpy.
- `mann_whitney_u`: the two-sided Mann-Whitney U test (scipy.stats.mannwhitneyu), with graphbench's
  own choice of method: exact when there are no ties and n1 * n2 <= EXACT_MAX_CELLS (scipy's "auto"
  stops at 8 values a side), otherwise the normal approximation with tie and continuity correction.
- `welch_t_test`: Welch's two-sample t-test (scipy.stats.ttest_ind, equal_var=False). With 3 repeats
  a side the U test can never reach p < 0.05 (its smallest p is 0.1); assuming each side's repeats
  are normal, Welch's test can, as pyperf's compare does. The report says which test a p came from.
- `min_two_sided_p(n1, n2)`: the smallest p-value the exact U test can give; when it is not below
  alpha, no amount of change can be significant (n1 = n2 = 3 -> 0.1; 4 -> 0.029; 5 -> 0.0079).
- `bootstrap_ratio_ci`: a seeded percentile-bootstrap confidence interval of
  median(current) / median(baseline) (scipy.stats.bootstrap).

scipy is imported inside the functions that use it: `gate --help`, `report` on results without
repeats, and every command that never tests a difference start without it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

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


def percent_change(value: float, base: float | None) -> float | None:
    """100 * (value / base - 1); None when there is no base to compare with (missing, 0 or NaN)."""
    if base is None or not base or math.isnan(base) or math.isnan(value):
        return None
    return 100.0 * (value / base - 1.0)


def ratio(current: float, baseline: float) -> float:
    """current / baseline; 1 when both are 0, inf when only the baseline is 0."""
    if baseline == 0:
        return 1.0 if current == 0 else math.copysign(math.inf, current)
    return current / baseline


# ---------------------------------------------------------------- tests of a difference


@dataclass(frozen=True)
class MannWhitneyResult:
    u1: float  # U of the first sample: #(x > y) + 0.5 * #(x == y)
    u2: float  # n1 * n2 - u1
    p_value: float  # two-sided
    method: str  # "exact" or "asymptotic"
    n1: int
    n2: int


def min_two_sided_p(n1: int, n2: int) -> float:
    """The smallest two-sided p-value the exact test can reach: 2 / C(n1+n2, n1) (1 if a side is empty)."""
    if n1 < 1 or n2 < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))


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
    has_ties = len(set(xs + ys)) < n1 + n2
    if method == "auto":
        method = "exact" if not has_ties and n1 * n2 <= EXACT_MAX_CELLS else "asymptotic"
    if method == "exact" and has_ties:
        raise GraphbenchError("the exact Mann-Whitney test needs samples without ties; use method='asymptotic'")
    if len(set(xs + ys)) == 1:  # every value equal: no evidence of any difference (scipy gives NaN)
        u1 = n1 * n2 / 2.0
        return MannWhitneyResult(u1, u1, 1.0, method, n1, n2)
    from scipy import stats

    test = stats.mannwhitneyu(xs, ys, use_continuity=continuity, alternative="two-sided", method=method)
    u1 = float(test.statistic)
    return MannWhitneyResult(u1, n1 * n2 - u1, min(1.0, float(test.pvalue)), method, n1, n2)


def welch_t_test(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p of Welch's t-test of x against y (each at least 2 values)."""
    xs, ys = _values(x, "first sample"), _values(y, "second sample")
    if len(xs) < 2 or len(ys) < 2:
        raise GraphbenchError(f"Welch's t-test needs >= 2 values a side, got {len(xs)} and {len(ys)}")
    if len(set(xs)) == 1 and len(set(ys)) == 1:  # no spread on either side (scipy gives NaN)
        return 1.0 if xs[0] == ys[0] else 0.0
    from scipy import stats

    with warnings.catch_warnings():  # samples nearly alike (one side constant): scipy warns of precision, the p stands
        warnings.simplefilter("ignore", RuntimeWarning)
        return min(1.0, float(stats.ttest_ind(xs, ys, equal_var=False).pvalue))


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

    Seeded: the same inputs and seed give the same interval.
    """
    if not 0.0 < confidence < 1.0:
        raise GraphbenchError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise GraphbenchError(f"n_resamples must be >= 1, got {n_resamples}")
    base, cur = _values(baseline, "baseline samples"), _values(current, "current samples")
    import numpy as np
    from scipy import stats

    def ratio_of_medians(c: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        mc, mb = np.median(c, axis=axis), np.median(b, axis=axis)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(mb == 0, np.where(mc == 0, 1.0, np.copysign(np.inf, mc)), mc / np.where(mb == 0, 1, mb))

    if len(set(base)) == 1 and len(set(cur)) == 1:  # nothing to resample (scipy warns of a degenerate CI)
        r = ratio(cur[0], base[0])
        return r, r
    result = stats.bootstrap(
        (cur, base), ratio_of_medians, n_resamples=n_resamples, confidence_level=confidence,
        method="percentile", paired=False, vectorized=True, rng=np.random.default_rng(seed),
        batch=min(n_resamples, 1000))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def prediction_t_test(samples: Sequence[float], value: float) -> float:
    """Two-sided p that one new observation `value` comes from the distribution of `samples` (>= 2):
    Student's t of its distance to their mean over the prediction interval's scale, s * sqrt(1 + 1/n),
    n - 1 degrees of freedom. How a single run is judged against a history of runs (conbench's
    lookback z-score, with the small-sample correction)."""
    xs = _values(samples, "samples")
    if len(xs) < 2:
        raise GraphbenchError(f"the prediction test needs >= 2 samples, got {len(xs)}")
    n, mean = len(xs), sum(xs) / len(xs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    if sd == 0:
        return 1.0 if value == mean else 0.0
    from scipy import stats

    t = (value - mean) / (sd * math.sqrt(1.0 + 1.0 / n))
    return min(1.0, float(2.0 * stats.t.sf(abs(t), n - 1)))
