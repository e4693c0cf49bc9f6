"""Padding waste vs batch size per capture ladder: the predicted curve and the measured steps.

Predicted: graphbench.ladders.waste on the ladder a point captured. Measured: the step token counts
of its workloads (batch_size_histogram, summed over repeats): a uniform-decode workload (kind
"decode" / "uniform-decode") contributes every step, any other workload its decode steps (token
count <= concurrency x decode query length). Each batch size is one point: the waste its steps
had, eager steps (above the top rung, or a point that resolved to NONE) counting zero, with the
marker area growing with the share of steps.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphbench.ladders import waste
from graphbench.reports.charts import NoData, ReportData, log2_axis, new_figure, save_figure
from graphbench.reports.frame import GRAPHBENCH, capture_sizes_of

UNIFORM_DECODE_KINDS = ("decode", "uniform-decode", "uniform_decode")


@dataclass
class LadderData:
    name: str
    sizes: tuple[int, ...]
    steps: dict[int, int] = field(default_factory=dict)  # measured batch size -> steps
    eager: set[int] = field(default_factory=set)  # batch sizes some point ran eager


def _decode_query_len(result: Mapping[str, Any]) -> int:
    spec = (result.get("config") or {}).get("speculative") or {}
    k = spec.get("num_speculative_tokens") if isinstance(spec, Mapping) else 0
    return 1 + k if isinstance(k, int) and k > 0 else 1


def measured_steps(result: Mapping[str, Any]) -> dict[int, int]:
    """Batch size -> number of steps from the point's decode steps (see the module doc)."""
    steps: dict[int, int] = {}
    for w in result.get("workloads") or []:
        if not isinstance(w, Mapping):
            continue
        uniform = w.get("kind") in UNIFORM_DECODE_KINDS
        conc = w.get("concurrency")
        limit = math.inf if uniform else (conc * _decode_query_len(result) if isinstance(conc, int) else 0)
        for repeat in w.get("repeats") or []:
            hist = repeat.get("batch_size_histogram") if isinstance(repeat, Mapping) else None
            for key, count in (hist or {}).items():
                try:
                    n, c = int(key), int(count)
                except (TypeError, ValueError):
                    continue
                if 0 < n <= limit and c > 0:
                    steps[n] = steps.get(n, 0) + c
    return steps


def ladders(results: list[Mapping[str, Any]]) -> list[LadderData]:
    """Distinct ladders of the graphbench points that captured graphs, with their measured steps."""
    found: dict[tuple[int, ...], LadderData] = {}
    for result in results:
        if result.get("system") != GRAPHBENCH:
            continue
        sizes = capture_sizes_of(result)
        resolved = ((result.get("startup") or {}).get("cudagraph_mode") or {}).get("resolved")
        if not sizes or resolved == "NONE":
            continue
        mode = ((result.get("config") or {}).get("compilation") or {}).get("performance_mode") or "custom"
        key = tuple(sizes)
        if key not in found:
            found[key] = LadderData(f"{mode}: {len(key)} sizes, top {key[-1]}", key)
        ladder = found[key]
        for n, count in measured_steps(result).items():
            ladder.steps[n] = ladder.steps.get(n, 0) + count
            if n > key[-1]:
                ladder.eager.add(n)
    names = [lad.name for lad in found.values()]
    out = sorted(found.values(), key=lambda lad: (lad.name, lad.sizes))
    for lad in out:
        if names.count(lad.name) > 1:
            lad.name += f" [{', '.join(map(str, lad.sizes[:4]))}, ...]"
    return out


def padding_chart(data: ReportData, path: Path) -> None:
    found = ladders(data.results)
    if not found:
        raise NoData("no graphbench point captured a CUDA-graph ladder")
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    span = max([lad.sizes[-1] for lad in found] + [n for lad in found for n in lad.steps])
    xs = list(range(1, span + 1))
    fig, axes = new_figure(len(found), 1, figsize=(11, 2.8 * len(found) + 1.2), sharex=True)
    axes = [axes] if len(found) == 1 else list(axes)
    for i, (ax, lad) in enumerate(zip(axes, found)):
        color = cmap(i % cmap.N)
        ys = [math.nan if (w := waste(lad.sizes, n)) is None else 100 * w for n in xs]
        ax.plot(xs, ys, "-", color=color, linewidth=1, label="predicted (graphbench.ladders.waste)")
        if lad.steps:
            total = sum(lad.steps.values())
            ns = sorted(lad.steps)
            measured = [0.0 if n in lad.eager else 100 * (waste(lad.sizes, n) or 0.0) for n in ns]
            area = [12 + 250 * math.sqrt(lad.steps[n] / total) for n in ns]
            ax.scatter(ns, measured, s=area, color=color, alpha=0.55, edgecolors="black", linewidths=0.5,
                       label=f"measured decode steps ({total}; area ~ share)", zorder=3)  # fmt: skip
        else:
            ax.text(0.5, 0.9, "no measured decode steps", transform=ax.transAxes, ha="center", fontsize=8)
        ax.axvline(lad.sizes[-1], color="0.4", linestyle=":", linewidth=0.8, label="top rung (eager above)")
        ax.set_title(lad.name, fontsize=10)
        ax.set_ylabel("padding waste (%)")
        ax.set_ylim(0, max([50.0, *(y + 5 for y in ys if not math.isnan(y))]))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    log2_axis(axes[-1])
    axes[-1].set_xlim(1, span * 1.05)
    axes[-1].set_xlabel("batch size (tokens per step, log scale)")
    save_figure(fig, path, "Padding waste (% of the padded batch) vs batch size per capture ladder", data.environment)
