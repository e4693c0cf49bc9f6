"""Measured repeats of a workload, each long enough to average the host's jitter.

A closed-loop pass of 4 x C requests lasts 0.3-0.5 s for graphbench's graph modes on an H200. Steps
that run without a graph (prefill chunks above the ladder) are host-bound, and the host slows down
in short episodes (a 7 ms step taking 15 ms, a few times a second): in a repeat that short, one
repeat with two or three such steps more than the others is 3-5% slower. Like timeit's autorange
and pyperf's loop calibration, the repeats are made longer instead of more numerous: the first
measured pass tells how long a pass takes, and when it is shorter than the target every repeat
runs `scale` times the requests (the same seeded request stream, drawn further). A pass already as
long as the target is kept as the first repeat, so slow systems pay nothing for the calibration.

Only closed loops scale: an open loop's length is set by its arrival times, a trace's by the trace.

Opt-in (`--target-repeat-s 1`): at 1 s the default H200 sweep ran ~70 s longer, too close to its
10 minutes, and the one sweep measured with it (benchmarks/RESULTS.md, 2026-11-30, f223cf3) ran on a host
so unsteady (-O0, the same code, spread 40% at C = 64 against 0.2% on the machine before) that it
showed nothing either way.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from graphbench.bench.host_load import flag_busy_repeats
from graphbench.bench.metrics import spread_pct, summarize
from graphbench.bench.workloads import Workload
from graphbench.reports.rounds import first_round_outlier

# run_once(workload, seed_offset) -> one repeat's metrics (with "duration_s")
RunOnce = Callable[[Workload, int], dict[str, Any]]


def repeat_scale(pass_s: float, target_repeat_s: float) -> int:
    """How many times the requests a repeat should run so that it lasts about target_repeat_s, given
    that one pass took pass_s: round(target / pass), at least 1 (no target, or a long pass: 1)."""
    if target_repeat_s <= 0 or pass_s <= 0 or pass_s >= target_repeat_s:
        return 1
    return max(1, round(target_repeat_s / pass_s))


def scaled(workload: Workload, scale: int) -> Workload:
    """The workload with scale x its requests (closed loops only; others are returned as they are)."""
    if scale == 1 or workload.kind != "closed":
        return workload
    return replace(workload, num_requests=scale * len(workload.requests()))


def measure_repeats(run_once: RunOnce, workload: Workload, repeats: int, target_repeat_s: float = 0.0,
                    progress: Callable[[str], None] = lambda message: None) -> tuple[Workload, list[dict], dict]:
    """Run `repeats` measured repeats (after the caller's warm-up); return the workload as measured
    (scaled or not), the repeats' metrics and the calibration record."""
    calibrates = target_repeat_s > 0 and workload.kind == "closed"
    results: list[dict] = []
    scale, first_pass_s = 1, None
    if calibrates:
        progress(f"{workload.name}: repeat 1/{repeats}")
        first = run_once(workload, 0)
        first_pass_s = first["duration_s"]
        scale = repeat_scale(first_pass_s, target_repeat_s)
        if scale == 1:
            results.append(first)  # long enough: it is the first repeat
        else:
            progress(f"{workload.name}: a pass takes {first_pass_s:.2f} s; {scale} x the requests per repeat "
                     f"(about {target_repeat_s:g} s)")
    measured = scaled(workload, scale)
    for i in range(len(results), repeats):
        progress(f"{workload.name}: repeat {i + 1}/{repeats}")
        results.append(run_once(measured, i))
    calibration = {"target_repeat_s": target_repeat_s if calibrates else None, "first_pass_s": first_pass_s,
                   "scale": scale}
    return measured, results, calibration


def workload_record(measured: Workload, repeats: list[dict], calibration: dict) -> dict[str, Any]:
    """A measured workload as its result records it: the workload, its repeats (each flagged
    "busy_host" when it ran on a contended host), their summary, the calibration, and the output
    tokens/s spread of the repeats that ran on a quiet host (None when fewer than 2 did)."""
    busy = flag_busy_repeats(repeats)
    quiet = [r["output_tokens_per_s"] for i, r in enumerate(repeats) if i not in busy]
    quiet_spread = spread_pct(quiet) if len(quiet) >= 2 else None
    outlier = first_round_outlier([r.get("output_tokens_per_s") for r in repeats])
    kept = repeats[1:] if outlier else repeats
    return dict(measured.to_dict(), repeats=repeats, summary=summarize(kept), calibration=calibration,
                busy_host_repeats=busy, quiet_spread_pct=quiet_spread,
                outlier_repeats={"0": outlier.replace("round", "repeat")} if outlier else {})
