"""Serving metrics from request timestamps and step records (pure Python)."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any, Iterable

from graphbench.reports.stats import iqr, quantile

SUMMARY_PERCENTILES = {"tpot_ms": ("p50", "p99"), "ttft_ms": ("p50", "p99"), "itl_ms": ("p99",),
                       "e2e_ms": ("p99",), "step_ms": ("p50",)}


def distribution(values: list[float]) -> dict[str, float]:
    """mean, p50, p90, p99 of a list (NaN when empty)."""
    if not values:
        nan = float("nan")
        return {"mean": nan, "p50": nan, "p90": nan, "p99": nan}
    return {"mean": statistics.fmean(values), "p50": quantile(values, 0.5), "p90": quantile(values, 0.9),
            "p99": quantile(values, 0.99)}


def request_metrics(requests: Iterable[Any]) -> dict[str, Any]:
    """TTFT, TPOT, ITL and end-to-end latency (ms) from finished requests' timestamps."""
    requests = list(requests)
    ttft, tpot, itl, e2e = [], [], [], []
    for r in requests:
        ttft.append((r.first_token_time - r.arrival_time) * 1e3)
        e2e.append((r.finish_time - r.arrival_time) * 1e3)
        n = len(r.token_times)
        if n > 1:
            tpot.append((r.finish_time - r.first_token_time) / (n - 1) * 1e3)
            itl += [(b - a) * 1e3 for a, b in zip(r.token_times, r.token_times[1:])]
    ended_at_stop = sum(getattr(r, "finish_reason", None) == "stop" for r in requests)
    return {"ttft_ms": distribution(ttft), "tpot_ms": distribution(tpot), "itl_ms": distribution(itl),
            "e2e_ms": distribution(e2e),
            # (text prompts end at the model's eos: how long the outputs were, and how many it ended)
            "mean_output_tokens": statistics.fmean(_output_len(r) for r in requests) if requests else 0.0,
            "stopped_at_eos_share": ended_at_stop / len(requests) if requests else 0.0}


def _output_len(request: Any) -> int:
    """An engine request's output tokens, or a peer's timed request's output length."""
    tokens = getattr(request, "output_token_ids", None)
    return len(tokens) if tokens is not None else request.output_len


def step_metrics(records: list[Any]) -> dict[str, Any]:
    """Step time, padding actually paid, eager fraction, batch-size histogram from step records."""
    if not records:
        return {"num_steps": 0}
    real = [r.descriptor.num_tokens for r in records]
    padded = [r.padded_tokens for r in records]
    modes = Counter(r.runtime_mode for r in records)
    return {
        "num_steps": len(records),
        "step_ms": distribution([r.seconds * 1e3 for r in records]),
        # the ladder's definition: (padded - n) / padded per batch, eager batches count 0
        "padding_waste_pct": 100 * statistics.fmean((p - n) / p for p, n in zip(padded, real)),
        # token-weighted: the share of all tokens the steps computed that were padding (what the GPU wasted)
        "padding_token_pct": 100 * (sum(padded) - sum(real)) / sum(padded),
        "padding_overhead": sum(padded) / sum(real) - 1,
        "eager_fraction": modes.get("NONE", 0) / len(records),
        # capture on demand: the steps that waited for a recording, and how long in all
        "capture_stalls": sum(1 for r in records if r.capture_seconds > 0),
        "capture_stall_ms": 1e3 * sum(r.capture_seconds for r in records),
        "runtime_modes": dict(sorted(modes.items())),
        # the uniform steps (every request decoding 1 + k tokens): what a FULL recording is for
        "uniform_runtime_modes": dict(sorted(Counter(r.runtime_mode for r in records if r.descriptor.uniform).items())),
        "batch_size_histogram": _histogram(real),
        # the same per phase (ladders/phases.py): uniform decode steps, and mixed / prefill steps
        "decode_size_histogram": _histogram(r.descriptor.num_tokens for r in records if r.descriptor.uniform),
        "mixed_size_histogram": _histogram(r.descriptor.num_tokens for r in records if not r.descriptor.uniform),
        # where a slow repeat lost its time: per runtime mode, and the slowest steps themselves
        "step_ms_by_mode": {mode: _mode_times([r for r in records if r.runtime_mode == mode]) for mode in sorted(modes)},
        "slowest_steps": [{"ms": r.seconds * 1e3, "launch_ms": r.launch_seconds * 1e3, "num_tokens": r.descriptor.num_tokens,
                           "runtime_mode": r.runtime_mode}
                          for r in sorted(records, key=lambda r: -r.seconds)[:NUM_SLOWEST_STEPS]],
    }


NUM_SLOWEST_STEPS = 5


def _histogram(sizes) -> dict[str, int]:
    return {str(k): v for k, v in sorted(Counter(sizes).items())}


def _mode_times(records: list[Any]) -> dict[str, float]:
    """Step-time distribution of these steps, their count, total, and the host's launching part of the total."""
    ms = [r.seconds * 1e3 for r in records]
    return dict(distribution(ms), n=len(ms), total_ms=sum(ms), launch_total_ms=sum(r.launch_seconds * 1e3 for r in records))


def summarize(repeats: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """median, IQR, min, max, spread % and n over repeats for every scalar metric (and key percentiles), over
    the repeats that have it (a NaN is a statistic of no samples)."""
    flat: dict[str, list[float]] = {}
    for rep in repeats:
        for key, value in rep.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                flat.setdefault(key, []).append(float(value))
        for key, pcts in SUMMARY_PERCENTILES.items():
            for p in pcts:
                if key in rep:
                    flat.setdefault(f"{key[:-3]}_{p}_ms", []).append(rep[key][p])
    summary = {}
    for key, values in flat.items():
        # a statistic of no samples (NaN: no TPOT where every output is one token) is absent, not summarised
        values = [v for v in values if v == v]
        if not values:
            continue
        median = statistics.median(values)
        summary[key] = {
            "median": median, "iqr": iqr(values),
            "min": min(values), "max": max(values),
            "spread_pct": spread_pct(values), "n": len(values)}
    return summary


def spread_pct(values: list[float]) -> float:
    """(max - min) / median of the values, in % (0 when the median is 0)."""
    median = statistics.median(values)
    return 100 * (max(values) - min(values)) / median if median else 0.0
