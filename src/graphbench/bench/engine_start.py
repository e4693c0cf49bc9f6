"""Starting an engine for a benchmark point, and the startup record a result file keeps of it.

Used in the point's own process (bench/point.py) and in the child that runs a cold start on its own
(bench/cold_start.py).
"""

from __future__ import annotations

import time
from typing import Any

from graphbench.config import EngineConfig


def startup_dict(engine, cold: bool, wall_s: float) -> dict[str, Any]:
    """A started engine's startup record (a result's `startup`): wall_s, and where the time went."""
    r = engine.report
    # cold: this config's compile cache was cleared first, or held nothing for it (a new hash)
    compiled = r.compile_cache_dir is not None
    return {
        "cold": cold or (compiled and not r.compile_from_cache), "cache_cleared": cold, "total_s": wall_s, "load_s": r.load_seconds, "kv_cache_s": r.kv_cache_seconds,
        "dynamo_s": r.dynamo_seconds, "inductor_s": r.inductor_seconds, "compile_sizes_s": r.compile_sizes_seconds,
        "compile_import_s": r.compile_import_seconds,
        "loaded_s": r.compile_loaded_seconds, "compile_loaded": r.compile_loaded, "capture_s": r.capture_seconds,
        "graph_memory_bytes": r.graph_memory_bytes, "graph_pool_bytes": r.graph_pool_bytes, "num_graphs": r.num_graphs, "num_recordings": r.num_recordings,
        "cudagraph_mode": r.cudagraph_mode, "kv_cache_tokens": r.num_kv_tokens, "kv_cache_bytes": r.kv_cache_bytes, "weights_bytes": r.weights_bytes,
        "compile_cache_dir": r.compile_cache_dir,
        "capture_sizes": list(engine.dispatcher.capture_sizes),
        "mixed_capture_sizes": engine.dispatcher.mixed_sizes,  # None: the one ladder served both phases
        "static_variants": r.static_variants,
        "kernel_choices": r.kernel_choices,
        # timing graphbench's projection kernels (a cold start) or loading them (kernel_timing.load_or_measure)
        "kernel_choices_s": float((r.kernel_choices or {}).get("seconds", 0.0)),
        "deferred_recordings": r.deferred_recordings,  # keys left for their first use (capture on demand)
        "capture_precompiled": r.capture_precompiled,  # [kernel launches compiled ahead (cold), seconds]
        "capture_log": r.capture_log,
    }


def start_engine(config: EngineConfig, cold: bool):
    """(engine, its startup record); cold: this config's compile cache is cleared first."""
    import torch

    from graphbench.runner.engine import Engine

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    started = time.perf_counter()
    engine = Engine(config, fresh_compile=cold)
    return engine, startup_dict(engine, cold, time.perf_counter() - started)
