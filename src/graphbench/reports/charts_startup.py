"""Startup breakdown (stacked, cold vs warm) and graph memory / capture time vs captured sizes."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from graphbench.reports.figures import NoData, ReportData, new_figure, save_figure
from graphbench.reports.frame import GRAPHBENCH, STARTUP_PARTS, flag_is
from graphbench.reports.point_names import namer
from graphbench.reports.ladder_table import graph_rows

PART_NAMES = {
    "load_s": "load weights",
    "kv_cache_s": "KV cache",
    "kernel_choices_s": "kernel choices (timed, or loaded)",
    "compile_import_s": "import compile stack",
    "dynamo_s": "Dynamo",
    "inductor_s": "Inductor",
    "compile_sizes_s": "compile_sizes",
    "loaded_s": "load from cache",
    "capture_s": "graph capture",
    "first_call_s": "first call (peer warm-up / compile)",
}
PART_COLORS = ["#4e79a7", "#9c755f", "#ff9da7", "#d37295", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
               "#bab0ac"]


def startup_rows(points: pd.DataFrame) -> pd.DataFrame:
    """Points with a startup total, ordered by label, cold before warm, with an 'other' column."""
    rows = points[points["startup_s"].notna()].copy()
    if rows.empty:
        return rows
    parts = rows[list(STARTUP_PARTS)].fillna(0.0)
    rows["other_s"] = (rows["startup_s"] - parts.sum(axis=1)).clip(lower=0.0)
    rows["_warm"] = [not flag_is(cold, True) for cold in rows["startup_cold"]]
    return rows.sort_values(["system", "label", "_warm"], key=_system_first, kind="stable")


def _system_first(column: pd.Series) -> pd.Series:
    return column.map(lambda s: s != GRAPHBENCH) if column.name == "system" else column


def _kind(cold: object) -> str:
    return "cold" if flag_is(cold, True) else "warm" if flag_is(cold, False) else "start"


def startup_chart(data: ReportData, path: Path) -> None:
    rows = startup_rows(data.points)
    if rows.empty:
        raise NoData("no point recorded startup times")
    from matplotlib.patches import Patch

    fig, ax = new_figure(figsize=(max(8.0, 0.75 * len(rows) + 3), 6))
    xs = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    colors = dict(zip([*STARTUP_PARTS, "other_s"], PART_COLORS))
    hatches = ["//" if warm else "" for warm in rows["_warm"]]
    handles, labels = [], []
    for part in [*STARTUP_PARTS, "other_s"]:
        heights = rows[part].fillna(0.0).to_numpy(dtype=float)
        if not heights.any():
            continue
        bars = ax.bar(xs, heights, 0.7, bottom=bottom, color=colors[part], edgecolor="white", linewidth=0.5)
        for bar, hatch in zip(bars, hatches):
            bar.set_hatch(hatch)
        bottom += heights
        handles.append(Patch(facecolor=colors[part], edgecolor="white"))
        labels.append(PART_NAMES.get(part, "other (warm-up, ...)"))
    # a peer's total is its load; its first call (transformers' compile) is stacked on top: label the bar
    for x, total, top in zip(xs, rows["startup_s"], bottom):
        ax.annotate(f"{max(total, top):.1f}", (x, max(total, top)), ha="center", va="bottom", fontsize=7,
                    xytext=(0, 2), textcoords="offset points")  # fmt: skip
    name = namer(rows["model"], rows["gpu"])  # (a bar each, named apart)
    ticks = [f"{name(label, model, gpu)}\n{_kind(cold)}"
             for label, model, gpu, cold in zip(rows["label"], rows["model"], rows["gpu"], rows["startup_cold"])]
    ax.set_xticks(xs, ticks, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("startup time (s; label: total)")
    ax.set_xlabel("point (hatched: warm start, compiled artefacts loaded from the cache)")
    handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="//"))
    labels.append("warm start")
    ax.legend(handles, labels, fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    save_figure(fig, path, "Startup time breakdown, cold vs warm", data.environment)


def graph_memory_chart(data: ReportData, path: Path) -> None:
    """Left: graph memory per start (every start is the first capture in its process), with the part
    beyond the recordings' shared pool dashed: the pool is sized by the largest recording, so the
    dashed line is what a ladder with fewer rungs saves. Right: capture time, cold and warm apart
    (a cold capture pays Triton's JIT)."""
    rows = graph_rows(data.points)
    if rows.empty:
        raise NoData("no graphbench point captured CUDA graphs")
    from matplotlib import colormaps

    # a line per mode, and per model and GPU type where the results span several (memory and capture are theirs)
    ours = data.points[data.points["system"] == GRAPHBENCH]  # (named as the ladders table names them)
    name = namer(ours["model"], ours["gpu"])
    lines = sorted(set(zip(rows["cudagraph_mode_resolved"], rows["model"], rows["gpu"])))
    cmap = colormaps["Set1"]
    fig, (ax_mem, ax_time) = new_figure(1, 2, figsize=(13, 5.5))
    for i, (mode_only, model, gpu) in enumerate(lines):
        color = cmap(i % cmap.N)
        sub = rows[(rows["cudagraph_mode_resolved"] == mode_only) & (rows["model"] == model) & (rows["gpu"] == gpu)]
        mode = name(mode_only, model, gpu)
        _line(ax_mem, sub, "graph_memory_mib", color, "-", "o", f"{mode}: graph memory")
        _line(ax_mem, sub, "beyond_pool_mib", color, "--", "x", f"{mode}: beyond the shared pool")
        cold = sub[[flag_is(c, True) for c in sub["startup_cold"]]]
        warm = sub[[not flag_is(c, True) for c in sub["startup_cold"]]]
        _line(ax_time, cold, "capture_s", color, "-", "o", f"{mode}: cold start")
        _line(ax_time, warm, "capture_s", color, ":", "s", f"{mode}: warm start")
        spots = sub.groupby(["num_capture_sizes", "graph_memory_mib"])["label"].agg(lambda s: ", ".join(sorted(set(s))))
        for (x, y), names in spots.items():
            ax_mem.annotate(names, (x, y), fontsize=6, xytext=(4, 3), textcoords="offset points")
    for ax, ylabel in ((ax_mem, "graph memory (MiB)"), (ax_time, "capture time (s)")):
        ax.set_xlabel("captured sizes (number of ladder rungs)")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.set_xlim(0, math.ceil(rows["num_capture_sizes"].max() * 1.1) + 1)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        else:  # (results written without this measurement)
            ax.text(0.5, 0.5, "not recorded", transform=ax.transAxes, ha="center", color="grey")
    save_figure(fig, path, "Graph memory and capture time vs number of captured sizes", data.environment)


def _line(ax, rows: pd.DataFrame, column: str, color, style: str, marker: str, label: str) -> None:
    """Median of `column` per number of captured sizes, as a line with markers (nothing if empty)."""
    points = rows[rows[column].notna()].groupby("num_capture_sizes")[column].median()
    if not points.empty:
        ax.plot(points.index, points.to_numpy(), style, marker=marker, color=color, label=label)
