"""Padding waste vs batch size per capture ladder: the predicted curve and the measured steps.

One panel per ladder a graphbench point asked for (reports.frame.asked_ladder: the captured one, or on
a device that records no CUDA graph, the CPU, the config's; a label the point stands for adds the ladder
it asked for, reports.aliases). Predicted: graphbench.ladders.waste on that ladder. Measured: the step
token counts of its workloads (batch_size_histogram, summed over repeats): a uniform-decode workload
(kind "decode" / "uniform-decode") contributes every step, any other workload its decode steps (token
count <= concurrency x decode query length), each point's steps once per ladder. Their share of the
steps is drawn as stems (right axis). Where graphs were recorded, each batch size is also a point at the
waste its steps paid (eager steps, above the top rung, counting zero); where none was, the panel says
"predicted: no CUDA graph was recorded on this device" and marks the measured sizes on the curve.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphbench.ladders import waste
from graphbench.ladders.padding import token_waste
from graphbench.reports.aliases import alias_groups, alias_ladder, aliases_of, ladder_mode
from graphbench.reports.figures import NoData, ReportData, log2_axis, new_figure, save_figure
from graphbench.reports.frame import GRAPHBENCH, asked_ladder, graphs_recorded
from graphbench.reports.padding_table import ladder_name
from graphbench.reports.point_names import point_namer

PREDICTED_ONLY = "predicted: no CUDA graph was recorded on this device"

UNIFORM_DECODE_KINDS = ("decode", "uniform-decode", "uniform_decode")


@dataclass
class LadderData:
    name: str
    sizes: tuple[int, ...]
    recorded: bool = True  # False: no graph was recorded (the curve is a prediction only)
    steps: dict[int, int] = field(default_factory=dict)  # measured batch size -> steps
    eager: set[int] = field(default_factory=set)  # batch sizes some point ran eager
    points: list[str] = field(default_factory=list)  # the labels that asked for this ladder (point_names)
    sources: set[int] = field(default_factory=set)  # id() of the results whose steps are counted


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
    """Distinct ladders the graphbench points asked for (recorded or not), with their measured steps."""
    found: dict[tuple[tuple[int, ...], bool], LadderData] = {}
    aliases = alias_groups(results)
    name = point_namer([r for r in results if r.get("system") == GRAPHBENCH])  # (two machines' labels named apart)
    for result in results:
        own = asked_ladder(result)
        if result.get("system") != GRAPHBENCH or own is None:
            continue
        config = result.get("config") if isinstance(result.get("config"), Mapping) else {}
        asks = [(name(result), own, (config.get("compilation") or {}).get("performance_mode"))]
        asks += [(name(dict(result, label=alias)), alias_ladder(result, alias), ladder_mode(alias))
                 for alias in aliases_of(result, aliases)]
        recorded, steps = graphs_recorded(result), measured_steps(result)
        for who, sizes, mode in asks:
            if not sizes:
                continue
            key = (tuple(sizes), recorded)
            if key not in found:
                found[key] = LadderData(ladder_name(config, mode, sizes), key[0], recorded)
            ladder = found[key]
            ladder.points.append(who)
            if id(result) in ladder.sources:
                continue  # an alias asking for the same ladder: the same steps, counted once
            ladder.sources.add(id(result))
            for n, count in steps.items():
                ladder.steps[n] = ladder.steps.get(n, 0) + count
                if n > key[0][-1]:
                    ladder.eager.add(n)
    out = sorted(found.values(), key=lambda lad: (not lad.recorded, lad.name, lad.sizes))
    names = [lad.name for lad in out]
    for lad in out:
        if names.count(lad.name) > 1:
            lad.name += f" [{', '.join(map(str, lad.sizes[:4]))}, ...]"
    return out


def padding_chart(data: ReportData, path: Path) -> None:
    found = ladders(data.results)
    if not found:
        raise NoData("no graphbench point asked for a CUDA-graph ladder")
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    span = max([lad.sizes[-1] for lad in found] + [n for lad in found for n in lad.steps])
    xs = list(range(1, span + 1))
    fig, axes = new_figure(len(found), 1, figsize=(11, 3.0 * len(found) + 1.2), sharex=True)
    axes = [axes] if len(found) == 1 else list(axes)
    for i, (ax, lad) in enumerate(zip(axes, found)):
        _panel(ax, lad, xs, cmap(i % cmap.N), mixed=len({lad.recorded for lad in found}) > 1)
    log2_axis(axes[-1])
    axes[-1].set_xlim(0.9, span * 1.05)
    axes[-1].set_xlabel("batch size (tokens per step, log scale)")
    title = "Padding waste (% of the padded batch) vs batch size per capture ladder"
    if not any(lad.recorded for lad in found):
        title += f"\n({PREDICTED_ONLY})"
    save_figure(fig, path, title, data.environment)


def _panel(ax: Any, lad: LadderData, xs: list[int], color: Any, mixed: bool) -> None:
    ys = [math.nan if (w := waste(lad.sizes, n)) is None else 100 * w for n in xs]
    ax.plot(xs, ys, "-", color=color, linewidth=1, label="predicted (graphbench.ladders.waste)")
    ns = sorted(lad.steps)
    total = sum(lad.steps.values())
    if lad.recorded and ns:
        measured = [0.0 if n in lad.eager else 100 * (waste(lad.sizes, n) or 0.0) for n in ns]
        ax.scatter(ns, measured, s=28, color=color, alpha=0.8, edgecolors="black", linewidths=0.5,
                   label="measured batch sizes (graphs replayed)", zorder=3)  # fmt: skip
    elif ns:
        on_curve = [100 * (waste(lad.sizes, n) or 0.0) for n in ns]
        ax.scatter(ns, on_curve, s=28, facecolors="none", edgecolors=color, linewidths=1.2,
                   label="measured batch sizes (no graph: padding predicted)", zorder=3)  # fmt: skip
    if ns:
        share = ax.twinx()
        shares = [100 * lad.steps[n] / total for n in ns]
        share.vlines(ns, 0, shares, color="0.55", linewidth=2, alpha=0.6)
        share.set_ylim(0, min(105.0, 1.25 * max(shares)))
        share.set_ylabel("share of steps (%)", fontsize=8, color="0.4")
        share.tick_params(axis="y", labelsize=7, colors="0.4")
        share.plot([], [], color="0.55", linewidth=2, alpha=0.6, label=f"measured decode steps ({total}): share")
        predicted = 100 * token_waste(lad.sizes, lad.steps)
        detail = f"the ladder {'pads' if lad.recorded else 'would pad'} {predicted:.1f}% of these decode steps' tokens"
    else:
        ax.text(0.5, 0.9, "no measured decode steps", transform=ax.transAxes, ha="center", fontsize=8)
        detail = "no measured decode steps"
    ax.axvline(lad.sizes[-1], color="0.4", linestyle=":", linewidth=0.8, label="top rung (eager above)")
    asked = ", ".join(lad.points[:4]) + (f" +{len(lad.points) - 4}" if len(lad.points) > 4 else "")
    state = f" - {PREDICTED_ONLY}" if mixed and not lad.recorded else ""
    ax.set_title(f"{lad.name} (asked for by {asked}){state}\n{detail}", fontsize=9)
    ax.set_ylabel("padding waste (%)")
    ax.set_ylim(0, max([50.0, *(y + 5 for y in ys if not math.isnan(y))]))
    ax.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if ns:
        more = share.get_legend_handles_labels()
        handles, labels = handles + more[0], labels + more[1]
        share.set_zorder(ax.get_zorder() - 1)
        ax.patch.set_visible(False)
    ax.legend(handles, labels, fontsize=7, loc="upper right")
