"""Whether two sides measured graph memory alike (no torch).

Results written since 2026-12-06 carry `startup.graph_setup_bytes`: every start counts the capture
stream's cuBLAS setup in its graph memory. Before, a warm start's reading held it (its first recording paid
it) and a cold start's did not (its kernel-choice timing had), ~100 MiB apart on an H100 (benchmarks/
RESULTS.md, 2026-12-06). Graph memory across that change compares two measurements, not two codes: compare
and gate call it n/a with this reason rather than a regression or an improvement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from graphbench.reports.rounds import processes

SETUP_FIELD = "graph_setup_bytes"
SINCE = "2026-12-06"
METRIC = "graph_memory_bytes"


def setup_counted(results: Iterable[Mapping[str, Any]]) -> set[bool]:
    """For each process that recorded graph memory: whether its start counted the setup (the field is there);
    more than one value: the results measured graph memory two ways."""
    counted = set()
    for process in (p for result in results for p in processes(result)):
        startup = process.get("startup")
        if isinstance(startup, Mapping) and (startup.get(METRIC) or 0) > 0:
            counted.add(SETUP_FIELD in startup)
    return counted


CAPTURE_METRICS = (METRIC, "capture_s")  # what only a GPU records: a CPU's 0 is no measurement


def unlike_measurements(metric: str, baseline: Iterable[Mapping[str, Any]],
                        current: Iterable[Mapping[str, Any]]) -> str | None:
    """Why the two sides' graph memory (or capture time) cannot be compared (None: measured alike, or another
    metric): measured two ways, or not at all (every result of both sides ran on a CPU and recorded 0: a CPU
    records no graph, and its 0 on both sides was counted as a tie, and among a CPU gate's passes)."""
    baseline, current = list(baseline), list(current)
    if metric in CAPTURE_METRICS and all(_on_cpu(r) and not _recorded(r, metric) for r in baseline + current):
        return "not measured: a CPU records no CUDA graph"
    if metric != METRIC:
        return None
    sides = {"baseline": setup_counted(baseline), "current": setup_counted(current)}
    if not all(sides.values()) or len(sides["baseline"] | sides["current"]) == 1:
        return None
    older = " and ".join(name for name, counted in sides.items() if False in counted)
    return (f"graph memory measured two ways: the {older} results hold starts from before {SINCE} (no "
            f"{SETUP_FIELD}: only warm starts counted the capture stream's cuBLAS setup); rerun that side")


def _recorded(result: Mapping[str, Any], metric: str) -> bool:
    """Whether any start of the result's processes recorded something of the metric (not 0)."""
    return any(isinstance(p.get("startup"), Mapping) and p["startup"].get(metric) for p in processes(result))


def _on_cpu(result: Mapping[str, Any]) -> bool:
    environment = result.get("environment")
    return isinstance(environment, Mapping) and environment.get("device") == "cpu"
