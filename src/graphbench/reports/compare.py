"""Compare two sets of result files, metric by metric (no torch).

Results are matched between baseline and current by point (label, system); within a matched
point, per-repeat metrics are compared per workload name and per-point metrics once. The samples
are per process: one per round of a sweep point (its median over the round's repeats,
reports/rounds.py); when one side holds several runs of the same point (a history), their rounds
are pooled. Each comparison carries both medians, their ratio and change, the noise floor (the
larger between-process spread), the test's p and the verdict of reports/verdict.py: improved /
regressed (significant AND beyond the noise) / tie / n/a (one process a side: not testable).

Loading and matching the results is in compare_match, the text of numbers in compare_format;
both are re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from graphbench.errors import GraphbenchError
from graphbench.reports.compare_format import (
    format_change,
    format_p,
    format_value,
    json_number,
)
from graphbench.reports.compare_match import (
    NOT_A_RESULT,
    Matching,
    Point,
    PointKey,
    index_points,
    load_side,
    match_results,
    result_where,
)
from graphbench.reports.gate_thresholds import min_effect_pct
from graphbench.reports.graph_memory_measure import unlike_measurements
from graphbench.reports.metric_catalogue import CATALOGUE, METRICS, POINT, REPEAT, Metric, resolve_metric
from graphbench.reports.point_names import gpu_suffix
from graphbench.reports.rounds import busy_processes, busy_rounds, point_samples, workload_samples
from graphbench.reports.stats import bootstrap_ratio_ci, median, ratio
from graphbench.reports.store import LoadedResults
from graphbench.reports.verdict import IMPROVED, NA, NOISE_RANGES, REGRESSED, TIE, VERDICTS, judge

__all__ = [
    "DEFAULT_ALPHA",
    "NOT_A_RESULT",
    "VERDICTS",
    "CompareResult",
    "Comparison",
    "Matching",
    "Point",
    "PointKey",
    "compare_results",
    "compare_sets",
    "format_change",
    "format_p",
    "format_value",
    "index_points",
    "json_number",
    "load_side",
    "match_results",
]

DEFAULT_ALPHA = 0.05

MAX_BOOTSTRAP = 100_000  # resamples: a tighter CI than 3-5 repeats can support, in seconds
MAX_SEED = 2**63 - 1  # the bootstrap's seed, as `run --seed` bounds it



@dataclass(frozen=True)
class Comparison:
    label: str
    system: str
    workload: str | None  # None for per-point metrics
    metric: str
    unit: str
    higher_is_better: bool
    scope: str
    baseline_samples: tuple[float, ...]
    current_samples: tuple[float, ...]
    baseline_median: float | None
    current_median: float | None
    ratio: float | None  # current / baseline
    change_pct: float | None  # (ratio - 1) * 100
    p_value: float | None  # two-sided Mann-Whitney U; None with < 2 samples on a side
    test_method: str | None  # "exact" | "asymptotic" | None
    significant: bool | None  # p < alpha; None when not computable
    verdict: str  # improved | regressed | tie | n/a (reports/verdict.py)
    ratio_ci: tuple[float, float] | None = None  # bootstrap CI of the ratio of medians
    note: str = ""  # the verdict's reason: "within noise: +1.2% vs noise 3.4%, p=0.4 (Welch's t)"
    noise_pct: float | None = None  # the larger between-process spread of the two sides
    busy_rounds: tuple[int, int] = (0, 0)  # processes with a busy_host repeat: baseline, current
    gpu: str | None = None  # the GPU type, where the point's results span several (compare_match)

    @property
    def n_baseline(self) -> int:
        return len(self.baseline_samples)

    @property
    def n_current(self) -> int:
        return len(self.current_samples)

    @property
    def point(self) -> str:
        return f"{self.label} ({self.system})" + (gpu_suffix(self.gpu) if self.gpu is not None else "")

    @property
    def where(self) -> str:
        return f"{self.point}" + (f" workload {self.workload}" if self.workload is not None else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label, "system": self.system, "gpu": self.gpu, "workload": self.workload,
            "metric": self.metric,
            "unit": self.unit, "higher_is_better": self.higher_is_better, "scope": self.scope,
            "baseline_median": json_number(self.baseline_median),
            "current_median": json_number(self.current_median),
            "ratio": json_number(self.ratio), "change_pct": json_number(self.change_pct),
            "p_value": self.p_value, "test": self.test_method, "significant": self.significant,
            "verdict": self.verdict, "n_baseline": self.n_baseline, "n_current": self.n_current,
            "ratio_ci": [json_number(v) for v in self.ratio_ci] if self.ratio_ci else None,
            "noise_pct": json_number(self.noise_pct),
            "baseline_samples": list(self.baseline_samples), "current_samples": list(self.current_samples),
            "note": self.note,
        }



def _compare(
    point: Point, workload: str | None, metric: Metric, base: list[float], cur: list[float],
    alpha: float, bootstrap: int, seed: int, busy: tuple[int, int] = (0, 0), min_effect_pct: float = 0.0,
    unlike: str | None = None,
) -> Comparison:
    """unlike: why the two sides measured the metric differently (the verdict is then n/a, with that reason)."""
    v = judge(base, cur, metric.higher_is_better, alpha, min_effect_pct, metric.resolution)
    if unlike is not None:
        v = replace(v, significant=None, verdict=NA, reason=unlike)
    bm = median(base) if base else None
    cm = median(cur) if cur else None
    r = ratio(cm, bm) if bm is not None and cm is not None else None
    ci = None
    if bootstrap > 0 and len(base) >= 2 and len(cur) >= 2:
        ci = bootstrap_ratio_ci(base, cur, n_resamples=bootstrap, seed=seed)
    return Comparison(
        point.label, point.system, workload, metric.name, metric.unit, metric.higher_is_better, metric.scope,
        tuple(base), tuple(cur), bm, cm, r, v.change_pct, v.p_value, v.test, v.significant, v.verdict, ci,
        v.reason, v.noise_pct, busy, point.gpu)


def _workloads(point: Point) -> dict[str, list[tuple[dict[str, Any], str]]]:
    """workload name -> [(workload, file)] over the pooled results, in first-seen order."""
    by_name: dict[str, list[tuple[dict[str, Any], str]]] = {}
    for result in point.results:
        for w in result.get("workloads") or []:
            by_name.setdefault(w["name"], []).append((w, result_where(result)))
    return by_name


@dataclass
class CompareResult:
    comparisons: list[Comparison]
    warnings: list[str]
    matching: Matching
    missing_workloads: list[str] = field(default_factory=list)  # "POINT: WORKLOAD" only in the baseline
    min_effects: dict[str, float] = field(default_factory=dict)  # metric -> the smallest change (%) called

    def counts(self) -> dict[str, int]:
        """How many comparisons got each verdict: regressed, improved, tie and n/a (not testable)."""
        return {verdict: sum(c.verdict == verdict for c in self.comparisons)
                for verdict in (REGRESSED, IMPROVED, TIE, NA)}

    def thresholds(self, alpha: float) -> dict[str, Any]:
        """What a difference had to beat (reports/verdict.py): the test's alpha, the noise floor's multiple of
        the larger range between processes, the smallest range a metric's readings count (its resolution, in
        its unit, where it has one) and each compared metric's minimum effect in %."""
        compared = dict.fromkeys(c.metric for c in self.comparisons)
        return {"alpha": alpha, "noise_ranges": NOISE_RANGES,
                "resolution": {name: METRICS[name].resolution for name in compared
                               if name in METRICS and METRICS[name].resolution},
                "min_effect_pct": {name: self.min_effects[name] for name in compared}}


