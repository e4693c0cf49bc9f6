"""graphbench.reports.stats against hand-computed values and brute-force enumeration."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from graphbench.errors import GraphbenchError
from graphbench.reports.stats import (
    bootstrap_ratio_ci,
    iqr,
    mann_whitney_u,
    median,
    min_two_sided_p,
    quantile,
    quantiles,
    ratio,
    spread_pct,
    summarize,
    welch_t_test,
)


def test_median_quantiles_iqr_spread():
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 3, 2]) == 2.5
    assert median([7]) == 7
    # linear interpolation (numpy's default): h = (n - 1) q
    assert quantile([1, 2, 3, 4], 0.25) == pytest.approx(1.75)
    assert quantile([1, 2, 3, 4], 0.75) == pytest.approx(3.25)
    assert quantiles([10, 20, 30], [0.0, 0.5, 1.0]) == [10, 20, 30]
    assert iqr([1, 2, 3, 4]) == pytest.approx(1.5)
    assert spread_pct([99, 100, 101]) == pytest.approx(2.0)
    assert spread_pct([0, 0, 0]) is None
    s = summarize([2190.0, 2200.0, 2210.0])
    assert s == {"median": 2200.0, "iqr": 10.0, "min": 2190.0, "max": 2210.0,
                 "spread_pct": pytest.approx(20 / 2200 * 100), "n": 3}


def test_bad_input_raises_graphbench_error():
    with pytest.raises(GraphbenchError):
        median([])
    with pytest.raises(GraphbenchError):
        quantile([1, 2], 1.5)
    with pytest.raises(GraphbenchError):
        median([1.0, float("nan")])
    with pytest.raises(GraphbenchError):
        mann_whitney_u([1, 2], [3, 4], method="bogus")
    with pytest.raises(GraphbenchError, match="ties"):
        mann_whitney_u([1, 2, 2], [2, 3, 4], method="exact")


def test_ratio_edge_cases():
    assert ratio(110, 100) == pytest.approx(1.1)
    assert ratio(0, 0) == 1.0
    assert ratio(5, 0) == math.inf


def _brute_force_counts(n1: int, n2: int) -> list[int]:
    """Count U = #(x > y) over every placement of the n1 x-ranks among 1..n1+n2."""
    counts = [0] * (n1 * n2 + 1)
    for xs in itertools.combinations(range(n1 + n2), n1):
        ys = [r for r in range(n1 + n2) if r not in xs]
        counts[sum(x > y for x in xs for y in ys)] += 1
    return counts


def _brute_force_p(x: list[float], y: list[float]) -> float:
    """Two-sided exact p: the share of rank placements whose U is at least as far from the middle."""
    n1, n2 = len(x), len(y)
    u = sum(a > b for a in x for b in y)
    counts = _brute_force_counts(n1, n2)
    total = math.comb(n1 + n2, n1)
    return min(1.0, 2.0 * min(sum(counts[: u + 1]), sum(counts[u:])) / total)


@pytest.mark.parametrize("n1,n2", [(1, 1), (1, 4), (2, 3), (3, 3), (4, 2), (4, 5), (5, 5), (6, 3)])
def test_exact_p_values_match_enumeration(n1, n2):
    rng = random.Random(n1 * 10 + n2)
    for _ in range(5):
        pooled = rng.sample(range(100), n1 + n2)
        x, y = pooled[:n1], pooled[n1:]
        r = mann_whitney_u(x, y, method="exact")
        assert r.method == "exact" and r.u1 == sum(a > b for a in x for b in y)
        assert r.p_value == pytest.approx(_brute_force_p(x, y), rel=1e-12)


def test_exact_p_values_by_hand():
    # n = m = 3: U counts 1,1,2,3,3,3,3,2,1,1 over C(6,3) = 20 orderings
    assert _brute_force_counts(3, 3) == [1, 1, 2, 3, 3, 3, 3, 2, 1, 1]
    r = mann_whitney_u([1, 2, 3], [4, 5, 6])
    assert (r.u1, r.u2, r.method) == (0, 9, "exact")
    assert r.p_value == pytest.approx(2 / 20)  # 0.1: never significant at 0.05
    # x = 1,3,5 vs y = 2,4,6: U1 = 3; P(U <= 3) = (1+1+2+3)/20 = 7/20, p = 0.7
    r = mann_whitney_u([1, 3, 5], [2, 4, 6])
    assert r.u1 == 3 and r.p_value == pytest.approx(0.7)
    # n = m = 5 fully separated: 2 / C(10, 5) = 2 / 252
    assert mann_whitney_u([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]).p_value == pytest.approx(2 / 252)
    assert mann_whitney_u([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]).p_value == pytest.approx(2 / 252)
    # 2 vs 3 separated: 2 / C(5, 2) = 0.2
    assert mann_whitney_u([1, 2], [3, 4, 5]).p_value == pytest.approx(0.2)
    # identical ranks interleaved perfectly: p = 1
    assert mann_whitney_u([1, 4], [2, 3]).p_value == pytest.approx(1.0)


def test_min_two_sided_p():
    assert min_two_sided_p(3, 3) == pytest.approx(0.1)
    assert min_two_sided_p(4, 4) == pytest.approx(2 / 70)
    assert min_two_sided_p(5, 5) == pytest.approx(0.0079365, rel=1e-4)
    assert min_two_sided_p(3, 4) == pytest.approx(2 / 35)  # 0.057: still not < 0.05
    assert min_two_sided_p(1, 0) == 1.0


