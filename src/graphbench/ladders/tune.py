"""Tune the capture ladder: the at most N sizes that minimise the expected padding of a workload.

A ladder L (ascending, top T = max L) pads a batch n <= T to pad(n) = min{s in L : s >= n};
batches above T run eager and cost nothing (as in `average_waste`). Over a batch-size
distribution p(n) two objectives are offered:

- ``tokens``: E[pad(n) - n], the padding tokens computed per step;
- ``waste``:  E[(pad(n) - n) / pad(n)], the mean fraction of a padded batch that is padding.

Solved exactly by dynamic programming over the candidate sizes c_1 < ... < c_K = T. A rung c_j
serves the batches in (c_i, c_j], c_i the rung below it (c_0 = 0), so with prefix sums P
(probability) and S (probability x size) that run costs c_j (P_j - P_i) - (S_j - S_i) (tokens) or
(P_j - P_i) - (S_j - S_i) / c_j (waste), and f[k][j] = min_i f[k-1][i] + cost(i, j): O(K^2 N).
Restricting the candidates to the distribution's own sizes loses nothing: lowering a rung to the
largest batch size it serves never increases either cost.

Constraints: the top is always a rung (no batch that had a graph loses it); ``multiple_of`` m
(speculative decoding, m = 1 + k) makes every rung a multiple of m (candidates are rounded up to
multiples, so batches pad to them); ``required`` sizes are always rungs (no transition may jump
over one); a graph-memory budget under a fitted model memory = sum over rungs of (a + b * size)
adds a third DP dimension, the sum of the rung sizes in units of their gcd -- still exact. Ties
prefer fewer sizes. Pure Python and numpy; no torch.

The DP itself is in tune_dp, the input checks in tune_inputs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from graphbench.errors import GraphbenchError
from graphbench.ladders.padding import average_waste, eager_fraction, padding_tokens
from graphbench.ladders.tune_dp import LadderProblem
from graphbench.ladders.tune_inputs import (
    MAX_GRAPHS,
    OBJECTIVES,
    as_dist,
    check_int,
    check_objective,
)
from graphbench.ladders.step_curve import LinearCost, StepCurve, expected_step_ms
from graphbench.ladders.memory_model import MemoryModel

__all__ = [
    "OBJECTIVES",
    "ParetoPoint",
    "TunedLadder",
    "evaluate_ladder",
    "knee",
    "pareto_curve",
    "tune_ladder",
]

_REL_TIE = 1e-12



@dataclass(frozen=True, slots=True)
class TunedLadder:
    """A ladder and its expected padding over a distribution (eager batches count zero)."""

    sizes: tuple[int, ...]
    expected_padded_tokens: float  # E[pad(n) - n] per step
    expected_waste_pct: float  # 100 * E[(pad(n) - n) / pad(n)]
    num_sizes: int
    predicted_graph_memory_bytes: float | None = None
    objective: str = "tokens"
    eager_pct: float = 0.0  # % of batches above the top rung
    expected_step_ms: float | None = None  # E[t(pad(n))] under a measured step-time curve
    predicted_capture_s: float | None = None  # under the curve's capture-time model

    @property
    def objective_value(self) -> float:
        if self.objective == "time":
            return self.expected_step_ms
        return self.expected_padded_tokens if self.objective == "tokens" else self.expected_waste_pct

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "sizes": list(self.sizes)}


class ParetoPoint(NamedTuple):
    """The best ladder with at most num_graphs sizes and its objective value (tokens, or waste %)."""

    num_graphs: int
    value: float
    sizes: tuple[int, ...]


def evaluate_ladder(
    sizes: Iterable[int],
    distribution: Mapping[int, float],
    *,
    objective: str = "tokens",
    memory_model: MemoryModel | None = None,
    step_curve: StepCurve | None = None,
) -> TunedLadder:
    """Expected padding tokens, waste % and eager % of any ladder over a distribution; with a
    step-time curve also its expected ms per step and predicted capture seconds."""
    rungs = tuple(sorted(set(sizes)))
    dist = as_dist(distribution)
    check_objective(objective)
    if objective == "time" and step_curve is None:
        raise GraphbenchError("the time objective needs a measured step-time curve (--curve)")
    capture = None if step_curve is None else step_curve.capture_model()
    return TunedLadder(
        rungs,
        padding_tokens(rungs, dist),
        100 * average_waste(rungs, dist),
        len(rungs),
        None if memory_model is None else memory_model.predict(rungs),
        objective,
        100 * eager_fraction(rungs, dist),
        None if step_curve is None else expected_step_ms(rungs, dist, step_curve),
        None if capture is None else capture.predict(rungs),
    )


def tune_ladder(distribution: Mapping[int, float], max_graphs: int, **options: Any) -> TunedLadder:
    """The exact best ladder of at most max_graphs sizes; options as `pareto_curve`."""
    point = pareto_curve(distribution, max_graphs, **options)[-1]
    return evaluate_ladder(point.sizes, distribution, objective=options.get("objective", "tokens"),
                           memory_model=options.get("memory_model"), step_curve=options.get("step_curve"))


def time_candidates(sizes: Iterable[int], top: int, multiple_of: int, curve: StepCurve) -> list[int]:
    """Sizes worth a rung under the time objective: the distribution's own (rounded up to the multiple)
    and, between two of them, each size faster than every size from the lower one up to it (a curve
    need not rise everywhere: padding 47 up to 48 may be faster than a recording of 47)."""
    m = multiple_of
    own = sorted({-(-s // m) * m for s in sizes if -(-s // m) * m <= top} | {top})
    if top > curve.max_size:
        raise GraphbenchError(f"the step-time curve covers 1..{curve.max_size}, below the top {top}: "
                              "measure a longer curve (graphbench curve --max-size) or lower --top")
    out = set(own)
    for low, high in zip(own, own[1:] + [top + m]):
        best = curve.graph_time(low)
        for c in range(low + m, min(high, top + 1), m):
            t = curve.graph_ms.get(c)
            if t is not None and t < best:
                out.add(c)
                best = t
    return sorted(out)


def pareto_curve(
    distribution: Mapping[int, float],
    max_graphs: int,
    *,
    objective: str = "tokens",
    top: int | None = None,
    multiple_of: int = 1,
    required: Iterable[int] = (),
    candidates: Iterable[int] | None = None,
    memory_model: MemoryModel | None = None,
    memory_budget_bytes: float | None = None,
    step_curve: StepCurve | None = None,
    capture_budget_s: float | None = None,
) -> list[ParetoPoint]:
    """(n, objective value, sizes) of the best ladder with at most n sizes, n = fewest possible..max_graphs.

    The fewest possible is the number of forced rungs (the top and the required sizes); the values
    never increase with n. top defaults to the distribution's largest size (rounded up to a
    multiple of multiple_of); candidates, when given, restrict the sizes the ladder may use (the
    top and the required sizes are always allowed). With memory_budget_bytes only ladders whose
    memory_model prediction fits are considered (n values with no fitting ladder are left out).
    """
    check_int("max_graphs", max_graphs)
    if max_graphs > MAX_GRAPHS:
        raise GraphbenchError(f"max graphs must be at most {MAX_GRAPHS}, got {max_graphs}")
    dist = as_dist(distribution)
    step_ms = None if step_curve is None else step_curve.graph_time
    if objective == "time" and step_curve is not None and candidates is None:
        rounded_top = top if top is not None else -(-dist.max_size // multiple_of) * multiple_of
        candidates = time_candidates(dist.sizes, rounded_top, multiple_of, step_curve)
    prob = LadderProblem(dist, objective, top, multiple_of, required, candidates, step_ms)
    if max_graphs < prob.forced:
        raise GraphbenchError(
            f"max graphs {max_graphs} is fewer than the {prob.forced} sizes that must be in the ladder "
            f"(top {prob.top}{', required ' + ','.join(map(str, prob.required)) if prob.required else ''})"
        )
    limit = min(max_graphs, prob.K)
    limits = _linear_limits(memory_model, memory_budget_bytes, step_curve, capture_budget_s)
    values, paths = prob.solve(limit)
    if any(p is not None and not _within(p, limits) for p in paths):
        if any(room < 0 for _, _, room in limits):
            values, paths = values[:0], paths[:0]
        elif all(b == 0 for _, b, _ in limits):
            cap = min([limit] + [math.floor(room / a * (1 + 1e-9)) for a, _, room in limits if a > 0])
            values, paths = values[: cap + 1], paths[: cap + 1]
        else:
            values, paths = prob.solve_budget(limit, limits)
    curve: list[ParetoPoint] = []
    best_k, last = None, None
    for n in range(prob.forced, max_graphs + 1):
        ks = [k for k in range(prob.forced, min(n, len(values) - 1) + 1) if math.isfinite(values[k])]
        if not ks:
            continue
        low = min(values[k] for k in ks)
        best_k = next(k for k in ks if values[k] <= low + _REL_TIE * max(abs(low), abs(values[ks[0]])))
        ladder = evaluate_ladder(paths[best_k], prob.dist, objective=objective, step_curve=step_curve)
        point = ParetoPoint(n, ladder.objective_value, ladder.sizes)
        if last is not None and point.value > last.value:  # float noise between equal optima
            point = ParetoPoint(n, last.value, last.sizes)
        curve.append(point)
        last = point
    if not curve:
        forced = ",".join(map(str, prob.forced_sizes))
        needs = []
        if memory_budget_bytes is not None:
            needs.append(f"{memory_model.predict(prob.forced_sizes) / 2**20:.1f} MiB of graph memory "
                         f"(budget {memory_budget_bytes / 2**20:.1f} MiB)")
        if capture_budget_s is not None:
            needs.append(f"{step_curve.capture_model().predict(prob.forced_sizes):.2f} s of capture "
                         f"(budget {capture_budget_s:g} s)")
        which = "graph-memory budget" if capture_budget_s is None else (
            "capture-time budget" if memory_budget_bytes is None else "graph-memory and capture-time budgets")
        raise GraphbenchError(f"no ladder fits the {which}: the forced sizes ({forced}) alone are predicted "
                              f"to need {' and '.join(needs)}")
    return curve


def _linear_limits(memory_model, memory_budget_bytes, step_curve, capture_budget_s) -> list[tuple[float, float, float]]:
    """The budgets as (per graph, per token of size, room left after the fixed part)."""
    limits = []
    if memory_budget_bytes is not None:
        if memory_model is None:
            raise GraphbenchError("a graph-memory budget needs a memory model (fit one from measured results)")
        if not memory_budget_bytes > 0:
            raise GraphbenchError(f"the memory budget must be positive, got {memory_budget_bytes!r}")
        if min(memory_model.per_graph_bytes, memory_model.per_token_bytes, memory_model.fixed_bytes) < 0:
            raise GraphbenchError("the memory model's coefficients must be non-negative")
        limits.append((memory_model.per_graph_bytes, memory_model.per_token_bytes,
                       memory_budget_bytes - memory_model.fixed_bytes))
    if capture_budget_s is not None:
        model: LinearCost | None = None if step_curve is None else step_curve.capture_model()
        if model is None:
            raise GraphbenchError("a capture-time budget needs a step-time curve with capture times (--curve)")
        if not capture_budget_s > 0 or not math.isfinite(capture_budget_s):
            raise GraphbenchError(f"the capture-time budget must be a positive number of seconds, got {capture_budget_s!r}")
        limits.append((model.per_graph, model.per_token, capture_budget_s - model.fixed))
    return limits


def _within(sizes: Sequence[int], limits: list[tuple[float, float, float]]) -> bool:
    return all(a * len(sizes) + b * sum(sizes) <= room * (1 + 1e-9) + 1e-12 for a, b, room in limits)


KNEE_POINTS = 2.0  # the knee's tolerance, in percentage points of the objective's scale (see knee)


def knee(curve: Sequence[ParetoPoint], objective: str = "tokens", mean_size: float = 1.0) -> ParetoPoint:
    """The fewest graphs whose ladder is within KNEE_POINTS percentage points of the curve's best (its last
    point), in the objective's own terms: padding tokens per step as a share of the mean batch (mean_size)
    for tokens, the waste % for waste, % of the best ms per step for time. (The point farthest below the
    chord, the rule before, named 2 graphs at 75% waste on the README's main job: the one-graph point's
    padding flattened the rest of the curve.)
    """
    if not curve:
        raise GraphbenchError("the Pareto curve is empty")
    check_objective(objective)
    best = curve[-1].value
    scale = {"tokens": mean_size, "waste": 100.0, "time": best}[objective]

    def points_above_best(p: ParetoPoint) -> float:
        return 100 * (p.value - best) / scale if scale > 0 else p.value - best

    return next(p for p in curve if points_above_best(p) <= KNEE_POINTS * (1 + 1e-9))
