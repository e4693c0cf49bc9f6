"""Inputs of ladder tuning: batch-size distributions from measured runs or parametric models, and
the graph-memory model fitted from measured capture results. Pure Python; no torch.

Parametric models (``model_distribution``):

- ``closed:C[:W]``: closed-loop serving at concurrency C. Most decode steps carry all C requests,
  so weight W (default 0.9) sits on C; the rest (1 - W) is spread uniformly over 1..C-1 to model
  the tail when requests finish and are not yet replaced. Sizes are in tokens: with speculative
  decoding each request contributes ``tokens_per_request`` (1 + k) tokens, so size r becomes r*(1+k).
- ``uniform:A-B`` (or ``uniform:B`` for 1..B): every batch size from A to B tokens equally likely.

Memory model (``fit_memory_model``): a ladder's graph memory is modelled as the sum over its sizes
of (a + b * size). Each measured result gives one equation graph_memory_bytes = a * count + b *
sum(sizes) over its ``startup.capture_sizes``; a and b are the least-squares fit, constrained to
be non-negative. With a single ladder shape (or collinear ones) only a per-graph constant is fitted.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from graphbench.errors import GraphbenchError
from graphbench.ladders.distributions import BatchSizeDistribution

CLOSED_WEIGHT = 0.9
MODEL_FORMS = "closed:C, closed:C:W or uniform:A-B"


@dataclass(frozen=True, slots=True)
class MemoryModel:
    """Graph memory of a ladder: per_graph_bytes per size plus per_token_bytes per token of each size."""

    per_graph_bytes: float
    per_token_bytes: float
    num_points: int = 0
    rms_error_bytes: float = 0.0
    note: str = ""

    def predict(self, sizes: Sequence[int]) -> float:
        return len(sizes) * self.per_graph_bytes + self.per_token_bytes * sum(sizes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_run_results(paths: Iterable[str | Path]) -> tuple[list[dict[str, Any]], list[str]]:
    """Successful results under the given files or folders, and one warning per skipped file."""
    from graphbench.reports.store import load_results  # the reports package stays out of plain ladder use

    paths = list(paths)
    loaded = load_results(paths)
    warnings = [f"skipped {file}: {why}" for file, why in loaded.skipped]
    ok = [r for r in loaded.results if r.get("status", "ok") == "ok"]
    if not ok:
        raise GraphbenchError(f"no successful graphbench result in {', '.join(map(str, paths))}")
    return ok, warnings


def workload_names(results: Iterable[Mapping[str, Any]]) -> list[str]:
    """The workload names found in the results, first-seen order."""
    names: dict[str, None] = {}
    for result in results:
        for workload in result.get("workloads") or []:
            names.setdefault(str(workload.get("name")), None)
    return list(names)


def distribution_from_results(
    results: Iterable[Mapping[str, Any]], workloads: Iterable[str] | None = None
) -> BatchSizeDistribution:
    """The summed batch-size histograms of every repeat of the chosen workloads (default: all)."""
    results = list(results)
    wanted = None if workloads is None else list(dict.fromkeys(workloads))
    available = workload_names(results)
    if wanted:
        missing = [w for w in wanted if w not in available]
        if missing:
            raise GraphbenchError(
                f"no workload named {', '.join(missing)} in the results; "
                f"available: {', '.join(available) or 'none'}"
            )
    counts: Counter[int] = Counter()
    for result in results:
        where = result.get("_path", result.get("label", "result"))
        for workload in result.get("workloads") or []:
            if wanted and str(workload.get("name")) not in wanted:
                continue
            for repeat in workload.get("repeats") or []:
                histogram = repeat.get("batch_size_histogram") or {}
                if not isinstance(histogram, Mapping):
                    raise GraphbenchError(f"{where}: batch_size_histogram must be an object {{size: steps}}")
                for size, steps in histogram.items():
                    try:
                        n = int(size)
                    except (TypeError, ValueError):
                        raise GraphbenchError(f"{where}: bad batch size {size!r} in batch_size_histogram") from None
                    if isinstance(steps, bool) or not isinstance(steps, (int, float)) or steps < 0 or n <= 0:
                        raise GraphbenchError(f"{where}: bad histogram entry {size!r}: {steps!r}")
                    counts[n] += steps
    label = f"{len(results)} result(s)" + (f", workloads {', '.join(wanted)}" if wanted else "")
    if not counts or not any(counts.values()):
        raise GraphbenchError(f"the results hold no batch-size histogram ({label})")
    return BatchSizeDistribution(counts, source=f"measured batch sizes ({label})")


def model_distribution(spec: str, tokens_per_request: int = 1) -> BatchSizeDistribution:
    """A parametric distribution: closed:C[:W] or uniform:A-B (see the module docstring)."""
    text = spec.strip().lower()
    kind, _, args = text.partition(":")
    if kind == "closed":
        m = re.fullmatch(r"(\d+)(?::([0-9.eE+-]+))?", args)
        if not m or int(m.group(1)) <= 0:
            raise GraphbenchError(f"bad model {spec!r}: expected closed:C with C a positive integer (or closed:C:W)")
        c = int(m.group(1))
        weight = CLOSED_WEIGHT if m.group(2) is None else _fraction(m.group(2), spec)
        if isinstance(tokens_per_request, bool) or not isinstance(tokens_per_request, int) or tokens_per_request <= 0:
            raise GraphbenchError(f"tokens per request must be a positive integer, got {tokens_per_request!r}")
        t = tokens_per_request
        weights = {c * t: 1.0} if c == 1 else {c * t: weight, **{r * t: (1 - weight) / (c - 1) for r in range(1, c)}}
        w = "" if m.group(2) is None else f", weight {weight:g} at C"
        per = f", {t} tokens per request" if t > 1 else ""
        return BatchSizeDistribution(weights, source=f"model closed-loop concurrency {c}{w}{per}")
    if kind == "uniform":
        m = re.fullmatch(r"(?:(\d+)-)?(\d+)", args)
        if not m:
            raise GraphbenchError(f"bad model {spec!r}: expected uniform:A-B with 1 <= A <= B")
        low, high = int(m.group(1) or 1), int(m.group(2))
        if not 1 <= low <= high:
            raise GraphbenchError(f"bad model {spec!r}: expected uniform:A-B with 1 <= A <= B")
        return BatchSizeDistribution({n: 1.0 for n in range(low, high + 1)}, source=f"model uniform {low}..{high}")
    raise GraphbenchError(f"unknown distribution model {spec!r}; expected {MODEL_FORMS}")


def _fraction(text: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 1:
        raise GraphbenchError(f"bad model {spec!r}: the weight W at C must be in (0, 1]")
    return value


def memory_points(results: Iterable[Mapping[str, Any]]) -> list[tuple[int, int, float]]:
    """(number of sizes, sum of sizes, graph_memory_bytes) of each result that captured graphs."""
    points = []
    for result in results:
        startup = result.get("startup") or {}
        sizes = startup.get("capture_sizes") or []
        memory = startup.get("graph_memory_bytes")
        mode = (startup.get("cudagraph_mode") or {}).get("resolved")
        graphs = startup.get("num_graphs")
        if isinstance(graphs, Mapping) and not sum(v for v in graphs.values() if isinstance(v, (int, float))):
            continue
        ok_sizes = isinstance(sizes, list) and all(isinstance(s, int) and s > 0 for s in sizes)
        if mode == "NONE" or not sizes or not ok_sizes or not isinstance(memory, (int, float)) or memory <= 0:
            continue
        points.append((len(sizes), sum(sizes), float(memory)))
    return points


def fit_memory_model(results: Iterable[Mapping[str, Any]]) -> MemoryModel:
    """Least-squares a, b >= 0 in graph_memory_bytes = a * count + b * sum(sizes) (see the module docstring)."""
    points = memory_points(results)
    if not points:
        raise GraphbenchError(
            "no result with captured graphs (startup.capture_sizes and graph_memory_bytes > 0) to fit "
            "the graph-memory model"
        )
    kk = math.fsum(k * k for k, _, _ in points)
    ss = math.fsum(s * s for _, s, _ in points)
    ks = math.fsum(k * s for k, s, _ in points)
    km = math.fsum(k * m for k, _, m in points)
    sm = math.fsum(s * m for _, s, m in points)
    det = kk * ss - ks * ks
    per_graph_only = (km / kk, 0.0)
    note = ""
    if det <= 1e-9 * kk * ss:
        (a, b), note = per_graph_only, "one ladder shape measured: memory modelled per graph only"
    else:
        a, b = (km * ss - sm * ks) / det, (sm * kk - km * ks) / det
        if a < 0 or b < 0:  # the non-negative optimum lies on an axis: the better one-variable fit
            per_token_only = (0.0, sm / ss)
            a, b = min(per_graph_only, per_token_only, key=lambda ab: _sse(points, *ab))
            note = "least squares gave a negative coefficient; refitted with it at zero"
    rms = math.sqrt(_sse(points, a, b) / len(points))
    return MemoryModel(a, b, len(points), rms, note)


def _sse(points: list[tuple[int, int, float]], a: float, b: float) -> float:
    return math.fsum((m - a * k - b * s) ** 2 for k, s, m in points)
