"""Gate thresholds: the defaults and METRIC:PCT specs, checked against each metric's direction. No torch.

Thresholds are signed percentages in the bad direction: negative for higher-is-better metrics
(output_tokens_per_s: -5 means "a drop of more than 5 %"), positive for lower-is-better ones.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from graphbench.ascii_numbers import plain
from graphbench.errors import GraphbenchError
from graphbench.reports.metric_catalogue import resolve_metric

DEFAULT_THRESHOLDS: dict[str, float] = {
    "output_tokens_per_s": -5.0,
    "tpot_p99_ms": 10.0,
    "startup_s": 20.0,
    "graph_memory_bytes": 10.0,
    # the replayed decode step: where graphs run, a slower decode kernel shows here first (a -O2 step
    # 9-15% slower moved it +10 to +15%; two A/A sweeps at most 3.5%, always within their noise, on an
    # H200: benchmarks/RESULTS.md, 2026-12-04), so a 5% slowdown is caught; absent on the CPU (no graphs)
    "full_step_ms": 3.0,
}
OFF = ("off", "none", "disable", "disabled")
# The smallest change compare calls a difference for a metric the gate does not gate by default (asv's
# factor); a gated metric's is its threshold, so that compare and gate call the same rows.
DEFAULT_MIN_EFFECT_PCT = 5.0


def min_effect_pct(metric_name: str) -> float:
    """The smallest change (%) of a metric that compare calls a difference."""
    name = resolve_metric(metric_name).name
    return abs(DEFAULT_THRESHOLDS[name]) if name in DEFAULT_THRESHOLDS else DEFAULT_MIN_EFFECT_PCT


def normalize_thresholds(thresholds: Mapping[str, float]) -> dict[str, float]:
    """Resolve names/aliases to catalogue names; check each sign against the metric's direction."""
    out: dict[str, float] = {}
    for name, value in thresholds.items():
        metric = resolve_metric(name)
        try:
            pct = float(value)
        except (TypeError, ValueError):
            raise GraphbenchError(f"threshold for {metric.name} is not a number: {value!r}") from None
        if not math.isfinite(pct):
            raise GraphbenchError(f"threshold for {metric.name} must be finite, got {value!r}")
        if metric.higher_is_better and pct > 0:
            raise GraphbenchError(
                f"threshold for {metric.name} must be <= 0: it is higher-is-better, so the bad direction "
                f"is a drop (e.g. {metric.name}:-{pct:g})")
        if metric.higher_is_better and pct <= -100:  # a value cannot drop by more than all of it
            raise GraphbenchError(
                f"threshold for {metric.name} must be above -100: a drop beyond {pct:g}% never happens, so it "
                f"could never fail (to stop gating it: {metric.name}:off)")
        if not metric.higher_is_better and pct < 0:
            raise GraphbenchError(
                f"threshold for {metric.name} must be >= 0: it is lower-is-better, so the bad direction "
                f"is a rise (e.g. {metric.name}:{-pct:g})")
        out[metric.name] = pct
    return out


def parse_threshold(spec: str) -> tuple[str, float | None]:
    """'tokens_per_s:-5' -> ('output_tokens_per_s', -5.0); 'startup:off' -> ('startup_s', None)."""
    name, sep, value = spec.partition(":")
    if not sep or not name.strip() or not value.strip():
        raise GraphbenchError(f"bad threshold {spec!r}: expected METRIC:PCT, e.g. output_tokens_per_s:-5")
    metric = resolve_metric(name)
    text = value.strip().rstrip("%").strip()
    if text.lower() in OFF:
        return metric.name, None
    try:
        if not plain(text):  # (ascii_numbers.py)
            raise ValueError(text)
        pct = float(text)
    except ValueError:
        raise GraphbenchError(f"bad threshold {spec!r}: {value!r} is not a percentage (or 'off')") from None
    return metric.name, normalize_thresholds({metric.name: pct})[metric.name]


def thresholds_from_specs(specs: Iterable[str], base: Mapping[str, float] | None = None) -> dict[str, float]:
    """The default thresholds (or base) updated by METRIC:PCT specs; METRIC:off drops a metric."""
    out = dict(DEFAULT_THRESHOLDS if base is None else base)
    given: dict[str, str] = {}
    for spec in specs:
        name, pct = parse_threshold(spec)
        if (first := given.setdefault(name, spec)) != spec:  # (the later one silently won)
            raise GraphbenchError(f"threshold for {name} given twice ({first!r} and {spec!r}): give it once")
        if pct is None:
            out.pop(name, None)
        else:
            out[name] = pct
    return out


def threshold_text(pct: float) -> str:
    """A threshold as shown in reasons and reports: -5.0 -> '-5%'."""
    return f"{pct:+g}%"
