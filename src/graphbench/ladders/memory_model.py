"""The graph-memory model a tune and the report's KV trade weigh ladders with, fitted from measured capture
results. Pure Python; no torch.

A ladder's graph memory is modelled as a fixed part c plus the
sum over its sizes of (a + b * size). The fixed part is what every ladder pays alike: on the H200 the
pool is sized by the largest recording (which every ladder keeps) and the first capture in a process
costs ~95 MiB whatever the ladder (benchmarks/RESULTS.md, 2026-11-29, 15cac0e). Each measured result gives one
equation graph_memory_bytes = c + a * count + b * sum(sizes) over its ``startup.capture_sizes``;
c, a, b are the least-squares fit constrained to be non-negative (the best over the subsets of the
three terms). Where the data cannot tell terms apart (one ladder shape, collinear shapes) the fit
with fewer terms wins, per-graph first.
One model's results on one GPU type only: a fit over several would be none of theirs (a result that does not
say its model or GPU, written before they were recorded, counts as the others'); and of one measurement
(results from before 2026-12-06, without `startup.graph_setup_bytes`, are not fitted with newer ones).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from graphbench.errors import GraphbenchError


@dataclass(frozen=True, slots=True)
class MemoryModel:
    """Graph memory of a ladder: fixed_bytes, plus per_graph_bytes per size and per_token_bytes per
    token of each size."""

    per_graph_bytes: float
    per_token_bytes: float
    num_points: int = 0
    rms_error_bytes: float = 0.0
    note: str = ""
    fixed_bytes: float = 0.0
    model: str = ""  # whose graphs were measured, on which GPU type ('' where the results do not say)
    gpu: str = ""

    def predict(self, sizes: Sequence[int]) -> float:
        return self.fixed_bytes + len(sizes) * self.per_graph_bytes + self.per_token_bytes * sum(sizes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def one_ladder_fully_captured(startup: Mapping[str, Any]) -> bool:
    """The start-up recorded every key of one ladder (not two ladders, nothing left for first use)."""
    return not isinstance(startup.get("mixed_capture_sizes"), list) and not startup.get("deferred_recordings")


def memory_points(results: Iterable[Mapping[str, Any]]) -> list[tuple[int, int, float]]:
    """(number of sizes, sum of sizes, graph_memory_bytes) of each result that captured graphs."""
    return [point for result in results if (point := _memory_point(result)) is not None]


def _memory_point(result: Mapping[str, Any]) -> tuple[int, int, float] | None:
    startup = result.get("startup") or {}
    sizes = startup.get("capture_sizes") or []
    memory = startup.get("graph_memory_bytes")
    mode = (startup.get("cudagraph_mode") or {}).get("resolved")
    graphs = startup.get("num_graphs")
    if isinstance(graphs, Mapping) and not sum(v for v in graphs.values() if isinstance(v, (int, float))):
        return None
    ok_sizes = isinstance(sizes, list) and all(isinstance(s, int) and s > 0 for s in sizes)
    if mode == "NONE" or not sizes or not ok_sizes or not isinstance(memory, (int, float)) or memory <= 0:
        return None
    if not one_ladder_fully_captured(startup):
        return None  # two ladders' graphs, or keys left for later: its memory is not that of capture_sizes
    return len(sizes), sum(sizes), float(memory)


def memory_source(result: Mapping[str, Any]) -> tuple[str, str]:
    """(model, GPU type) of a result, as the reports name them ('?' and '' where it does not say): graph memory is
    one model's on one GPU type, never a pool of several."""
    from graphbench.reports.point_names import result_model
    from graphbench.reports.rounds import result_gpu

    return result_model(result), result_gpu(result)


# the terms of the model, in the order a tie between equally good fits is broken: fewer terms first,
# then per-graph before per-token before fixed
_TERMS = {"a": lambda k, s: k, "b": lambda k, s: s, "c": lambda k, s: 1.0}
_SUBSETS = [("a",), ("b",), ("c",), ("a", "b"), ("c", "a"), ("c", "b"), ("c", "a", "b")]


