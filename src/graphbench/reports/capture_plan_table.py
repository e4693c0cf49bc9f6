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
from graphbench.reports.point_names import point_namer, result_model
from graphbench.reports.rounds import result_gpu

SAVED = "saved against every key at start-up"
CAPTURE_PLAN_COLUMNS = ["point", "ladders", "recorded at start-up", "left for first use", "capture s", "graph MiB",
                        "KV tokens", SAVED, "workload", "recorded on demand", "stall s"]

CAPTURE_PLAN_NOTE = ("Two ladders: uniform decode steps pad to the decode ladder, mixed and prefill steps to their own "
                     "ladder in tokens (as SGLang's and TensorRT-LLM's prefill graphs). Capture on demand: start-up "
                     "records only the sizes asked for; a step that first needs another key waits while it is "
                     "recorded (first use) or runs eager (never). Capture s, graph MiB and KV tokens are the "
                     "start-up's (warm), each the median over the point's processes. Saved: against the point of the same ladders "
                     "that records every key at start-up (in this report; of the same model on the same GPU type), the capture seconds and graph memory a plan "
                     "saved and the KV tokens it gained; the stall seconds are what that cost.")


def _ladders(startup: Mapping[str, Any]) -> str:
    decode = startup.get("capture_sizes") or []
    mixed = startup.get("mixed_capture_sizes")
    one = f"{len(decode)} sizes" + (f", top {max(decode)}" if decode else "")
    if not isinstance(mixed, list):
        return f"one: {one}"
    two = f"{len(mixed)} sizes, top {max(mixed)}" if mixed else "none (eager)"
    return f"decode {one}; mixed {two}"


def _start(result: Mapping[str, Any]) -> tuple[str, int, float, float, float]:
    """(ladders, keys left for first use, capture s, graph MiB, KV tokens): the medians of the warm starts."""
    startup = result.get("startup") or {}
    warm = [s for s in startups_of(result) if not s.get("cold")] or [startup]
    return (_ladders(startup), startup.get("deferred_recordings") or 0, median_of(s.get("capture_s") for s in warm),
            median_of(s.get("graph_memory_bytes") for s in warm) / 2**20, median_of(s.get("kv_cache_tokens") for s in warm))


def _saved(start: tuple, reference: tuple | None) -> str:
    """What a plan saved against the same ladders all recorded at start-up ('-' without such a point)."""
    if reference is None or start[1] == 0 or any(v != v for v in start[2:] + reference[2:]):  # (NaN: not measured)
        return "-"
    return (f"{reference[2] - start[2]:.2f} s, {reference[3] - start[3]:,.0f} MiB, "
            f"{start[4] - reference[4]:+,.0f} KV tokens")


def _source(result: Mapping[str, Any], start: tuple) -> tuple[str, str, str]:
    return start[0], result_model(result), result_gpu(result)


def capture_plan_table(results: list[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows for the graphbench points with two ladders or capture on demand (empty when none has)."""
    points = [r for r in results
              if (r.get("system") or GRAPHBENCH) == GRAPHBENCH and r.get("status", "ok") == "ok"]
    starts = [_start(r) for r in points]
    # the same ladders, every key at start-up, of the same model on the same GPU type (another's saves nothing)
    everything = {_source(r, start): start for r, start in zip(points, starts) if start[1] == 0}
    rows = []
    name = point_namer(points)  # (one label on two GPU types, or of two models: named apart)
    for result, start in zip(points, starts):
        startup = result.get("startup") or {}
        if not start[1] and not isinstance(startup.get("mixed_capture_sizes"), list):
            continue
        graphs = sum(v for v in (startup.get("num_graphs") or {}).values() if isinstance(v, int))
        head = [name(result), start[0], graphs - start[1], start[1], *start[2:],
                _saved(start, everything.get(_source(result, start)))]
        for workload in result.get("workloads") or []:
            per_process = workload.get("recorded_on_demand_rounds") or [workload.get("recorded_on_demand") or []]
            made = [[k for k in keys if isinstance(k, list) and len(k) == 3] for keys in per_process]
            stalls = [sum(k[2] for k in keys if isinstance(k[2], (int, float))) for keys in made]
            rows.append(head + [workload.get("name"), median_of(len(keys) for keys in made), median_of(stalls)])
    return pd.DataFrame(rows, columns=CAPTURE_PLAN_COLUMNS)
