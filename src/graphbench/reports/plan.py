"""`graphbench plan`: the highest load each configuration serves within latency SLOs, and GPUs needed.

For each configuration (series: the point label, plus the prompt/output shape when results mix
shapes) the closed-loop workloads give, per measured concurrency, the median of each SLO metric.
The configuration's max load is the highest measured concurrency that meets every SLO, extended
toward the next measured one (linearly interpolated) up to where the first SLO's metric goes above
its limit; 0 when no measured concurrency meets them all; the highest measured concurrency, flagged
"at least", when it meets them all. A miss at a lower concurrency (p99 latencies are not monotone
in concurrency: at C=1 a slow first request can be the p99 of few requests) does not lower it, and
is named in a warning. A concurrency where an SLO metric is missing (NaN) is left out, with a
warning. Throughput at that load (output tokens/s, requests/s) is interpolated linearly between
measured concurrencies. Per GPU divides by the tensor-parallel size.
GPUs needed = tp x ceil(target / capacity of one replica), for a target in requests/s or users.

    plan = plan_capacity(["results/"], parse_slos(["tpot_p99_ms=50"]), target_rps=100)

No torch import; matplotlib only inside the charts (reports/charts_plan.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from graphbench.config.validate import suggest
from graphbench.ascii_numbers import plain
from graphbench.errors import GraphbenchError
from graphbench.reports.banner import cpu_points
from graphbench.reports.frame import LATENCY_METRICS, environment_line, ok_results, results_frame
from graphbench.reports.plan_load import ceil_tolerant, crossing, interpolate, max_load
from graphbench.reports.plan_processes import judge_against_firsts, process_capacities
from graphbench.reports.report import load, skipped_warnings
from graphbench.reports.store import LoadedResults

SLO_METRICS = tuple(LATENCY_METRICS)
TARGET_KINDS = {"requests_per_s": "requests/s", "users": "concurrent users"}
MAX_TARGET = 1e9  # requests/s or concurrent users: past any deployment (a GPU count for more is not a plan)


@dataclass(frozen=True)
class Slo:
    """An upper limit on a latency metric (ms), e.g. tpot_p99_ms <= 50."""

    metric: str
    limit: float

    def __str__(self) -> str:
        return f"{self.metric}<={self.limit:g}"


def parse_slo(text: str) -> Slo:
    """'tpot_p99_ms=50' -> Slo('tpot_p99_ms', 50.0); GraphbenchError with a suggestion otherwise."""
    name, sep, value = str(text).partition("=")
    name, value = name.strip().rstrip("<").strip(), value.strip()
    if not sep or not name or not value:
        raise GraphbenchError(f"bad SLO {text!r}: expected metric=value, e.g. tpot_p99_ms=50")
    if name not in SLO_METRICS:
        raise GraphbenchError(
            f"unknown SLO metric {name!r}{suggest(name, SLO_METRICS)}; choose from {', '.join(SLO_METRICS)}"
        )
    try:
        if not plain(value):  # (ascii_numbers.py)
            raise ValueError(value)
        limit = float(value)
    except ValueError:
        raise GraphbenchError(f"SLO {name}: limit must be a number in ms, got {value!r}") from None
    if not math.isfinite(limit) or limit <= 0:
        raise GraphbenchError(f"SLO {name}: limit must be a positive number of ms, got {value!r}")
    return Slo(name, limit)


def parse_slos(texts: Iterable[str]) -> list[Slo]:
    """Every --slo (each may hold several, comma-separated); at least one, each metric once."""
    slos = [parse_slo(part) for text in texts for part in str(text).split(",") if part.strip()]
    if not slos:
        raise GraphbenchError("give at least one SLO, e.g. --slo tpot_p99_ms=50")
    seen = set()
    for slo in slos:
        if slo.metric in seen:
            raise GraphbenchError(f"SLO metric {slo.metric} given twice")
        seen.add(slo.metric)
    return slos


@dataclass
class Capacity:
    """One configuration's capacity under the SLOs (per replica = one point's tensor-parallel GPUs)."""

    series: str
    label: str
    system: str
    model: str
    tensor_parallel_size: int
    concurrencies: list[float]
    max_concurrency: float
    at_least: bool  # no SLO crossed up to the highest measured concurrency
    limiting_slo: str  # the SLO that sets max_concurrency; '' when at_least
    crossings: dict[str, float | None]  # metric -> crossing load (None: not crossed)
    output_tokens_per_s: float
    requests_per_s: float
    output_tokens_per_s_per_gpu: float
    requests_per_s_per_gpu: float
    max_concurrency_per_gpu: float
    tokens_per_s_per_user: float
    gpus_needed: int | None = None  # None without a target, or when nothing meets the SLOs
    # output tokens/s per GPU at each process's own capacity, and the verdict against the plan's first
    # configuration on them (reports/plan_processes.py)
    process_output_tokens_per_s_per_gpu: list[float] = field(default_factory=list)
    vs_best: str = ""  # against the first configuration of the same model and GPU type
    gpu: str = ""  # the GPU type it was measured on ('' on the CPU, or where the results do not say)

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


@dataclass
class Plan:
    slos: list[Slo]
    target_kind: str | None  # 'requests_per_s', 'users' or None
    target: float | None
    capacities: list[Capacity]  # sorted by GPUs needed (or by output tokens/s per GPU)
    measured: pd.DataFrame  # per (series, concurrency): medians, for the Pareto chart
    warnings: list[str] = field(default_factory=list)
    environment: str = ""  # GPU and versions of the results (reports.frame.environment_line)

    def to_dict(self) -> dict[str, Any]:
        return {
            "slos": [{"metric": s.metric, "limit": s.limit} for s in self.slos],
            "target": None if self.target_kind is None else {"kind": self.target_kind, "value": self.target},
            "configurations": [c.to_dict() for c in self.capacities],
            "warnings": list(self.warnings),
            "environment": self.environment,
        }


def _target(target_rps: float | None, target_users: float | None) -> tuple[str | None, float | None]:
    if target_rps is not None and target_users is not None:
        raise GraphbenchError("give one target: --target-rps or --target-users, not both")
    for kind, value in (("requests_per_s", target_rps), ("users", target_users)):
        if value is not None:
            if isinstance(value, bool) or not math.isfinite(value) or value <= 0:
                raise GraphbenchError(f"target {TARGET_KINDS[kind]} must be a positive number, got {value!r}")
            if value > MAX_TARGET:
                raise GraphbenchError(f"target {TARGET_KINDS[kind]} must be at most {MAX_TARGET:g} (past any "
                                      f"deployment: the GPUs needed would mean nothing), got {value:g}")
            return kind, float(value)
    return None, None


def closed_loop_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The closed-loop rows (a concurrency, no request rate)."""
    kind = frame["workload_kind"]
    return frame[frame["concurrency"].notna() & ((kind == "closed") | ((kind == "") & frame["request_rate"].isna()))]


