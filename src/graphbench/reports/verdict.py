"""When is a difference a difference? One rule for compare, gate, the report and the sweep summary.

The samples are per process (one per round: reports/rounds.py). A difference is called only when it is
significant over those samples AND larger than the noise floor measured in the same data (twice the
larger range, max - min, between the processes of either side, a range counting at least the metric's
resolution, in % of the baseline) AND at least the
metric's minimum effect (as asv's factor: the gate's threshold for a gated metric, else 5%), so that
compare and gate call the same rows. Anything else is a tie, shown with its reason ("within noise: x% vs
noise y%"). The test: Mann-Whitney U when the sample sizes
let it reach alpha (4 vs 4 and up), Welch's t-test below that (3 vs 3), and a prediction test when one
side is a single process judged against several (a history). Fewer than 3 processes a side (and not 1
against 3 or more): no test and no noise estimate, so no verdict ("n/a").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from graphbench.reports.stats import mann_whitney_u, median, min_two_sided_p, prediction_t_test, welch_t_test

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


# The noise floor is this many times the larger between-process range. A range of three processes sees
# less than the processes' whole spread (host-bound steps were bimodal between processes on an H200:
# 2,100 or 3,300 tok/s for one point), and two runs drift apart by more than one run's range: two A/A
# sweeps of one commit on one H200 (2026-12-04) differed by up to 1.5 ranges, never by 2.
NOISE_RANGES = 2.0
MIN_PROCESSES = 3  # a side with fewer has no usable spread: 2 vs 2 gave Welch p = 0.04 for an A/A pair


def _ranges(base: Sequence[float], cur: Sequence[float], resolution: float) -> list[float]:
    """Each side's between-process range (max - min), at least the metric's resolution (a reading that moves
    in steps has a range of 0 on a side whose processes all read one step and the other side's the next)."""
    return [max(max(side) - min(side), resolution) for side in (base, cur) if len(side) >= MIN_PROCESSES]


def noise_floor(base: Sequence[float], cur: Sequence[float], resolution: float = 0.0) -> float | None:
    """NOISE_RANGES x the larger between-process range (max - min) of the two sides, in % of the baseline's
    median (in the metric's units first: a side ten times slower has a range ten times smaller, and the
    verdict is the same both ways round); None when neither side has MIN_PROCESSES samples or the
    baseline's median is 0."""
    ranges = _ranges(base, cur, resolution)
    center = median(base) if base else 0.0
    return 100.0 * NOISE_RANGES * max(ranges) / abs(center) if ranges and center else None


def difference_test(base: Sequence[float], cur: Sequence[float], alpha: float) -> tuple[float | None, str | None]:
    """(two-sided p, the test's name) for the two sides' samples; (None, None) when none applies."""
    nb, nc = len(base), len(cur)
    if min(nb, nc) >= MIN_PROCESSES and min_two_sided_p(nb, nc) < alpha:
        return mann_whitney_u(base, cur).p_value, MANN_WHITNEY
    if min(nb, nc) >= MIN_PROCESSES:
        return welch_t_test(base, cur), WELCH
    if nb >= MIN_PROCESSES and nc == 1:
        return prediction_t_test(base, cur[0]), PREDICTION
    if nc >= MIN_PROCESSES and nb == 1:
        return prediction_t_test(cur, base[0]), PREDICTION
    return None, None


def judge(base: Sequence[float], cur: Sequence[float], higher_is_better: bool, alpha: float = 0.05,
          min_effect_pct: float = 0.0, resolution: float = 0.0) -> Verdict:
    """The verdict on current against baseline (see the module's docstring)."""
    if not base or not cur:
        side = "baseline" if not base else "current"
        return Verdict(None, None, None, None, None, NA, f"no sample in the {side}")
    bm, cm = median(base), median(cur)
    if bm == 0 and cm == 0:
        return Verdict(0.0, None, None, None, None, TIE, "no change: 0 on both sides")
    # from 0 to something (graph memory where none was recorded): an infinite change, judged by the
    # test and by the noise in the metric's units
    change = (cm / bm - 1.0) * 100.0 if bm else math.copysign(math.inf, cm)
    noise = noise_floor(base, cur, resolution)
    p, test = difference_test(base, cur, alpha)
    if p is None:
        why = (f"{len(base)} vs {len(cur)} processes: no test, no noise estimate (>= {MIN_PROCESSES} a side, or "
               f"{MIN_PROCESSES} against 1)")
        return Verdict(change, noise, p, test, None, NA, why)
    significant = p < alpha
    spread = max(_ranges(base, cur, 0.0 if not bm else resolution), default=None)  # (a 0 is no reading)
    within = (noise is not None and abs(change) <= noise) if bm else \
        (spread is not None and abs(cm - bm) <= NOISE_RANGES * spread)
    text = f"{change:+.1f}% vs noise {noise:.1f}%" if noise is not None else f"{change:+.1f}%"
    if not bm:
        text = f"from 0 to {cm:.6g}"
    small = abs(change) < min_effect_pct
    if not significant or within or small or cm == bm:
        what = ("within noise" if within else "not significant" if not significant else
                f"below the {min_effect_pct:g}% minimum effect")
        return Verdict(change, noise, p, test, significant, TIE, f"{what}: {text}, p={p:.2g} ({test})")
    better = (cm > bm) == higher_is_better
    return Verdict(change, noise, p, test, True, IMPROVED if better else REGRESSED,
                   f"{text}, p={p:.2g} ({test})")
