"""Compare two sets of result files, metric by metric (no torch).

Results are matched between baseline and current by point (label, system); within a matched
point, per-repeat metrics are compared per workload name and per-point metrics once. When one side
holds several results of the same point (re-runs), their samples are pooled. Each comparison
carries both medians, their ratio and change, the two-sided Mann-Whitney U p-value over the
samples (when each side has >= 2), whether it is significant (p < alpha) and a verdict:
improved / regressed (significant, by the metric's direction) / unchanged / n/a (not testable).

Loading and matching the results is in compare_match, the text of numbers in compare_format;
both are re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
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
from graphbench.reports.metrics import CATALOGUE, POINT, REPEAT, Metric, resolve_metric
from graphbench.reports.stats import bootstrap_ratio_ci, mann_whitney_u, median, ratio
from graphbench.reports.store import LoadedResults

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
VERDICTS = ("improved", "regressed", "unchanged", "n/a")

MAX_BOOTSTRAP = 100_000  # resamples: a tighter CI than 3-5 repeats can support, in seconds



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
    verdict: str  # improved | regressed | unchanged | n/a
    ratio_ci: tuple[float, float] | None = None  # bootstrap CI of the ratio of medians
    note: str = ""

    @property
    def n_baseline(self) -> int:
        return len(self.baseline_samples)

    @property
    def n_current(self) -> int:
        return len(self.current_samples)

    @property
    def point(self) -> str:
        return f"{self.label} ({self.system})"

    @property
    def where(self) -> str:
        return f"{self.point}" + (f" workload {self.workload}" if self.workload is not None else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label, "system": self.system, "workload": self.workload, "metric": self.metric,
            "unit": self.unit, "higher_is_better": self.higher_is_better, "scope": self.scope,
            "baseline_median": json_number(self.baseline_median),
            "current_median": json_number(self.current_median),
            "ratio": json_number(self.ratio), "change_pct": json_number(self.change_pct),
            "p_value": self.p_value, "test": self.test_method, "significant": self.significant,
            "verdict": self.verdict, "n_baseline": self.n_baseline, "n_current": self.n_current,
            "ratio_ci": [json_number(v) for v in self.ratio_ci] if self.ratio_ci else None,
            "baseline_samples": list(self.baseline_samples), "current_samples": list(self.current_samples),
            "note": self.note,
        }



def _compare(
    point: Point, workload: str | None, metric: Metric, base: list[float], cur: list[float],
    alpha: float, bootstrap: int, seed: int,
) -> Comparison:
    bm = median(base) if base else None
    cm = median(cur) if cur else None
    r = ratio(cm, bm) if bm is not None and cm is not None else None
    change = (r - 1.0) * 100.0 if r is not None else None
    p = method = significant = None
    ci = None
    note = ""
    verdict = "n/a"
    if not base or not cur:
        note = f"missing in the {'baseline' if not base else 'current'} results"
    elif len(base) < 2 or len(cur) < 2:
        note = "not testable: < 2 samples on a side"
    else:
        test = mann_whitney_u(base, cur)
        p, method = test.p_value, test.method
        significant = p < alpha
        if significant and cm != bm:
            better = (cm > bm) == metric.higher_is_better
            verdict = "improved" if better else "regressed"
        else:
            verdict = "unchanged"
        if bootstrap > 0:
            ci = bootstrap_ratio_ci(base, cur, n_resamples=bootstrap, seed=seed)
    return Comparison(
        point.label, point.system, workload, metric.name, metric.unit, metric.higher_is_better, metric.scope,
        tuple(base), tuple(cur), bm, cm, r, change, p, method, significant, verdict, ci, note)


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


def compare_sets(
    baseline: LoadedResults | Iterable[dict[str, Any]],
    current: LoadedResults | Iterable[dict[str, Any]],
    *,
    metrics: Sequence[str] | None = None,
    alpha: float = DEFAULT_ALPHA,
    allow_mismatch: bool = False,
    bootstrap: int = 0,
    seed: int = 0,
) -> CompareResult:
    """Every comparison plus warnings (unmatched points or workloads, failed points skipped, ...).

    metrics: names or aliases (default: the whole catalogue); a metric absent on both sides of a
    point/workload is left out, one absent on one side gives a comparison with verdict "n/a".
    bootstrap: number of bootstrap resamples for a CI of the ratio of medians (0: none).
    """
    if not 0.0 < alpha < 1.0:
        raise GraphbenchError(f"alpha must be in (0, 1), got {alpha}")
    if not 0 <= bootstrap <= MAX_BOOTSTRAP:
        raise GraphbenchError(f"bootstrap resamples must be in 0..{MAX_BOOTSTRAP}, got {bootstrap}")
    selected = [resolve_metric(m) for m in metrics] if metrics is not None else list(CATALOGUE)
    selected = list({m.name: m for m in selected}.values())
    matching = match_results(baseline, current, allow_mismatch=allow_mismatch)
    warnings = list(matching.warnings) + [f"skipped {f}" for f in matching.failed]
    comparisons: list[Comparison] = []
    missing: list[str] = []
    for b, c in matching.pairs:
        for metric in selected:
            if metric.scope != POINT:
                continue
            base = [v for r in b.results if (v := metric.point_value(r, result_where(r))) is not None]
            cur = [v for r in c.results if (v := metric.point_value(r, result_where(r))) is not None]
            if base or cur:
                comparisons.append(_compare(b, None, metric, base, cur, alpha, bootstrap, seed))
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
                base = [v for w, where in bw[name] for v in metric.repeat_samples(w, where)]
                cur = [v for w, where in cw[name] for v in metric.repeat_samples(w, where)]
                if base or cur:
                    comparisons.append(_compare(b, name, metric, base, cur, alpha, bootstrap, seed))
    return CompareResult(comparisons, warnings, matching, missing)


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