def closed_loop(frame: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """Closed-loop rows, medians per series and concurrency."""
    keys = ["series", "label", "system", "model", "gpu", "tensor_parallel_size", "concurrency"]
    return closed_loop_rows(frame).groupby(keys, as_index=False)[metrics].median().sort_values(["series", "concurrency"])


def _capacity(rows: pd.DataFrame, slos: list[Slo]) -> tuple[Capacity | None, list[str]]:
    """Capacity of one series (None when an SLO metric was never measured), and its warnings."""
    first = rows.iloc[0]
    name = first["series"]
    metrics = [slo.metric for slo in slos]
    for metric in metrics:
        if rows[metric].isna().all():
            return None, [f"{name}: no {metric} measured; left out of the plan"]
    gaps = rows[rows[metrics].isna().any(axis=1)]
    warnings = [f"{name}: {', '.join(m for m in metrics if pd.isna(row[m]))} not measured at concurrency "
                f"{row['concurrency']:g}; that concurrency is left out" for _, row in gaps.iterrows()]
    curve = rows.dropna(subset=metrics)
    if curve.empty:
        return None, [*warnings, f"{name}: no concurrency measured every SLO metric; left out of the plan"]
    cs, values = list(curve["concurrency"]), [list(curve[m]) for m in metrics]
    load, limiting = max_load(cs, values, [slo.limit for slo in slos])
    crossings = {}
    for slo, v in zip(slos, values):
        alone, crossed = crossing(cs, v, slo.limit)
        crossings[slo.metric] = alone if crossed else None
    if missed := _missed_below(cs, values, slos, load):
        warnings.append(f"{name}: misses the SLOs at lower concurrency ({missed}) but meets every one at "
                        f"concurrency {max(c for c in cs if c <= load):g}: planned at that higher load (a slow "
                        "first request or a noisy repeat inflates the p99 of few requests)")

    def at(metric: str) -> float:
        curve = rows[["concurrency", metric]].dropna()
        return interpolate(list(curve["concurrency"]), list(curve[metric]), load) if not curve.empty else math.nan

    tp = int(first["tensor_parallel_size"])
    out, rps = at("output_tokens_per_s"), at("requests_per_s")
    return Capacity(
        series=str(name), label=str(first["label"]), system=str(first["system"]),
        model=str(first["model"]), gpu=str(first["gpu"]), tensor_parallel_size=tp, concurrencies=[float(c) for c in rows["concurrency"]],
        max_concurrency=float(load), at_least=limiting is None,
        limiting_slo="" if limiting is None else str(slos[limiting]),
        crossings=crossings, output_tokens_per_s=out, requests_per_s=rps, output_tokens_per_s_per_gpu=out / tp,
        requests_per_s_per_gpu=rps / tp, max_concurrency_per_gpu=float(load) / tp,
        tokens_per_s_per_user=out / load if load > 0 else math.nan,
    ), warnings  # fmt: skip


def _missed_below(cs: list[float], values: list[list[float]], slos: list[Slo], load: float) -> str:
    """'tpot_p99_ms 61 at concurrency 1; ...': the SLO misses at concurrencies below the planned load."""
    misses = []
    for i, c in enumerate(cs):
        over = [f"{slo.metric} {v[i]:.4g}" for slo, v in zip(slos, values) if v[i] > slo.limit]
        if c < load and over:
            misses.append(f"{', '.join(over)} at concurrency {c:g}")
    return "; ".join(misses)


def _met_nowhere(measured: pd.DataFrame, slos: list[Slo]) -> str:
    """Why no configuration has a capacity (each one misses an SLO at every measured concurrency): the lowest
    value of each SLO's metric that was measured, and where."""
    lowest = []
    for slo in slos:
        row = measured.loc[measured[slo.metric].idxmin()]
        lowest.append(f"{slo.metric} {row[slo.metric]:.4g} ms ({row['series']} at concurrency {row['concurrency']:g})")
    return (f"no configuration meets {', '.join(map(str, slos))} at any measured concurrency, so none can be "
            f"planned or ranked (the lowest measured: {'; '.join(lowest)}): loosen the SLOs, or measure lower loads")


def gpus_needed(capacity: Capacity, target_kind: str, target: float) -> int | None:
    """tp x ceil(target / one replica's capacity); None when the configuration serves nothing."""
    per_replica = capacity.requests_per_s if target_kind == "requests_per_s" else capacity.max_concurrency
    if not per_replica > 0:  # also NaN
        return None
    return capacity.tensor_parallel_size * max(1, ceil_tolerant(target / per_replica))


def plan_capacity(
    inputs: Iterable[str | Path] | LoadedResults,
    slos: list[Slo],
    *,
    target_rps: float | None = None,
    target_users: float | None = None,
) -> Plan:
    """The plan for the results under inputs (files, folders or LoadedResults); see the module doc."""
    if not slos:
        raise GraphbenchError("give at least one SLO, e.g. --slo tpot_p99_ms=50")
    target_kind, target = _target(target_rps, target_users)
    loaded = load(inputs)
    metrics = sorted({"output_tokens_per_s", "requests_per_s", *(s.metric for s in slos)})
    frame = results_frame(loaded.results, extra_metrics=[s.metric for s in slos])
    measured = closed_loop(frame, metrics)
    if measured.empty:
        raise GraphbenchError("no closed-loop workload with a concurrency in these results: nothing to plan")
    warnings = skipped_warnings(loaded)
    on_cpu = cpu_points(loaded.results)
    if on_cpu:  # "per GPU" below is then per device: a CPU's figures plan no GPU fleet
        warnings.append(f"{len(on_cpu)} graphbench point(s) ran on the CPU ({', '.join(on_cpu[:3])}"
                        f"{', ...' if len(on_cpu) > 3 else ''}): their capacities are this CPU's, not a GPU's")
    capacities = []
    for _series, rows in measured.groupby("series", sort=True):
        result, notes = _capacity(rows, slos)
        warnings += notes
        if result is None:
            continue
        if target_kind is not None:
            result.gpus_needed = gpus_needed(result, target_kind, target)
        capacities.append(result)
    if not capacities:
        raise GraphbenchError("no configuration measured every SLO metric: nothing to plan")
    if not any(c.max_concurrency > 0 for c in capacities):
        raise GraphbenchError(_met_nowhere(measured, slos))

    def order(c: Capacity) -> tuple:
        per_gpu = c.output_tokens_per_s_per_gpu if not math.isnan(c.output_tokens_per_s_per_gpu) else 0.0
        gpus = c.gpus_needed if c.gpus_needed is not None else math.inf
        return (gpus if target_kind else 0, -per_gpu, c.series)

    capacities.sort(key=order)
    rows = closed_loop_rows(frame)
    for c in capacities:
        c.process_output_tokens_per_s_per_gpu = process_capacities(rows[rows["series"] == c.series], slos)
    judge_against_firsts(capacities)
    return Plan(slos, target_kind, target, capacities, measured, warnings, environment_line(ok_results(loaded.results)))