def compare_sets(
    baseline: LoadedResults | Iterable[dict[str, Any]],
    current: LoadedResults | Iterable[dict[str, Any]],
    *,
    metrics: Sequence[str] | None = None,
    alpha: float = DEFAULT_ALPHA,
    allow_mismatch: bool = False,
    bootstrap: int = 0,
    seed: int = 0,
    min_effects: Mapping[str, float] | None = None,
) -> CompareResult:
    """Every comparison plus warnings (unmatched points or workloads, failed points skipped, ...).

    metrics: names or aliases (default: the whole catalogue); a metric absent on both sides of a
    point/workload is left out, one absent on one side gives a comparison with verdict "n/a".
    bootstrap: number of bootstrap resamples for a CI of the ratio of medians (0: none).
    min_effects: metric -> the smallest change (%) called a difference (default: min_effect_pct).
    """
    if not 0.0 < alpha < 1.0:
        raise GraphbenchError(f"alpha must be in (0, 1), got {alpha}")
    if not 0 <= bootstrap <= MAX_BOOTSTRAP:
        raise GraphbenchError(f"bootstrap resamples must be in 0..{MAX_BOOTSTRAP}, got {bootstrap}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:  # (numpy's seeds are >= 0)
        raise GraphbenchError(f"the bootstrap's seed (--seed) must be an integer in 0..2**63-1, got {seed!r}")
    selected = [resolve_metric(m) for m in metrics] if metrics is not None else list(CATALOGUE)
    selected = list({m.name: m for m in selected}.values())
    matching = match_results(baseline, current, allow_mismatch=allow_mismatch)

    def effect(name: str) -> float:
        return abs(min_effects[name]) if min_effects is not None and name in min_effects else min_effect_pct(name)

    warnings = list(matching.warnings) + [f"skipped {f}" for f in matching.failed]
    comparisons: list[Comparison] = []
    missing: list[str] = []
    for b, c in matching.pairs:
        for metric in selected:
            if metric.scope != POINT:
                continue
            base = [v for r in b.results for v in point_samples(r, metric)]
            cur = [v for r in c.results for v in point_samples(r, metric)]
            if base or cur:
                busy = (sum(map(busy_processes, b.results)), sum(map(busy_processes, c.results)))
                comparisons.append(_compare(b, None, metric, base, cur, alpha, bootstrap, seed, busy,
                                            effect(metric.name), unlike_measurements(metric.name, b.results, c.results)))
        bw, cw = _workloads(b), _workloads(c)
        for name in sorted(bw.keys() - cw.keys()):
            warnings.append(f"{b.name}: workload {name} is only in the baseline: not compared")
            missing.append(f"{b.name}: {name}")
        for name in sorted(cw.keys() - bw.keys()):
            warnings.append(f"{b.name}: workload {name} is only in the current results: not compared")
        for name in [n for n in bw if n in cw]:
            for metric in selected:
                if metric.scope != REPEAT:
                    continue
                base = [v for w, _where in bw[name] for v in workload_samples(w, metric.name)]
                cur = [v for w, _where in cw[name] for v in workload_samples(w, metric.name)]
                if base or cur:
                    busy = (sum(busy_rounds(w) for w, _ in bw[name]), sum(busy_rounds(w) for w, _ in cw[name]))
                    comparisons.append(_compare(b, name, metric, base, cur, alpha, bootstrap, seed, busy,
                                                effect(metric.name)))
    return CompareResult(comparisons, warnings, matching, missing, {m.name: effect(m.name) for m in selected})


def compare_results(
    baseline: LoadedResults | Iterable[dict[str, Any]],
    current: LoadedResults | Iterable[dict[str, Any]],
    *,
    metrics: Sequence[str] | None = None,
    alpha: float = DEFAULT_ALPHA,
    allow_mismatch: bool = False,
    bootstrap: int = 0,
    seed: int = 0,
) -> list[Comparison]:
    """One Comparison per matched (point, workload, metric); see compare_sets for the options."""
    return compare_sets(baseline, current, metrics=metrics, alpha=alpha, allow_mismatch=allow_mismatch,
                        bootstrap=bootstrap, seed=seed).comparisons

