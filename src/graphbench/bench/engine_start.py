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
    from graphbench.runner.records import startup_record

    # cold: this config's compile cache was cleared first, or held nothing for it (a new hash)
    return startup_record(engine.report, engine.dispatcher.capture_sizes, engine.dispatcher.mixed_sizes,
                          cold=cold, total_s=wall_s)


def start_engine(config: EngineConfig, cold: bool):
    """(engine, its startup record); cold: this config's compile cache is cleared first."""
    import torch

    from graphbench.runner.engine import Engine

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    started = time.perf_counter()
    engine = Engine(config, fresh_compile=cold)
    return engine, startup_dict(engine, cold, time.perf_counter() - started)
