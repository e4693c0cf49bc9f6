"""What a point's capture plan saved at start-up and paid later (the report's "Capture plan" table): the
points with two ladders (ladders/phases.py) or capture on demand (compilation.startup_capture_sizes).

One row per point x workload: the ladders, the recordings made at start-up and those left for their first
use, the start-up's capture seconds and graph memory and the KV tokens it left, and per workload the keys
recorded on demand (mostly in the warm-up pass, whose steps the repeats do not count) with the seconds
the steps waited for them. Over a point's processes each figure is the median: of its warm starts, and of
each process's recordings and stall. Set against a point recording everything at start-up, the capture seconds and
graph MiB saved are what the stalls bought. Pure pandas: no torch.
"""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from graphbench.reports.frame import GRAPHBENCH, median_of, startups_of

CAPTURE_PLAN_COLUMNS = ["point", "ladders", "recorded at start-up", "left for first use", "capture s", "graph MiB",
                        "KV tokens", "workload", "recorded on demand", "stall s"]

CAPTURE_PLAN_NOTE = ("Two ladders: uniform decode steps pad to the decode ladder, mixed and prefill steps to their own "
                     "ladder in tokens (as SGLang's and TensorRT-LLM's prefill graphs). Capture on demand: start-up "
                     "records only the sizes asked for; a step that first needs another key waits while it is "
                     "recorded (first use) or runs eager (never). Capture s, graph MiB and KV tokens are the "
                     "start-up's (warm), each the median over the point's processes; compare them with a point that records every key at start-up: the seconds "
                     "and memory saved against the stall seconds paid.")


def _ladders(startup: Mapping[str, Any]) -> str:
    decode = startup.get("capture_sizes") or []
    mixed = startup.get("mixed_capture_sizes")
    one = f"{len(decode)} sizes" + (f", top {max(decode)}" if decode else "")
    if not isinstance(mixed, list):
        return f"one: {one}"
    two = f"{len(mixed)} sizes, top {max(mixed)}" if mixed else "none (eager)"
    return f"decode {one}; mixed {two}"


def capture_plan_table(results: list[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows for the graphbench points with two ladders or capture on demand (empty when none has)."""
    rows = []
    for result in results:
        if (result.get("system") or GRAPHBENCH) != GRAPHBENCH or result.get("status", "ok") != "ok":
            continue
        startup = result.get("startup") or {}
        deferred = startup.get("deferred_recordings") or 0
        if not deferred and not isinstance(startup.get("mixed_capture_sizes"), list):
            continue
        graphs = sum(v for v in (startup.get("num_graphs") or {}).values() if isinstance(v, int))
        warm = [s for s in startups_of(result) if not s.get("cold")] or [startup]
        head = [result.get("label"), _ladders(startup), graphs - deferred, deferred,
                median_of(s.get("capture_s") for s in warm), median_of(s.get("graph_memory_bytes") for s in warm) / 2**20,
                median_of(s.get("kv_cache_tokens") for s in warm)]
        for workload in result.get("workloads") or []:
            per_process = workload.get("recorded_on_demand_rounds") or [workload.get("recorded_on_demand") or []]
            made = [[k for k in keys if isinstance(k, list) and len(k) == 3] for keys in per_process]
            stalls = [sum(k[2] for k in keys if isinstance(k[2], (int, float))) for keys in made]
            rows.append(head + [workload.get("name"), median_of(len(keys) for keys in made),
                                median_of(stalls)])
    return pd.DataFrame(rows, columns=CAPTURE_PLAN_COLUMNS)