def test_asymptotic_without_ties_by_hand():
    # U = 25, mu = 12.5, var = 5*5/12 * 11 = 22.9167; z = (25 - 12.5 - 0.5) / 4.7871 = 2.5067
    r = mann_whitney_u([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], method="asymptotic")
    z = (25 - 12.5 - 0.5) / math.sqrt(25 / 12 * 11)
    assert r.method == "asymptotic"
    assert r.p_value == pytest.approx(math.erfc(z / math.sqrt(2)))
    assert r.p_value == pytest.approx(0.0121858, rel=1e-5)
    no_cc = mann_whitney_u([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], method="asymptotic", continuity=False)
    assert no_cc.p_value == pytest.approx(math.erfc(12.5 / math.sqrt(25 / 12 * 11) / math.sqrt(2)))


def test_asymptotic_with_ties_by_hand():
    # pooled: 1,2,2,2,3,3,4,5 -> ranks 1, 3,3,3, 5.5,5.5, 7, 8; R1 = 1+3+3+5.5 = 12.5, U1 = 2.5
    # tie groups 3 and 2: sum(t^3 - t) = 24 + 6 = 30; var = 16/12 * (9 - 30/56) = 11.2857
    # z = (13.5 - 8 - 0.5) / sqrt(11.2857) = 1.48835, p = 2 * sf(z) = 0.13666
    r = mann_whitney_u([1, 2, 2, 3], [2, 3, 4, 5])
    assert r.method == "asymptotic"  # ties: auto falls back to the normal approximation
    assert (r.u1, r.u2) == (2.5, 13.5)
    assert r.p_value == pytest.approx(0.1366582, rel=1e-5)
    assert mann_whitney_u([5, 5, 5], [5, 5, 5]).p_value == 1.0  # no variance at all


def test_p_value_is_symmetric_and_large_samples_use_asymptotic():
    rng = random.Random(1)
    x = [rng.gauss(0, 1) for _ in range(60)]
    y = [rng.gauss(0.5, 1) for _ in range(60)]
    a, b = mann_whitney_u(x, y), mann_whitney_u(y, x)
    assert a.method == "asymptotic" and a.p_value == pytest.approx(b.p_value)
    assert a.u1 == pytest.approx(b.u2)
    small = mann_whitney_u(x[:8], y[:8])
    assert small.method == "exact"


def test_exact_and_asymptotic_agree_roughly_for_moderate_samples():
    rng = random.Random(3)
    x = [rng.random() for _ in range(12)]
    y = [rng.random() + 0.3 for _ in range(12)]
    exact = mann_whitney_u(x, y, method="exact").p_value
    approx = mann_whitney_u(x, y, method="asymptotic").p_value
    assert exact == pytest.approx(approx, abs=0.01)


def test_bootstrap_ratio_ci_is_seeded_and_sensible():
    base = [100.0, 101.0, 99.0, 100.5, 99.5]
    cur = [90.0, 91.0, 89.0, 90.5, 89.7]
    a = bootstrap_ratio_ci(base, cur, seed=7)
    assert a == bootstrap_ratio_ci(base, cur, seed=7)
    low, high = a
    assert low <= median(cur) / median(base) <= high
    assert 0.87 < low < high < 0.93
    wide = bootstrap_ratio_ci(base, cur, confidence=0.99, seed=7)
    assert wide[0] <= low and wide[1] >= high
    with pytest.raises(GraphbenchError):
        bootstrap_ratio_ci(base, cur, confidence=1.0)
    with pytest.raises(GraphbenchError):
        bootstrap_ratio_ci([], cur)


def test_auto_stays_exact_beyond_scipys_own_auto():
    # scipy's "auto" goes asymptotic above 8 values a side; graphbench keeps the exact test up to
    # n1 * n2 = 2500 cells without ties, where the two agree only roughly
    rng = random.Random(11)
    pooled = rng.sample(range(1000), 45)
    x, y = pooled[:20], [v + 300 for v in pooled[20:]]
    auto = mann_whitney_u(x, y)
    assert auto.method == "exact"
    assert auto.p_value == mann_whitney_u(x, y, method="exact").p_value
    assert auto.p_value == pytest.approx(mann_whitney_u(x, y, method="asymptotic").p_value, abs=0.01)
    assert mann_whitney_u(list(range(51)), list(range(100, 150))).method == "asymptotic"  # 2550 cells


def test_welch_t_test_by_hand():
    # x = 1,2,3; y = 4,6,8,10: var/n = 1/3 and 20/3/4 = 5/3; t = (2 - 7) / sqrt(2) = -3.5355;
    # df = 4 / ((1/3)^2 / 2 + (5/3)^2 / 3) = 4.0755; two-sided p = 2 * t_sf(3.5355, 4.0755) = 0.023377
    assert welch_t_test([1.0, 2.0, 3.0], [4.0, 6.0, 8.0, 10.0]) == pytest.approx(0.0233767676, rel=1e-8)
    assert welch_t_test([4.0, 6.0, 8.0, 10.0], [1.0, 2.0, 3.0]) == pytest.approx(0.0233767676, rel=1e-8)
    assert welch_t_test([1.0, 1.0], [1.0, 1.0]) == 1.0 and welch_t_test([1.0, 1.0], [2.0, 2.0]) == 0.0
    with pytest.raises(GraphbenchError, match=">= 2 values"):
        welch_t_test([1.0], [2.0, 3.0])