def fit_memory_model(results: Iterable[Mapping[str, Any]]) -> MemoryModel:
    """Least-squares c, a, b >= 0 in graph_memory_bytes = c + a * count + b * sum(sizes) (see the module
    docstring)."""
    measured = [(result, point) for result in results if (point := _memory_point(result)) is not None]
    points = [point for _, point in measured]
    if not points:
        raise GraphbenchError(
            "no result with captured graphs (startup.capture_sizes and graph_memory_bytes > 0) to fit "
            "the graph-memory model"
        )
    sources = sorted({memory_source(result) for result, _ in measured})
    # a result that does not say its model or GPU (written before they were recorded) is no other one's
    models, gpus = sorted({m for m, _ in sources if m != "?"}), sorted({g for _, g in sources if g})
    if len(models) > 1 or len(gpus) > 1:
        named = "; ".join(f"{model} on {gpu or 'the CPU'}" for model, gpu in sources[:4])
        raise GraphbenchError(f"graph memory measured for {len(sources)} models or GPU types ({named}): a memory "
                              "model is one model's on one GPU type; give the results of one")
    from graphbench.reports.graph_memory_measure import SETUP_FIELD, SINCE, setup_counted

    if len(setup_counted(result for result, _ in measured)) > 1:
        raise GraphbenchError(
            f"graph memory measured two ways: some results are from before {SINCE} (no startup.{SETUP_FIELD}: "
            "only their warm starts counted the capture stream's cuBLAS setup); fit results of one measurement")
    fits = [fit for subset in _SUBSETS if (fit := _least_squares(points, subset)) is not None]
    tie = 1e-9 * math.fsum(m * m for _, _, m in points)
    feasible = [f for f in fits if all(v >= 0 for v in f[1].values())]
    best_sse = min(sse for sse, _ in feasible)
    coef = next(c for sse, c in feasible if sse <= best_sse + tie)
    note = ""
    if len({(k, s) for k, s, _ in points}) == 1:
        note = "one ladder shape measured: memory modelled per graph only"
    elif min(sse for sse, _ in fits) < best_sse - tie:
        note = "least squares gave a negative coefficient; refitted with it at zero"
    a, b, c = coef.get("a", 0.0), coef.get("b", 0.0), coef.get("c", 0.0)
    rms = math.sqrt(_sse(points, a, b, c) / len(points))
    return MemoryModel(a, b, len(points), rms, note, c, models[0] if models else "", gpus[0] if gpus else "")


def _least_squares(points: list[tuple[int, int, float]], subset: tuple[str, ...]) -> tuple[float, dict] | None:
    """Unconstrained least squares over the given terms; None when they cannot be told apart."""
    rows = [[_TERMS[t](k, s) for t in subset] for k, s, _ in points]
    n = len(subset)
    gram = [[math.fsum(r[i] * r[j] for r in rows) for j in range(n)] for i in range(n)]
    rhs = [math.fsum(r[i] * m for r, (_, _, m) in zip(rows, points)) for i in range(n)]
    solution = _solve(gram, rhs)
    if solution is None:
        return None
    coef = dict(zip(subset, solution))
    return _sse(points, coef.get("a", 0.0), coef.get("b", 0.0), coef.get("c", 0.0)), coef


def _solve(matrix: list[list[float]], rhs: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None for a (numerically) singular matrix."""
    n = len(rhs)
    m = [row[:] + [v] for row, v in zip(matrix, rhs)]
    scale = max(abs(x) for row in matrix for x in row) or 1.0
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) <= 1e-12 * scale:
            return None
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(col + 1, n):
            factor = m[r][col] / m[col][col]
            for j in range(col, n + 1):
                m[r][j] -= factor * m[col][j]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - math.fsum(m[r][j] * x[j] for j in range(r + 1, n))) / m[r][r]
    return x


def _sse(points: list[tuple[int, int, float]], a: float, b: float, c: float = 0.0) -> float:
    return math.fsum((m - c - a * k - b * s) ** 2 for k, s, m in points)
