"""The banner a report opens with when its results come from the CPU: what such a run can and cannot show.

On the CPU every cudagraph mode resolves to NONE (runner/dispatcher.py): nothing is captured, nothing
replayed, nothing padded. A reader must not take the report's zero graph memory and zero padding for
measurements of CUDA graphs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graphbench.reports.frame import GRAPHBENCH, ok_results
from graphbench.reports.point_names import point_namer

CAN = ("compile start-up cold vs warm, the compile cache (a warm start loads the compiled code instead of "
       "compiling it again), eager and compiled tokens/s on this CPU, and the padding each ladder would pay "
       "for the batch sizes measured (predicted, in the Padding table and chart)")
CANNOT = "graph memory, capture time, graph replay speed, and measured padding"


def cpu_points(results: list[Mapping[str, Any]]) -> list[str]:
    """Labels of the successful graphbench points that ran on the CPU (with the model where they are of several,
    reports.point_names)."""
    on_cpu = [r for r in ok_results(results)
              if (r.get("system") or GRAPHBENCH) == GRAPHBENCH and (r.get("environment") or {}).get("device") == "cpu"]
    return list(map(point_namer(on_cpu), on_cpu))


def cpu_banner(results: list[Mapping[str, Any]]) -> str:
    """'' unless some graphbench point ran on the CPU; else one plain paragraph."""
    on_cpu = cpu_points(results)
    if not on_cpu:
        return ""
    every = [r for r in ok_results(results) if (r.get("system") or GRAPHBENCH) == GRAPHBENCH]
    which = ("these results come from the CPU" if len(on_cpu) == len(every)
             else f"{len(on_cpu)} of the {len(every)} graphbench points ran on the CPU ({', '.join(on_cpu)})")
    return (f"CPU run: no CUDA graph was recorded. CUDA graphs need a GPU: {which}, where every cudagraph mode "
            f"runs as NONE. What this run can show: {CAN}. What it cannot: {CANNOT}; run on a GPU for those.")
