"""The CI regression gate (SPEC §4: like asv, a change counts only when it is both statistically
significant and beyond a factor). No torch.

Rules, per matched (point, workload, gated metric):
- Per-repeat metrics (tokens/s, TPOT p99, ...): REGRESSED when the two-sided Mann-Whitney U test over
  the repeats gives p < alpha AND the change of the medians is beyond the metric's threshold in
  the bad direction. When the repeats are too few for any p to reach alpha (3 vs 3, a sweep's
  default: smallest p 0.1) the check is "threshold-only", like a per-point metric's, and the report
  warns: use >= 4 repeats per side (5 recommended) for the test. With require_significance such
  checks keep the test (and can never fail; with < 2 repeats on a side they are "untestable").
- Per-point metrics (startup_s, capture_s, graph_memory_bytes: one value per point) cannot be
  tested for significance: they are "threshold-only": REGRESSED when the change (of the single
  values, or of the medians over re-runs pooled from several files) is beyond the threshold.
  Their default thresholds are wide (startup +20 %, graph memory +10 %) for that reason. Only
  when re-runs give each side enough values for the exact test to reach alpha (e.g. 4 vs 4) do
  they get the same significance+threshold rule as per-repeat metrics.
- A change beyond the threshold in the good direction (and significant, for per-repeat metrics)
  is "improved"; everything else passes.

Thresholds are signed percentages in the bad direction: negative for higher-is-better metrics
(output_tokens_per_s: -5 means "a drop of more than 5 %"), positive for lower-is-better ones.

Unusable input raises GraphbenchError: nothing loaded, failed points, a gated metric present on
one side only, matched points with different model or config hash (unless allow_mismatch), no
point in common, nothing to gate.

Thresholds (defaults, METRIC:PCT specs) are in gate_thresholds, the Markdown and JUnit output in
gate_render; both are re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphbench.errors import GraphbenchError
from graphbench.reports.compare import DEFAULT_ALPHA, Comparison, compare_sets
from graphbench.reports.compare_format import format_change, format_p, json_number
from graphbench.reports.compare_match import load_side
from graphbench.reports.gate_render import (
    error_junit,
    error_markdown,
    gate_junit,
    gate_markdown,
)
from graphbench.reports.gate_thresholds import (
    DEFAULT_THRESHOLDS,
    OFF,
    normalize_thresholds,
    parse_threshold,
    threshold_text,
    thresholds_from_specs,
)
from graphbench.reports.metrics import POINT, Metric, resolve_metric
from graphbench.reports.stats import min_two_sided_p

__all__ = [
    "DEFAULT_THRESHOLDS",
    "OFF",
    "RULE_TEST",
    "RULE_THRESHOLD_ONLY",
    "STATUSES",
    "GateCheck",
    "GateReport",
    "error_junit",
    "error_markdown",
    "gate_comparisons",
    "normalize_thresholds",
    "parse_threshold",
    "repeats_needed",
    "run_gate",
    "thresholds_from_specs",
]

RULE_TEST = "significance+threshold"
RULE_THRESHOLD_ONLY = "threshold-only"
STATUSES = ("regressed", "improved", "pass", "untestable")


def repeats_needed(alpha: float) -> int:
    """Smallest n such that n vs n samples can reach p < alpha with the exact two-sided test."""
    n = 1
    while min_two_sided_p(n, n) >= alpha:
        n += 1
    return n


def _beyond(change: float | None, threshold: float, metric: Metric) -> tuple[bool, bool]:
    """(beyond in the bad direction, beyond in the good direction) of a change in % vs a threshold."""
    if change is None or math.isnan(change):
        return False, False
    if metric.higher_is_better:  # threshold <= 0
        return change < threshold, change > -threshold
    return change > threshold, change < -threshold


@dataclass(frozen=True)
class GateCheck:
    comparison: Comparison
    threshold_pct: float
    rule: str  # RULE_TEST or RULE_THRESHOLD_ONLY
    status: str  # regressed | improved | pass | untestable
    reason: str

    @property
    def metric(self) -> str:
        return self.comparison.metric

    @property
    def testcase_name(self) -> str:
        c = self.comparison
        return f"{c.workload}/{c.metric}" if c.workload is not None else c.metric

    def to_dict(self) -> dict[str, Any]:
        c = self.comparison
        return {
            "label": c.label, "system": c.system, "workload": c.workload, "metric": c.metric, "unit": c.unit,
            "baseline_median": json_number(c.baseline_median), "current_median": json_number(c.current_median),
            "change_pct": json_number(c.change_pct), "p_value": c.p_value, "n_baseline": c.n_baseline,
            "n_current": c.n_current, "threshold_pct": self.threshold_pct, "rule": self.rule,
            "status": self.status, "reason": self.reason,
        }


def _check(c: Comparison, metric: Metric, threshold: float, alpha: float,
           require_significance: bool = False) -> GateCheck:
    bad, good = _beyond(c.change_pct, threshold, metric)
    change, thr = format_change(c.change_pct), threshold_text(threshold)
    testable = c.p_value is not None and min_two_sided_p(c.n_baseline, c.n_current) < alpha
    if not testable and (metric.scope == POINT or not require_significance):
        # asv's rule when it has no statistics: the change of the medians against the threshold alone
        why = (f"{c.n_baseline} vs {c.n_current} value(s) per point" if metric.scope == POINT else
               f"{c.n_baseline} vs {c.n_current} repeats, which cannot reach p < {alpha:g}")
        if bad:
            return GateCheck(c, threshold, RULE_THRESHOLD_ONLY, "regressed",
                             f"change {change} beyond threshold {thr} (threshold only: {why}, too few for a "
                             "significance test)")
        if good:
            return GateCheck(c, threshold, RULE_THRESHOLD_ONLY, "improved",
                             f"change {change} beyond {thr} for the better (threshold only: {why})")
        return GateCheck(c, threshold, RULE_THRESHOLD_ONLY, "pass", f"change {change} within threshold {thr}")
    if c.p_value is None:
        return GateCheck(c, threshold, RULE_TEST, "untestable",
                         f"{c.n_baseline} vs {c.n_current} repeat(s): need >= 2 per side for the significance test")
    p = format_p(c.p_value)
    if c.p_value < alpha and bad:
        return GateCheck(c, threshold, RULE_TEST, "regressed",
                         f"change {change} beyond threshold {thr} and significant (p={p} < {alpha:g})")
    if c.p_value < alpha and good:
        return GateCheck(c, threshold, RULE_TEST, "improved", f"change {change} beyond {thr} for the better, p={p}")
    if bad:
        return GateCheck(c, threshold, RULE_TEST, "pass",
                         f"change {change} beyond threshold {thr} but not significant (p={p} >= {alpha:g})")
    if c.p_value < alpha:
        return GateCheck(c, threshold, RULE_TEST, "pass", f"significant (p={p}) but change {change} within {thr}")
    return GateCheck(c, threshold, RULE_TEST, "pass", f"change {change} within threshold {thr}, p={p}")


@dataclass
class GateReport:
    checks: list[GateCheck]
    warnings: list[str]
    thresholds: dict[str, float]
    alpha: float
    baseline_paths: list[str] = field(default_factory=list)
    current_paths: list[str] = field(default_factory=list)
    allow_mismatch: bool = False
    points: int = 0

    @property
    def regressions(self) -> list[GateCheck]:
        return [c for c in self.checks if c.status == "regressed"]

    @property
    def passed(self) -> bool:
        return not self.regressions

    @property
    def verdict(self) -> str:
        return "pass" if self.passed else "fail"

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def counts(self) -> dict[str, int]:
        return {s: sum(c.status == s for c in self.checks) for s in STATUSES}

    def headline(self) -> str:
        n = self.counts()
        if self.passed:
            head = "PASS"
        else:
            head = f"FAIL: {n['regressed']} regression{'s' if n['regressed'] != 1 else ''}"
        parts = ", ".join(f"{n[s]} {s}" for s in STATUSES if n[s])
        return (f"{head} ({len(self.checks)} checks on {self.points} point{'s' if self.points != 1 else ''}: "
                f"{parts}; alpha {self.alpha:g})")

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict, "alpha": self.alpha, "thresholds": self.thresholds,
            "allow_mismatch": self.allow_mismatch, "points": self.points, "counts": self.counts(),
            "baseline": self.baseline_paths, "current": self.current_paths, "warnings": self.warnings,
            "checks": [c.to_dict() for c in self.checks],
        }

    def to_markdown(self) -> str:
        """A CI job summary: the verdict first, regressions, warnings, then a table of every check."""
        return gate_markdown(self)

    def to_junit(self) -> str:
        """JUnit XML: one testcase per check; regressions are failures, untestable checks are skipped."""
        return gate_junit(self)


def gate_comparisons(
    comparisons: list[Comparison], thresholds: Mapping[str, float], alpha: float, require_significance: bool = False
) -> tuple[list[GateCheck], list[str]]:
    """Checks for the gated metrics among comparisons, plus warnings. Raises on one-sided metrics."""
    checks: list[GateCheck] = []
    warnings: list[str] = []
    by_metric: dict[str, list[Comparison]] = {}
    for c in comparisons:
        by_metric.setdefault(c.metric, []).append(c)
    for name, threshold in thresholds.items():
        metric = resolve_metric(name)
        found = by_metric.get(metric.name, [])
        if not found:
            warnings.append(f"gated metric {metric.name} is in neither result set: not checked")
            continue
        for c in found:
            if not c.baseline_samples or not c.current_samples:
                side, other = ("current", "baseline") if not c.current_samples else ("baseline", "current")
                raise GraphbenchError(
                    f"metric {metric.name} is missing in the {side} results for {c.where} "
                    f"(present in the {other}): cannot gate it")
            checks.append(_check(c, metric, threshold, alpha, require_significance))
    few: dict[str, set[tuple[int, int]]] = {}
    for r in checks:
        c = r.comparison
        if (metric := resolve_metric(c.metric)).scope != POINT and r.status != "untestable" \
                and min_two_sided_p(c.n_baseline, c.n_current) >= alpha:
            few.setdefault(metric.name, set()).add((c.n_baseline, c.n_current))
    need = repeats_needed(alpha)
    for name, sizes in few.items():
        shown = ", ".join(f"{b} vs {k}" for b, k in sorted(sizes))
        smallest = max(min_two_sided_p(b, k) for b, k in sizes)
        then = ("so it can never be flagged" if require_significance else
                "so it is gated by its threshold alone, noise included")
        warnings.append(
            f"too few repeats for {name} ({shown}): the smallest possible p is {smallest:.2g} >= alpha {alpha:g}, "
            f"{then}; run >= {need} repeats per side (5 recommended) for a significance test")
    untestable = [r for r in checks if r.status == "untestable"]
    if untestable:
        metrics = ", ".join(sorted({r.metric for r in untestable}))
        warnings.append(f"{len(untestable)} check(s) untestable with < 2 repeats on a side ({metrics})")
    return checks, warnings


def run_gate(
    baseline_paths: str | Path | Iterable[str | Path],
    current_paths: str | Path | Iterable[str | Path],
    thresholds: Mapping[str, float] | None = None,
    alpha: float = DEFAULT_ALPHA,
    allow_mismatch: bool = False,
    allow_missing: bool = False,
    require_significance: bool = False,
) -> GateReport:
    """Load both sides, compare every matched point and gate the metrics named in thresholds.

    A baseline point missing from the current results (not run, crashed before writing, or its file
    skipped as malformed) is unusable input unless allow_missing: a CI gate must not pass because a
    point vanished. Points only in the current results (new ones) are reported and not gated.

    thresholds: metric name (or alias) -> signed percentage in the bad direction; None means
    DEFAULT_THRESHOLDS (output_tokens_per_s -5, tpot_p99_ms +10, startup_s +20,
    graph_memory_bytes +10). Only these metrics are gated.

    A per-repeat metric with too few repeats for the test to ever reach alpha (3 vs 3: p >= 0.1) is
    gated by its threshold alone (labelled threshold-only, with a warning), as asv does without
    statistics; require_significance keeps it to the significance rule (it then never fails).
    """
    if not 0.0 < alpha < 1.0:
        raise GraphbenchError(f"alpha must be in (0, 1), got {alpha}")
    limits = normalize_thresholds(DEFAULT_THRESHOLDS if thresholds is None else thresholds)
    if not limits:
        raise GraphbenchError("no metric to gate: give at least one threshold")
    bpaths = [baseline_paths] if isinstance(baseline_paths, (str, Path)) else list(baseline_paths)
    cpaths = [current_paths] if isinstance(current_paths, (str, Path)) else list(current_paths)
    baseline, bwarn = load_side(bpaths, "baseline")
    current, cwarn = load_side(cpaths, "current")
    result = compare_sets(baseline, current, metrics=list(limits), alpha=alpha, allow_mismatch=allow_mismatch)
    if result.matching.failed:
        more = f" (and {len(result.matching.failed) - 1} more)" if len(result.matching.failed) > 1 else ""
        raise GraphbenchError(f"failed benchmark point: {result.matching.failed[0]}{more}")
    if not result.matching.pairs:
        raise GraphbenchError("no benchmark point (label, system) is in both the baseline and the current results")
    missing = [f"point {p.name}" for p in result.matching.only_baseline]
    missing += [f"workload {name}" for name in result.missing_workloads]
    if missing and not allow_missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise GraphbenchError(f"{missing[0]}{more} is in the baseline but not in the current results (not run, or "
                              "its file was skipped as malformed); pass --allow-missing to gate the others")
    checks, gwarn = gate_comparisons(result.comparisons, limits, alpha, require_significance)
    if not checks:
        raise GraphbenchError(f"nothing to gate: none of {', '.join(limits)} is in the matched results")
    return GateReport(checks, bwarn + cwarn + result.warnings + gwarn, limits, alpha,
                      [str(p) for p in bpaths], [str(p) for p in cpaths], allow_mismatch,
                      len(result.matching.pairs))
