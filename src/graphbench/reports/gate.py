"""The CI regression gate (like asv: a change counts only when it is significant AND beyond a factor;
like conbench and Bencher: only when it is also beyond the noise the data itself shows). No torch.

Per matched (point, workload, gated metric), on per-process samples (one per round of a sweep point;
with a history baseline, every round of every run: reports/rounds.py):
- REGRESSED when compare's verdict is "regressed" (significant over the processes AND beyond the noise
  floor, the larger between-process spread of the two sides, AND beyond the metric's threshold, which
  is compare's minimum effect: reports/verdict.py); "improved" likewise in the good direction;
- INCONCLUSIVE when the change is beyond the threshold in the bad direction but the data cannot judge
  it: a regressed (or improved) verdict measured on a busy host (a repeat of those processes flagged busy_host),
  one process a side (no test, no noise estimate), or graph memory measured two ways
  (reports/graph_memory_measure.py);
- everything else passes, the reason saying which: within noise, not significant, within threshold.

Exit codes: 1 when a check regressed, else 3 when one is inconclusive (the machine could not judge:
rerun on a quiet host, or with more rounds), else 0; 2 for unusable input.

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
from graphbench.reports.compare_format import format_change, json_number
from graphbench.reports.compare_match import load_side, other_gpu_types
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
from graphbench.reports.metric_catalogue import Metric, resolve_metric
from graphbench.reports.rounds import result_gpu
from graphbench.reports.verdict import IMPROVED, MIN_PROCESSES, NA, REGRESSED

__all__ = [
    "DEFAULT_THRESHOLDS",
    "OFF",
    "RULE",
    "STATUSES",
    "GateCheck",
    "GateReport",
    "blind_passes",
    "error_junit",
    "error_markdown",
    "gate_comparisons",
    "normalize_thresholds",
    "parse_threshold",
    "run_gate",
    "thresholds_from_specs",
]

RULE = "significance+noise+threshold"
STATUSES = ("regressed", "inconclusive", "improved", "pass", "untestable")


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
    rule: str  # RULE
    status: str  # regressed | inconclusive | improved | pass | untestable
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
            "label": c.label, "system": c.system, "gpu": c.gpu, "workload": c.workload, "metric": c.metric,
            "unit": c.unit,
            "baseline_median": json_number(c.baseline_median), "current_median": json_number(c.current_median),
            "change_pct": json_number(c.change_pct), "noise_pct": json_number(c.noise_pct), "p_value": c.p_value,
            "test": c.test_method, "busy_rounds": list(c.busy_rounds), "n_baseline": c.n_baseline,
            "n_current": c.n_current, "threshold_pct": self.threshold_pct, "rule": self.rule,
            "status": self.status, "reason": self.reason,
        }


def _check(c: Comparison, metric: Metric, threshold: float) -> GateCheck:
    bad, good = _beyond(c.change_pct, threshold, metric)
    change, thr = format_change(c.change_pct), threshold_text(threshold)
    if c.verdict == NA:
        if bad:
            return GateCheck(c, threshold, RULE, "inconclusive",
                             f"change {change} beyond threshold {thr}, but {c.note}: cannot judge")
        return GateCheck(c, threshold, RULE, "untestable", c.note)
    if (c.verdict == REGRESSED and bad) or (c.verdict == IMPROVED and good):
        if any(c.busy_rounds):  # a host too busy to measure on: neither a regression nor an improvement
            return GateCheck(c, threshold, RULE, "inconclusive",
                             f"change {change} beyond threshold {thr} and {c.note}, but measured on a busy host "
                             f"({c.busy_rounds[0]} baseline / {c.busy_rounds[1]} current processes): cannot judge")
        if c.verdict == REGRESSED:
            return GateCheck(c, threshold, RULE, "regressed", f"change {change} beyond threshold {thr}: {c.note}")
        return GateCheck(c, threshold, RULE, "improved", f"change {change} beyond {thr} for the better: {c.note}")
    return GateCheck(c, threshold, RULE, "pass", c.note)


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
        return "fail" if not self.passed else "inconclusive" if self.inconclusive else "pass"

    @property
    def inconclusive(self) -> list[GateCheck]:
        return [c for c in self.checks if c.status == "inconclusive"]

    @property
    def exit_code(self) -> int:
        """1 regression; 3 no regression but a check the data could not judge (busy host, too few
        processes); 0 pass."""
        return 1 if not self.passed else 3 if self.inconclusive else 0

    def counts(self) -> dict[str, int]:
        return {s: sum(c.status == s for c in self.checks) for s in STATUSES}

    def headline(self) -> str:
        n = self.counts()
        if self.passed:
            head = "CANNOT JUDGE" if self.inconclusive else "PASS"
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
    comparisons: list[Comparison], thresholds: Mapping[str, float], quiet: Iterable[str] = ()
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
            if metric.name not in set(quiet):  # a default absent on both sides (full_step_ms on the CPU): no news
                warnings.append(f"gated metric {metric.name} is in neither result set: not checked")
            continue
        for c in found:
            if not c.baseline_samples or not c.current_samples:
                side, other = ("current", "baseline") if not c.current_samples else ("baseline", "current")
                raise GraphbenchError(
                    f"metric {metric.name} is missing in the {side} results for {c.where} "
                    f"(present in the {other}): cannot gate it")
            checks.append(_check(c, metric, threshold))
    untestable = [r for r in checks if r.comparison.verdict == NA
                  and min(r.comparison.n_baseline, r.comparison.n_current) < MIN_PROCESSES]
    if untestable:
        metrics = ", ".join(sorted({r.metric for r in untestable}))
        warnings.append(f"{len(untestable)} check(s) had too few processes for a verdict ({metrics}): no test and "
                        f"no noise estimate below {MIN_PROCESSES} a side; measure >= {MIN_PROCESSES} rounds a side "
                        "(graphbench sweep --rounds)")
    busy = [r for r in checks if any(r.comparison.busy_rounds)]
    if busy:
        warnings.append(f"{len(busy)} check(s) include processes measured on a busy host: a regression among them "
                        "is reported as inconclusive (exit 3), not as a regression")
    blind = _blind_passes_warning(checks)
    if blind:
        warnings.append(blind)
    return checks, warnings


def blind_passes(checks: Iterable[GateCheck]) -> list[GateCheck]:
    """The passes whose noise floor is wider than their threshold: a regression of the threshold's size would have
    passed too (an H100's llama-3.2-1b warm starts spread 75% between processes against start-up's 20%:
    benchmarks/RESULTS.md, 2026-12-07), so such a pass says little."""
    return [r for r in checks if r.status == "pass" and r.comparison.noise_pct is not None
            and math.isfinite(r.comparison.noise_pct) and r.comparison.noise_pct > abs(r.threshold_pct)]


def _blind_passes_warning(checks: list[GateCheck]) -> str | None:
    blind: dict[str, list[GateCheck]] = {}
    for r in blind_passes(checks):
        blind.setdefault(r.metric, []).append(r)
    if not blind:
        return None
    parts = [f"{metric} ({len(rs)}: noise up to {max(r.comparison.noise_pct for r in rs):.0f}% against "
             f"{threshold_text(rs[0].threshold_pct)})" for metric, rs in sorted(blind.items())]
    count = sum(len(rs) for rs in blind.values())
    return (f"{count} passing check(s) had more noise between processes than their threshold, so a regression of "
            f"the threshold's size would have passed them too: {', '.join(parts)}; read them as unjudged by this run")


def run_gate(
    baseline_paths: str | Path | Iterable[str | Path],
    current_paths: str | Path | Iterable[str | Path],
    thresholds: Mapping[str, float] | None = None,
    alpha: float = DEFAULT_ALPHA,
    allow_mismatch: bool = False,
    allow_missing: bool = False,
) -> GateReport:
    """Load both sides, compare every matched point and gate the metrics named in thresholds.

    A baseline point missing from the current results (not run, crashed before writing, or its file
    skipped as malformed) is unusable input unless allow_missing: a CI gate must not pass because a
    point vanished. Points only in the current results (new ones) are reported and not gated.

    thresholds: metric name (or alias) -> signed percentage in the bad direction; None means
    DEFAULT_THRESHOLDS (output_tokens_per_s -5, tpot_p99_ms +10, startup_s +20,
    graph_memory_bytes +10). Only these metrics are gated.

    The baseline may hold several runs of the same points (a history folder): their processes are
    pooled, so the noise floor is the spread across runs as well as rounds.
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
    result = compare_sets(baseline, current, metrics=list(limits), alpha=alpha, allow_mismatch=allow_mismatch,
                          min_effects=limits)
    if result.matching.failed:
        more = f" (and {len(result.matching.failed) - 1} more)" if len(result.matching.failed) > 1 else ""
        raise GraphbenchError(f"failed benchmark point: {result.matching.failed[0]}{more}")
    if not result.matching.pairs:
        raise GraphbenchError("no benchmark point (label, system) is in both the baseline and the current results"
                              + other_gpu_types(result.matching))
    # Peers are references, measured in one process of a sweep's first round: they do not change with
    # graphbench's code, and one process a side can never be judged. The gate checks graphbench's points.
    peers = sorted({c.point for c in result.comparisons if c.system != "graphbench"})
    result.comparisons = [c for c in result.comparisons if c.system == "graphbench"]
    peer_warning = [f"{len(peers)} peer point(s) not gated (references, one process each): {', '.join(peers)}"] if peers else []
    # (a baseline point of a GPU type the current results never ran on is another machine's, not a vanished point)
    ran_on = {result_gpu(r) for r in current}
    missing = [f"point {p.name}" for p in result.matching.only_baseline
               if p.system == "graphbench" and (p.gpu is None or p.gpu in ran_on)]
    missing += [f"workload {name}" for name in result.missing_workloads if "(graphbench):" in name]
    if missing and not allow_missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise GraphbenchError(f"{missing[0]}{more} is in the baseline but not in the current results (not run, or "
                              "its file was skipped as malformed); pass --allow-missing to gate the others")
    defaults = [k for k, v in limits.items() if DEFAULT_THRESHOLDS.get(k) == v]
    checks, gwarn = gate_comparisons(result.comparisons, limits, quiet=defaults)
    if not checks:
        raise GraphbenchError(f"nothing to gate: none of {', '.join(limits)} is in the matched results")
    return GateReport(checks, bwarn + cwarn + result.warnings + peer_warning + gwarn, limits, alpha,
                      [str(p) for p in bpaths], [str(p) for p in cpaths], allow_mismatch,
                      len(result.matching.pairs))
