"""Graph memory predicted from a few captures, two ways, against what the whole ladder took.

Both read a capture log: per dispatcher key in capture order (largest first), its mode and the
free device memory it took (`startup.capture_log`).

- **vLLM's estimate** (its CUDA-graph memory profiler, `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`, as
  described in vllm-project/vllm#45178): per mode, capture the first two graphs; the first one's
  memory is that mode's shared part, the second's (at least 1 MiB) its per-graph part, extrapolated
  linearly: estimate = max over modes of the shared parts + sum over modes of per_graph * (N_mode - 1).
- **graphbench's model**: a fixed pool plus a per-graph term per mode. The first graph of the
  process pays the pool (sized by the largest recording, which is captured first) and the first
  capture's one-off costs (benchmarks/RESULTS.md, 2026-11-29, 7f098e0); the later graphs of each mode
  follow a line (intercept + per graph), the least-squares fit of their cumulative memory over that
  mode's first `fit_graphs` graphs after the pool. A graph that reuses freed pool blocks takes
  ~nothing, one that grows the pool takes a lot: more samples than one keep the line from resting
  on either.

Pure Python; no torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from graphbench.errors import GraphbenchError

MIB = 1 << 20
VLLM_MIN_PER_GRAPH = MIB  # vLLM floors the per-graph sample at 1 MiB
FIT_GRAPHS = 8


@dataclass(frozen=True, slots=True)
class CaptureRow:
    mode: str
    num_tokens: int
    seconds: float
    memory_bytes: int


def capture_rows(log: Sequence[Sequence]) -> list[CaptureRow]:
    """A result's `startup.capture_log` as rows, checked."""
    rows = []
    for i, row in enumerate(log):
        if not (isinstance(row, (list, tuple)) and len(row) == 4 and isinstance(row[0], str)
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in row[1:])):
            raise GraphbenchError(f"capture_log row {i} must be [mode, num_tokens, seconds, memory bytes], got {row!r}")
        rows.append(CaptureRow(row[0], int(row[1]), float(row[2]), int(row[3])))
    if not rows:
        raise GraphbenchError("the capture log is empty: nothing was captured")
    return rows


def _by_mode(rows: list[CaptureRow]) -> dict[str, list[CaptureRow]]:
    modes: dict[str, list[CaptureRow]] = {}
    for row in rows:
        modes.setdefault(row.mode, []).append(row)
    return modes


def vllm_estimate(rows: list[CaptureRow]) -> float:
    """vLLM's two-sample linear extrapolation (bytes)."""
    shared, per_graph = [], 0.0
    for mode_rows in _by_mode(rows).values():
        shared.append(mode_rows[0].memory_bytes)
        if len(mode_rows) > 1:
            per_graph += max(mode_rows[1].memory_bytes, VLLM_MIN_PER_GRAPH) * (len(mode_rows) - 1)
    return max(shared) + per_graph


def _line(values: list[int]) -> tuple[float, float]:
    """(intercept, slope) of the cumulative sum of values against the count, least squares, both
    non-negative; one value: (0, value)."""
    if len(values) < 2:
        return 0.0, float(values[0]) if values else 0.0
    cumulative, total = [], 0
    for v in values:
        total += v
        cumulative.append(total)
    xs = range(1, len(values) + 1)
    mx, my = (len(values) + 1) / 2, math.fsum(cumulative) / len(values)
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    slope = max(math.fsum((x - mx) * (y - my) for x, y in zip(xs, cumulative)) / sxx, 0.0)
    return max(my - slope * mx, 0.0), slope


@dataclass(frozen=True, slots=True)
class PoolModel:
    """graphbench's graph memory model: a fixed pool, plus per mode a line (intercept, per graph) in
    the number of that mode's graphs after the pool (bytes)."""

    fixed_bytes: float
    per_mode: dict[str, tuple[float, float]]
    first_mode: str

    def predict(self, counts: dict[str, int]) -> float:
        """Graph memory of a ladder with counts[mode] graphs per mode."""
        total = self.fixed_bytes
        for mode, n in counts.items():
            later = n - 1 if mode == self.first_mode else n
            if later > 0:
                intercept, slope = self.per_mode.get(mode, (0.0, 0.0))
                total += intercept + slope * later
        return total


def fit_pool_model(rows: list[CaptureRow], fit_graphs: int = FIT_GRAPHS) -> PoolModel:
    """Fit the pool model from the first fit_graphs captures of each mode after the pool."""
    first = rows[0]
    per_mode = {}
    for mode, mode_rows in _by_mode(rows).items():
        later = [r.memory_bytes for r in (mode_rows[1:] if mode == first.mode else mode_rows)][:fit_graphs]
        per_mode[mode] = _line(later)
    return PoolModel(float(first.memory_bytes), per_mode, first.mode)


@dataclass(frozen=True, slots=True)
class MemoryPrediction:
    """Both predictions of one ladder's graph memory and what it took (bytes)."""

    measured_bytes: int
    vllm_bytes: float
    graphbench_bytes: float
    counts: dict[str, int]

    def error_pct(self, predicted: float) -> float:
        return 100 * (predicted / self.measured_bytes - 1)


def predict_from_log(log: Sequence[Sequence], measured_bytes: int, fit_graphs: int = FIT_GRAPHS,
                     setup_bytes: int = 0) -> MemoryPrediction:
    """Both predictions from a capture log's first graphs, against the measured total. setup_bytes
    (`startup.graph_setup_bytes`): the capture stream's cuBLAS setup, which the measured total counts and
    the log's first row no longer does (paid before the recordings): put back in that row, as a capture
    whose first recording paid it would have shown it to both."""
    rows = capture_rows(log)
    rows[0] = replace(rows[0], memory_bytes=rows[0].memory_bytes + setup_bytes)
    counts = {mode: len(r) for mode, r in _by_mode(rows).items()}
    model = fit_pool_model(rows, fit_graphs)
    return MemoryPrediction(int(measured_bytes), vllm_estimate(rows), model.predict(counts), counts)
