"""What LoRA adapters cost (the report's "LoRA" table).

One row per graphbench point with adapters loaded x workload: how many adapters, whether batches
with and without them have their own recordings (cudagraph_specialize_lora), the graph keys,
capture seconds and graph memory of its start, the workload's LoRA share (the fraction of requests
naming an adapter), and output tokens/s and TPOT p50 against the same point's workload at share 0.
Shown when any point loads adapters. Pure pandas: no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from graphbench.config.lora import parse_module
from graphbench.errors import GraphbenchError
from graphbench.reports.frame import GRAPHBENCH, metric_median, ok_results, startups_of
from graphbench.reports.point_names import point_namer
from graphbench.reports.stats import percent_change

LORA_COLUMNS = [
    "point", "adapters", "specialised", "graph keys", "capture s", "graph MiB", "workload", "LoRA share",
    "tok/s", "tok/s vs share 0 %", "TPOT p50 ms", "TPOT vs share 0 %",
]  # fmt: skip
LORA_NOTE = (
    "Adapters: LoRA adapters resident in the point's engine. Specialised: batches with and without adapters "
    "have their own CUDA-graph recordings (vLLM's cudagraph_specialize_lora); those without run no LoRA kernel. "
    "LoRA share: the fraction of the workload's requests that name an adapter (spread evenly, the adapters in "
    "turn). The share-0 columns compare with the same point's workload without adapters in its requests."
)


def _adapters(config: Mapping[str, Any]) -> int:
    lora = config.get("lora") if isinstance(config, Mapping) else None
    modules = lora.get("modules") if isinstance(lora, Mapping) else None
    if not isinstance(modules, list):
        return 0
    try:
        return sum(len(parse_module(m)) for m in modules)
    except GraphbenchError:
        return 0


def lora_table(results: list[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows for the points that load adapters (empty when none does)."""
    rows = []
    name = point_namer(r for r in ok_results(results) if (r.get("system") or GRAPHBENCH) == GRAPHBENCH)
    for r in ok_results(results):
        config = r.get("config") or {}
        count = _adapters(config)
        if (r.get("system") or GRAPHBENCH) != GRAPHBENCH or not count:
            continue
        specialised = bool((config.get("lora") or {}).get("cudagraph_specialize_lora", True))
        startups = startups_of(r)
        start = startups[-1] if startups else {}
        keys = start.get("num_graphs") if isinstance(start.get("num_graphs"), Mapping) else {}
        memory = start.get("graph_memory_bytes")
        workloads = [w for w in r.get("workloads") or [] if isinstance(w, Mapping)]
        base = {}
        for w in workloads:
            if not w.get("lora_share"):
                base[str(w.get("name"))] = (metric_median(w, "output_tokens_per_s"), metric_median(w, "tpot_p50_ms"))
        for w in workloads:
            share = w.get("lora_share") or 0.0
            plain = str(w.get("name")).replace(f"-lora{share:g}", "") if share else str(w.get("name"))
            tps, tpot = metric_median(w, "output_tokens_per_s"), metric_median(w, "tpot_p50_ms")
            base_tps, base_tpot = base.get(plain, (None, None))
            rows.append([name(r), count, "yes" if specialised else "no",
                         " / ".join(f"{m} {n}" for m, n in keys.items()) or "none", start.get("capture_s"),
                         memory / 2**20 if isinstance(memory, (int, float)) else None, w.get("name"), share,
                         tps, percent_change(tps, base_tps), tpot, percent_change(tpot, base_tpot)])
    return pd.DataFrame(rows, columns=LORA_COLUMNS)
