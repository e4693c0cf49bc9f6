"""Capacity-plan charts: tokens/s per GPU vs tokens/s per user (Pareto), GPUs needed vs target load.

Also writes the plan files (plan.json, plan.csv) next to them: `write_plan`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from graphbench.errors import GraphbenchError
from graphbench.files import write_atomic
from graphbench.reports.figures import (
    ChartOutcome,
    NoData,
    new_figure,
    palette,
    plain_log_axis,
    save_figure,
)
from graphbench.reports.plan import TARGET_KINDS, Capacity, Plan, ceil_tolerant
from graphbench.reports.point_names import namer
from graphbench.reports.safe_text import csv_text

PLAN_JSON, PLAN_CSV = "plan.json", "plan.csv"
CSV_COLUMNS = [
    "series", "label", "system", "model", "gpu", "tensor_parallel_size", "max_concurrency", "at_least", "limiting_slo",
    "output_tokens_per_s", "requests_per_s", "output_tokens_per_s_per_gpu", "requests_per_s_per_gpu",
    "max_concurrency_per_gpu", "tokens_per_s_per_user", "gpus_needed", "vs_best",
]  # fmt: skip


def pareto_points(plan: Plan) -> pd.DataFrame:
    """Every measured (series, concurrency): tokens/s per GPU and per user, and whether it is on the front of its
    model on its GPU type (one front over two machines or models would be neither's)."""
    rows = plan.measured.dropna(subset=["output_tokens_per_s"]).copy()
    rows = rows[rows["concurrency"] > 0]
    rows["per_gpu"] = rows["output_tokens_per_s"] / rows["tensor_parallel_size"]
    rows["per_user"] = rows["output_tokens_per_s"] / rows["concurrency"]
    rows["front"] = False
    for _, group in rows.groupby(["model", "gpu"], sort=False):
        rows.loc[group.index, "front"] = pareto_front(list(zip(group["per_user"], group["per_gpu"])))
    return rows


def pareto_front(points: list[tuple[float, float]]) -> list[bool]:
    """For each (x, y) point: True when no other point is >= on both and > on one (maximise both)."""
    order = sorted(range(len(points)), key=lambda i: (-points[i][0], -points[i][1]))
    on_front = [False] * len(points)
    best_y = -math.inf
    for i in order:
        if points[i][1] > best_y:
            on_front[i] = True
            best_y = points[i][1]
    return on_front


def _footer(plan: Plan, environment: str) -> str:
    return f"SLOs: {', '.join(map(str, plan.slos))} | {environment}"


def pareto_chart(plan: Plan, path: Path, environment: str) -> None:
    rows = pareto_points(plan)
    if rows.empty:
        raise NoData("no measured output tokens/s")
    colors = palette(list(rows["series"]))
    fig, ax = new_figure(figsize=(10, 6))
    for series, sub in rows.groupby("series", sort=True):
        sub = sub.sort_values("concurrency")
        ax.plot(sub["per_user"], sub["per_gpu"], "-o", ms=4, color=colors[series], alpha=0.75, label=series)
    fronts = rows[rows["front"]].groupby(["model", "gpu"], sort=True)
    front_name = namer(rows["model"], rows["gpu"])
    for i, ((model, gpu), front) in enumerate(fronts):  # (a front per model and GPU type, named where several)
        front = front.sort_values("per_user")
        name = front_name("Pareto front", model, gpu)
        ax.plot(front["per_user"], front["per_gpu"], ("-", "--", ":", "-.")[i % 4], color="black", linewidth=2.2,
                alpha=0.5, zorder=2, label=name)  # fmt: skip
        ax.scatter(front["per_user"], front["per_gpu"], s=90, facecolors="none", edgecolors="black", zorder=4)
    for cap in plan.capacities:
        if cap.max_concurrency > 0 and not math.isnan(cap.tokens_per_s_per_user):
            ax.scatter([cap.tokens_per_s_per_user], [cap.output_tokens_per_s_per_gpu], marker="*", s=160,
                       color=colors.get(cap.series, "black"), edgecolors="black", zorder=5)  # fmt: skip
    ax.scatter([], [], marker="*", s=120, color="white", edgecolors="black", label="max load within the SLOs")
    plain_log_axis(ax, "x")
    ax.set_xlabel("output tokens/s per user (log scale; = output tokens/s / concurrency)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="both", alpha=0.3)
    fig.legend(fontsize=8, loc="outside right upper")
    save_figure(fig, path, "Throughput per GPU vs interactivity (tokens/s per user)", _footer(plan, environment))


def _per_replica(cap: Capacity, kind: str) -> float:
    return cap.requests_per_s if kind == "requests_per_s" else cap.max_concurrency


def gpus_chart(plan: Plan, path: Path, environment: str) -> None:
    kind = plan.target_kind or "requests_per_s"
    caps = [c for c in plan.capacities if _per_replica(c, kind) > 0]
    if not caps:
        raise NoData("no configuration meets the SLOs at any measured load")
    best = max(_per_replica(c, kind) / c.tensor_parallel_size for c in caps)
    top = 2 * plan.target if plan.target else 8 * best
    loads = np.linspace(top / 400, top, 400)
    colors = palette([c.series for c in plan.capacities])
    fig, ax = new_figure(figsize=(10, 6))
    for cap in caps:
        replica = _per_replica(cap, kind)
        gpus = [cap.tensor_parallel_size * max(1, ceil_tolerant(x / replica)) for x in loads]
        ax.step(loads, gpus, where="post", color=colors[cap.series], label=cap.series)
    for cap in plan.capacities:
        if cap not in caps:
            ax.plot([], [], color=colors[cap.series], label=f"{cap.series} (meets no SLO load)")
    if plan.target:
        ax.axvline(plan.target, color="black", linestyle="--", linewidth=1, label=f"target {plan.target:g}")
        for cap in caps:
            if cap.gpus_needed is not None:
                ax.scatter([plan.target], [cap.gpus_needed], color=colors[cap.series], edgecolors="black", zorder=4)
                ax.annotate(f"{cap.gpus_needed}", (plan.target, cap.gpus_needed), fontsize=7, xytext=(5, 0),
                            textcoords="offset points", va="center")  # fmt: skip
    ax.set_xlabel(f"target load ({TARGET_KINDS[kind]})")
    ax.set_ylabel("GPUs needed (log scale)")
    plain_log_axis(ax, "y")
    ax.set_xlim(0, top)
    ax.set_ylim(bottom=0.8)
    ax.grid(True, alpha=0.3)
    fig.legend(fontsize=8, loc="outside right upper")
    save_figure(fig, path, "GPUs needed vs target load, within the SLOs", _footer(plan, environment))


def _json_default(value: object) -> object:
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    raise TypeError(f"not JSON serialisable: {value!r}")


def plan_json(plan: Plan) -> str:
    return json.dumps(plan.to_dict(), indent=1, default=_json_default, allow_nan=False)


def write_plan(
    plan: Plan,
    out_dir: str | Path,
    *,
    progress: Callable[[int, int, ChartOutcome], None] | None = None,
) -> tuple[list[Path], list[ChartOutcome]]:
    """plan.json, plan.csv and the two charts into out_dir; returns (files written, chart outcomes)."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(out / PLAN_JSON, plan_json(plan) + "\n")
        table = pd.DataFrame([c.to_dict() for c in plan.capacities])
        table["gpus_needed"] = table["gpus_needed"].astype("Int64")
        write_atomic(out / PLAN_CSV, table[CSV_COLUMNS].map(csv_text).to_csv(index=False))  # no formulas for a spreadsheet
    except OSError as exc:
        raise GraphbenchError(f"cannot write the plan into {out}: {exc}") from None
    charts = [("plan_pareto.png", "Tokens/s per GPU vs tokens/s per user (Pareto front)", pareto_chart),
              ("plan_gpus.png", "GPUs needed vs target load", gpus_chart)]  # fmt: skip
    outcomes = []
    for i, (name, title, function) in enumerate(charts, start=1):
        try:
            function(plan, out / name, plan.environment)
            outcome = ChartOutcome(name, title, out / name)
        except NoData as why:
            (out / name).unlink(missing_ok=True)
            outcome = ChartOutcome(name, title, None, f"skipped: {why}")
        outcomes.append(outcome)
        if progress is not None:
            progress(i, len(charts), outcome)
    files = [out / PLAN_JSON, out / PLAN_CSV] + [o.path for o in outcomes if o.path is not None]
    return files, outcomes
