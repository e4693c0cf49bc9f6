"""Compare two sets of result files, metric by metric (no torch).

Results are matched between baseline and current by point (label, system); within a matched
point, per-repeat metrics are compared per workload name and per-point metrics once. When one side
holds several results of the same point (re-runs), their samples are pooled. Each comparison
carries both medians, their ratio and change, the two-sided Mann-Whitney U p-value over the
samples (when each side has >= 2), whether it is significant (p < alpha) and a verdict:
improved / regressed (significant, by the metric's direction) / unchanged / n/a (not testable).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphbench.errors import GraphbenchError
from graphbench.reports.metrics import CATALOGUE, POINT, REPEAT, Metric, resolve_metric
from graphbench.reports.stats import bootstrap_ratio_ci, mann_whitney_u, median, ratio
from graphbench.reports.store import LoadedResults, load_results

DEFAULT_ALPHA = 0.05
NOT_A_RESULT = "not a graphbench result"  # store.load_results' reason for JSON files of another kind
VERDICTS = ("improved", "regressed", "unchanged", "n/a")
PointKey = tuple[str, str]  # (label, system)


def _where(result: dict[str, Any]) -> str:
    return str(result.get("_path") or f"result {result.get('label')!r}")


@dataclass
class Point:
    """One benchmark point on one side: every result file of that (label, system), pooled."""

    label: str
    system: str
    results: list[dict[str, Any]] = field(default_factory=list)

    @property
    def key(self) -> PointKey:
        return (self.label, self.system)

    @property
    def name(self) -> str:
        return f"{self.label} ({self.system})"

    @property
    def paths(self) -> list[str]:
        return [_where(r) for r in self.results]

    def values(self, key: str) -> list[Any]:
        """The distinct values of a top-level field over the pooled results, in order."""
        return list(dict.fromkeys(r.get(key) for r in self.results))


@dataclass
class Matching:
    pairs: list[tuple[Point, Point]]  # (baseline, current), sorted by key
    only_baseline: list[Point]
    only_current: list[Point]
    failed: list[str]  # "baseline: O2 (graphbench) failed: <reason> [path]"
    mismatches: list[str]  # model / config hash differences
    warnings: list[str]


def load_side(paths: str | Path | Iterable[str | Path], side: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Load the result files of one side; GraphbenchError when none loads. Returns (results, warnings)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = list(paths)
    if not paths:
        raise GraphbenchError(f"no {side} result files or folders given")
    loaded = load_results(paths)
    foreign = [file for file, why in loaded.skipped if why == NOT_A_RESULT]
    warnings = [f"{side}: skipped malformed file {file}: {why}" for file, why in loaded.skipped if why != NOT_A_RESULT]
    if foreign:  # e.g. a report's summary.json next to the results: harmless, one line
        warnings.append(f"{side}: ignored {len(foreign)} JSON file(s) that are not graphbench results "
                        f"(e.g. {foreign[0]})")
    if not loaded.results:
        shown = ", ".join(map(str, paths))
        extra = f" ({len(loaded.skipped)} malformed file(s) skipped: {loaded.skipped[0][0]}: {loaded.skipped[0][1]})" \
            if loaded.skipped else ""
        raise GraphbenchError(f"no {side} results loaded from {shown}{extra}")
    return loaded.results, warnings


def _as_list(results: LoadedResults | Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(results, LoadedResults):
        return list(results.results)
    return list(results)


def index_points(results: Iterable[dict[str, Any]], side: str) -> tuple[dict[PointKey, Point], list[str]]:
    """Group results by (label, system). Returns (ok points, descriptions of failed results)."""
    points: dict[PointKey, Point] = {}
    failed: list[str] = []
    for result in results:
        if not isinstance(result, dict):
            raise GraphbenchError(f"{side}: a result is not a JSON object")
        where = _where(result)
        label, system, status = result.get("label"), result.get("system"), result.get("status")
        for key, value in (("label", label), ("system", system), ("status", status)):
            if not isinstance(value, str) or not value:
                raise GraphbenchError(f"{side}: {where}: missing or invalid {key!r}")
        if status != "ok":
            failure = result.get("failure") or {}
            reason = failure.get("reason") if isinstance(failure, dict) else failure
            failed.append(f"{side}: {label} ({system}) {status}: {reason or 'no reason recorded'} [{where}]")
            continue
        workloads = result.get("workloads", [])
        if not isinstance(workloads, list) or not all(isinstance(w, dict) for w in workloads):
            raise GraphbenchError(f"{side}: {where}: 'workloads' is not a list of objects")
        for w in workloads:
            if not isinstance(w.get("name"), str):
                raise GraphbenchError(f"{side}: {where}: a workload has no name")
        points.setdefault((label, system), Point(label, system)).results.append(result)
    return points, failed


def match_results(
    baseline: LoadedResults | Iterable[dict[str, Any]],
    current: LoadedResults | Iterable[dict[str, Any]],
    *,
    allow_mismatch: bool = False,
) -> Matching:
    """Pair points by (label, system); model or config hash differences raise unless allow_mismatch."""
    base_points, base_failed = index_points(_as_list(baseline), "baseline")
    cur_points, cur_failed = index_points(_as_list(current), "current")
    keys = sorted(base_points.keys() & cur_points.keys())
    pairs = [(base_points[k], cur_points[k]) for k in keys]
    only_b = [base_points[k] for k in sorted(base_points.keys() - cur_points.keys())]
    only_c = [cur_points[k] for k in sorted(cur_points.keys() - base_points.keys())]
    warnings: list[str] = []
    mismatches: list[str] = []
    for b, c in pairs:
        for fld, what in (("model", "model"), ("config_hash", "config hash")):
            bv, cv = b.values(fld), c.values(fld)
            if len(bv) > 1 or len(cv) > 1 or bv != cv:
                mismatches.append(
                    f"{b.name}: {what} differs: baseline {'/'.join(map(str, bv))} "
                    f"vs current {'/'.join(map(str, cv))}")
        for fld in ("gpu", "device", "torch"):
            bv = list(dict.fromkeys((r.get("environment") or {}).get(fld) for r in b.results))
            cv = list(dict.fromkeys((r.get("environment") or {}).get(fld) for r in c.results))
            if bv != cv:
                warnings.append(f"{b.name}: environment {fld} differs: baseline {'/'.join(map(str, bv))} "
                                f"vs current {'/'.join(map(str, cv))}")
    if mismatches and not allow_mismatch:
        more = f" (and {len(mismatches) - 1} more)" if len(mismatches) > 1 else ""
        raise GraphbenchError(f"matched points were run with different settings: {mismatches[0]}{more}; "
                              "pass --allow-mismatch (allow_mismatch=True) to compare them anyway")
    warnings = [f"mismatch allowed: {m}" for m in mismatches] + warnings
    for p in only_b:
        warnings.append(f"point {p.name} is only in the baseline: not compared")
    for p in only_c:
        warnings.append(f"point {p.name} is only in the current results: not compared")
    return Matching(pairs, only_b, only_c, base_failed + cur_failed, mismatches, warnings)


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


def json_number(value: float | None) -> float | str | None:
    """Floats as they are; inf/-inf as strings (not valid JSON numbers)."""
    if value is None or math.isfinite(value):
        return value
    return "inf" if value > 0 else "-inf"


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
            by_name.setdefault(w["name"], []).append((w, _where(result)))
    return by_name


@dataclass
class CompareResult:
    comparisons: list[Comparison]
    warnings: list[str]
    matching: Matching


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
    if bootstrap < 0:
        raise GraphbenchError(f"bootstrap resamples must be >= 0, got {bootstrap}")
    selected = [resolve_metric(m) for m in metrics] if metrics is not None else list(CATALOGUE)
    selected = list({m.name: m for m in selected}.values())
    matching = match_results(baseline, current, allow_mismatch=allow_mismatch)
    warnings = list(matching.warnings) + [f"skipped {f}" for f in matching.failed]
    comparisons: list[Comparison] = []
    for b, c in matching.pairs:
        for metric in selected:
            if metric.scope != POINT:
                continue
            base = [v for r in b.results if (v := metric.point_value(r, _where(r))) is not None]
            cur = [v for r in c.results if (v := metric.point_value(r, _where(r))) is not None]
            if base or cur:
                comparisons.append(_compare(b, None, metric, base, cur, alpha, bootstrap, seed))
        bw, cw = _workloads(b), _workloads(c)
        for name in sorted(bw.keys() - cw.keys()):
            warnings.append(f"{b.name}: workload {name} is only in the baseline: not compared")
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
    return CompareResult(comparisons, warnings, matching)


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


def format_value(value: float | None, unit: str) -> str:
    """Human-readable value with its unit: 2200.0 tok/s -> '2,200 tok/s', bytes -> 'MiB'/'GiB'."""
    if value is None:
        return "—"
    if not math.isfinite(value):
        return str(value)
    if unit == "bytes":
        size = abs(value)
        for name, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
            if size >= factor:
                return f"{value / factor:.2f} {name}"
        return f"{value:.0f} B"
    if unit == "fraction":
        return f"{value:.3f}"
    if abs(value) >= 100:
        text = f"{value:,.1f}"
    elif abs(value) >= 1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}" if unit != "%" else f"{text}%"


def format_change(change_pct: float | None) -> str:
    if change_pct is None:
        return "—"
    if not math.isfinite(change_pct):
        return "+inf%" if change_pct > 0 else "-inf%"
    return f"{change_pct:+.1f}%"


def format_p(p: float | None) -> str:
    if p is None:
        return "—"
    return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"
