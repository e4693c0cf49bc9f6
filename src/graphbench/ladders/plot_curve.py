"""Chart the step-time curve, and what ladders make of it (matplotlib, imported lazily)."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from pathlib import Path

from graphbench.ladders.plot import check_plot_path, save_figure
from graphbench.ladders.step_curve import StepCurve


def curve_footnote(curve: StepCurve) -> str:
    """GPU, versions, commit and date of the measurement, for a chart's footnote."""
    env = curve.meta.get("environment") or {}
    parts = [str(env.get("gpu") or "?"), f"torch {env.get('torch', '?')}", f"triton {env.get('triton', '?')}",
             f"graphbench {env.get('graphbench', '?')}", f"commit {env.get('git_commit') or '?'}",
             str(curve.meta.get("date", "?"))]
    return ", ".join(parts)


def padded_times(curve: StepCurve, sizes: Sequence[int], span: int) -> list[float]:
    """Step ms of batches 1..span under a ladder: its rung's recording, eager above the top (NaN unknown)."""
    rungs = sorted(sizes)
    out = []
    for n in range(1, span + 1):
        i = bisect_left(rungs, n)
        if i < len(rungs) and rungs[i] in curve.graph_ms:
            out.append(curve.graph_ms[rungs[i]])
        elif i == len(rungs) and curve.eager_ms and min(curve.eager_ms) <= n <= max(curve.eager_ms):
            out.append(curve.eager_time(n))
        else:
            out.append(math.nan)
    return out


def plot_step_curve(curve: StepCurve, path: str | Path, ladders: Mapping[str, Sequence[int]] | None = None) -> Path:
    """Step ms and tokens/s against batch size: every size's own recording, eager where measured, and
    each named ladder's padded step time (its staircase)."""
    out = check_plot_path(path)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    sizes = sorted(curve.graph_ms)
    span = sizes[-1]
    fig = Figure(figsize=(10, 7.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax_ms, ax_tps = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    graph = [curve.graph_ms[n] for n in sizes]
    ax_ms.plot(sizes, graph, color="black", linewidth=1.2, label="own FULL recording (no padding)")
    ax_tps.plot(sizes, [n * 1e3 / t for n, t in zip(sizes, graph)], color="black", linewidth=1.2)
    if curve.eager_ms:
        eager = sorted(curve.eager_ms)
        ax_ms.plot(eager, [curve.eager_ms[n] for n in eager], "o--", color="tab:red", ms=3, linewidth=0.8,
                   label="eager (no graph)")
        ax_tps.plot(eager, [n * 1e3 / curve.eager_ms[n] for n in eager], "o--", color="tab:red", ms=3,
                    linewidth=0.8)
    for name, rungs in (ladders or {}).items():
        xs = list(range(1, span + 1))
        times = padded_times(curve, rungs, span)
        (line,) = ax_ms.plot(xs, times, linewidth=1, drawstyle="steps-pre", label=f"{name} ({len(rungs)} graphs, padded)")
        ax_tps.plot(xs, [n * 1e3 / t if t == t else math.nan for n, t in zip(xs, times)], linewidth=1,
                    drawstyle="steps-pre", color=line.get_color())
    if curve.eager_ms and max(curve.eager_ms.values()) > 3 * max(graph):
        ax_ms.set_yscale("log")  # eager steps (host-bound) would flatten the recordings' curve
        ax_ms.set_ylabel("decode step (ms, median, log scale)")
    else:
        ax_ms.set_ylabel("decode step (ms, median)")
        ax_ms.set_ylim(bottom=0)
    ax_ms.grid(True, alpha=0.3)
    ax_ms.legend(fontsize=8)
    ax_tps.set_ylabel("tokens per second")
    ax_tps.set_xlabel("batch size (requests, one token each)")
    ax_tps.set_ylim(bottom=0)
    ax_tps.grid(True, alpha=0.3)
    level = curve.meta.get("optimization_level")
    fig.suptitle(f"Pure-decode step time, {curve.meta.get('model', '?')} -O{level}, "
                 f"context {curve.meta.get('context_tokens', '?')} tokens", fontsize=12)
    fig.supxlabel(curve_footnote(curve), fontsize=7, color="0.35")
    return save_figure(fig, out)
