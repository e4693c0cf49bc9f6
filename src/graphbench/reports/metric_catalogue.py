"""The metric catalogue: what compare and gate can measure in a result file (docs/RESULTS_SCHEMA.md).

Two scopes:
- "repeat": one sample per repeat of a workload (`workloads[i].repeats[j]`), e.g.
  `output_tokens_per_s`, or `tpot_p99_ms` = repeats[j]["tpot_ms"]["p99"]. Compared per
  (label, system, workload name).
- "point": one value per benchmark point (per result file), e.g. `startup_s` = startup.total_s.
  Compared per (label, system).

Every metric has a unit and a direction (higher_is_better). Short aliases (`tokens_per_s`,
`tpot_p99`, `startup`, `graph_memory`, ...) are accepted wherever a metric is named.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any

from graphbench.errors import GraphbenchError

REPEAT = "repeat"
POINT = "point"


@dataclass(frozen=True)
class Metric:
    name: str
    scope: str  # REPEAT or POINT
    path: tuple[str, ...]  # keys inside a repeat (REPEAT) or inside the result (POINT)
    unit: str  # "tok/s", "ms", "s", "bytes", "%", "fraction"
    higher_is_better: bool
    description: str
    # the smallest step its readings take, in its unit: a difference of one step is no evidence of a change
    # (reports/verdict.noise_floor)
    resolution: float = 0.0

    @property
    def direction(self) -> str:
        return "higher-is-better" if self.higher_is_better else "lower-is-better"

    def _get(self, data: Any, where: str) -> float | None:
        for key in self.path:
            if not isinstance(data, dict) or key not in data:
                return None
            data = data[key]
        if data is None:
            return None
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise GraphbenchError(f"{where}: {'.'.join(self.path)} is {data!r}, not a number")
        value = float(data)
        if math.isnan(value):
            return None
        return value

    def repeat_samples(self, workload: dict[str, Any], where: str = "result") -> list[float]:
        """One sample per repeat that has this metric (REPEAT scope)."""
        if self.scope != REPEAT:
            raise GraphbenchError(f"{self.name} is a per-point metric, not a per-repeat one")
        repeats = workload.get("repeats") or []
        if not isinstance(repeats, list):
            raise GraphbenchError(f"{where}: workload {workload.get('name')!r}: repeats is not a list")
        values = [self._get(r, f"{where}: workload {workload.get('name')!r}") for r in repeats]
        return [v for v in values if v is not None]

    def point_value(self, result: dict[str, Any], where: str = "result") -> float | None:
        """The single value of this metric for a point (POINT scope); None when absent."""
        if self.scope != POINT:
            raise GraphbenchError(f"{self.name} is a per-repeat metric, not a per-point one")
        return self._get(result, where)


def _r(name: str, path: tuple[str, ...], unit: str, higher: bool, description: str,
       resolution: float = 0.0) -> Metric:
    return Metric(name, REPEAT, path, unit, higher, description, resolution)


def _p(name: str, path: tuple[str, ...], unit: str, higher: bool, description: str,
       resolution: float = 0.0) -> Metric:
    return Metric(name, POINT, path, unit, higher, description, resolution)


# Graph memory is read from the driver (free memory before and after), which maps it in 2 MiB pages: two
# sweeps of one commit on an H100 read 254 and 256 MiB of graph memory, each the same in all its 4 processes
# (benchmarks/RESULTS.md, 2026-12-06, the capture stream's first cuBLAS call).
MEMORY_PAGE_BYTES = 2 * 2**20


CATALOGUE: tuple[Metric, ...] = (
    _r("output_tokens_per_s", ("output_tokens_per_s",), "tok/s", True, "generated tokens per second"),
    _r("total_tokens_per_s", ("total_tokens_per_s",), "tok/s", True, "prompt + generated tokens per second"),
    _r("duration_s", ("duration_s",), "s", False, "wall time of the workload"),
    _r("step_p50_ms", ("step_ms", "p50"), "ms", False, "median engine step time (from the last step's end while busy)"),
    _r("step_p99_ms", ("step_ms", "p99"), "ms", False, "p99 engine step time"),
    _r("ttft_p50_ms", ("ttft_ms", "p50"), "ms", False, "median time to first token"),
    _r("ttft_p99_ms", ("ttft_ms", "p99"), "ms", False, "p99 time to first token"),
    _r("tpot_p50_ms", ("tpot_ms", "p50"), "ms", False, "median time per output token"),
    _r("tpot_p99_ms", ("tpot_ms", "p99"), "ms", False, "p99 time per output token"),
    _r("itl_p99_ms", ("itl_ms", "p99"), "ms", False, "p99 inter-token latency"),
    _r("e2e_p99_ms", ("e2e_ms", "p99"), "ms", False, "p99 end-to-end request latency"),
    _r("full_step_ms", ("step_ms_by_mode", "FULL", "mean"), "ms", False,
       "mean replayed FULL-graph step (what a ladder or mode changes; steady on a GPU)"),
    _r("piecewise_step_ms", ("step_ms_by_mode", "PIECEWISE", "mean"), "ms", False,
       "mean piecewise-graph step (mixed and prefill steps: follow the host)"),
    _r("eager_step_ms", ("step_ms_by_mode", "NONE", "mean"), "ms", False, "mean eager step"),
    _r("padding_waste_pct", ("padding_waste_pct",), "%", False, "mean padding waste per step"),
    _r("eager_fraction", ("eager_fraction",), "fraction", False, "fraction of steps that ran eager"),
    _r("peak_memory_bytes", ("peak_memory_bytes",), "bytes", False, "peak device memory"),
    _p("startup_s", ("startup", "total_s"), "s", False, "start-up time (load + compile + capture)"),
    _p("capture_s", ("startup", "capture_s"), "s", False, "CUDA-graph capture time"),
    _p("graph_memory_bytes", ("startup", "graph_memory_bytes"), "bytes", False, "memory taken by the graphs",
       MEMORY_PAGE_BYTES),
)

METRICS: dict[str, Metric] = {m.name: m for m in CATALOGUE}

ALIASES: dict[str, str] = {
    "tokens_per_s": "output_tokens_per_s",
    "output_tokens": "output_tokens_per_s",
    "throughput": "output_tokens_per_s",
    "total_tokens": "total_tokens_per_s",
    "tpot_p99": "tpot_p99_ms",
    "tpot_p50": "tpot_p50_ms",
    "ttft_p99": "ttft_p99_ms",
    "ttft_p50": "ttft_p50_ms",
    "itl_p99": "itl_p99_ms",
    "e2e_p99": "e2e_p99_ms",
    "step_p50": "step_p50_ms",
    "step_p99": "step_p99_ms",
    "startup": "startup_s",
    "capture": "capture_s",
    "graph_memory": "graph_memory_bytes",
    "full_step": "full_step_ms",
    "graph_step": "full_step_ms",
    "peak_memory": "peak_memory_bytes",
}


def metric_names() -> list[str]:
    return [m.name for m in CATALOGUE]


def closest_metric(name: str) -> str | None:
    """The catalogue name (or alias target) closest to name, if any is reasonably close."""
    candidates = metric_names() + list(ALIASES)
    match = difflib.get_close_matches(name.lower(), candidates, n=1, cutoff=0.5)
    if not match:
        return None
    return ALIASES.get(match[0], match[0])


def resolve_metric(name: str) -> Metric:
    """A metric by name or alias; GraphbenchError naming the closest metric otherwise."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key in METRICS:
        return METRICS[key]
    hint = closest_metric(name.strip())
    if hint:
        raise GraphbenchError(f"unknown metric {name!r}; did you mean {hint!r}?")
    raise GraphbenchError(f"unknown metric {name!r} (known: {', '.join(metric_names())})")
