"""When is a difference a difference? One rule for compare, gate, the report and the sweep summary.

The samples are per process (one per round: reports/rounds.py). A difference is called only when it is
significant over those samples AND larger than the noise floor measured in the same data (the spread,
max - min over the median, between the processes of each side, the larger of the two) AND at least the
metric's minimum effect (as asv's factor: the gate's threshold for a gated metric, else 5%), so that
compare and gate call the same rows. Anything else is a tie, shown with its reason ("within noise: x% vs
noise y%"). The test: Mann-Whitney U when the sample sizes
let it reach alpha (4 vs 4 and up), Welch's t-test below that (3 vs 3), and a prediction test when one
side is a single process judged against several (a history). One process on both sides: no test and no
noise estimate, so no verdict ("n/a").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from graphbench.reports.stats import mann_whitney_u, median, min_two_sided_p, prediction_t_test, spread_pct, welch_t_test

IMPROVED, REGRESSED, TIE, NA = "improved", "regressed", "tie", "n/a"
VERDICTS = (IMPROVED, REGRESSED, TIE, NA)
MANN_WHITNEY, WELCH, PREDICTION = "Mann-Whitney U", "Welch's t", "prediction t"


@dataclass(frozen=True)
class Verdict:
    change_pct: float | None  # (median(current) / median(baseline) - 1) x 100
    noise_pct: float | None  # the larger between-process spread of the two sides
    p_value: float | None
    test: str | None  # MANN_WHITNEY | WELCH | PREDICTION | None
    significant: bool | None
    verdict: str  # improved | regressed | tie | n/a
    reason: str

    @property
    def beyond_noise(self) -> bool:
        return self.verdict in (IMPROVED, REGRESSED)


def noise_floor(base: Sequence[float], cur: Sequence[float]) -> float | None:
    """The larger between-process spread (%) of the two sides; None when neither side has 2 samples."""
    spreads = [s for side in (base, cur) if len(side) >= 2 and (s := spread_pct(side)) is not None]
    return max(spreads) if spreads else None


def difference_test(base: Sequence[float], cur: Sequence[float], alpha: float) -> tuple[float | None, str | None]:
    """(two-sided p, the test's name) for the two sides' samples; (None, None) when none applies."""
    nb, nc = len(base), len(cur)
    if nb >= 1 and nc >= 1 and min_two_sided_p(nb, nc) < alpha:
        return mann_whitney_u(base, cur).p_value, MANN_WHITNEY
    if nb >= 2 and nc >= 2:
        return welch_t_test(base, cur), WELCH
    if nb >= 2 and nc == 1:
        return prediction_t_test(base, cur[0]), PREDICTION
    if nc >= 2 and nb == 1:
        return prediction_t_test(cur, base[0]), PREDICTION
    return None, None


def judge(base: Sequence[float], cur: Sequence[float], higher_is_better: bool, alpha: float = 0.05,
          min_effect_pct: float = 0.0) -> Verdict:
    """The verdict on current against baseline (see the module's docstring)."""
    if not base or not cur:
        side = "baseline" if not base else "current"
        return Verdict(None, None, None, None, None, NA, f"no sample in the {side}")
    bm, cm = median(base), median(cur)
    if bm == 0 and cm == 0:
        return Verdict(0.0, None, None, None, None, TIE, "no change: 0 on both sides")
    change = (cm / bm - 1.0) * 100.0 if bm else None
    noise = noise_floor(base, cur)
    p, test = difference_test(base, cur, alpha)
    if p is None or change is None:
        why = "one process a side: no test, no noise estimate" if p is None else "baseline median is 0"
        return Verdict(change, noise, p, test, None, NA, why)
    significant = p < alpha
    within = noise is not None and abs(change) <= noise
    text = f"{change:+.1f}% vs noise {noise:.1f}%" if noise is not None else f"{change:+.1f}%"
    small = abs(change) < min_effect_pct
    if not significant or within or small or cm == bm:
        what = ("within noise" if within else "not significant" if not significant else
                f"below the {min_effect_pct:g}% minimum effect")
        return Verdict(change, noise, p, test, significant, TIE, f"{what}: {text}, p={p:.2g} ({test})")
    better = (cm > bm) == higher_is_better
    return Verdict(change, noise, p, test, True, IMPROVED if better else REGRESSED,
                   f"{text}, p={p:.2g} ({test})")
