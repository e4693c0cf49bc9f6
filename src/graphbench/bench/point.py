"""One benchmark point: start the engine (cold, then warm), run every workload with repeats, write a result.

On CUDA the cold start runs in a child process (bench/cold_start.py), so that the warm start, which
serves the workloads, is this process's first start, as every other point's is.

`graphbench run` calls `run_point` in its own process; `graphbench sweep` starts one such
process per point.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from graphbench import env
from graphbench.bench.environment import environment, machine_name, utc_now
from graphbench.bench.workloads import Workload
from graphbench.config import EngineConfig
from graphbench.reports.store import write_result
from graphbench.env import hatches_set


@dataclass
class PointSpec:
    config: EngineConfig
    workloads: list[Workload]
    label: str
    repeats: int = 3
    startups: tuple[str, ...] = ("warm",)  # "cold" clears this config's compile cache first
    system: str = "graphbench"
    sweep: dict[str, Any] = field(default_factory=dict)
    target_repeat_s: float = 0.0  # closed loops: scale the requests so a repeat lasts about this (0: as given)
    stands_for: list[str] = field(default_factory=list)  # other labels of this very engine (a sweep's)
    same_engine_reason: str = ""


def _compiles(config: EngineConfig) -> bool:
    from graphbench.config import CompileMode

    return config.resolve().compilation.mode != CompileMode.NONE


# "label:kind[,label:kind]": kill | oom | compile-error | hang (in the point's process); worker-exit
# (the Ray worker running the point exits while the point runs: bench/sweep_ray.py); the kinds are env.FAULT_KINDS,
# which checks the value when a command starts
FAULT_ENV = env.INJECT_FAULT


def injected_fault(label: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The fault FAULT_ENV injects into the point `label` (None: none)."""
    text = env.value(FAULT_ENV, "", environ) or ""
    faults = dict(item.split(":", 1) for item in text.split(",") if ":" in item)
    return faults.get(label)


def inject_fault(label: str) -> None:
    """Fault injection for tests of the sweep's failure handling (faults a GPU would produce)."""
    kind = injected_fault(label)
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "oom":
        import torch

        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB (injected fault)")
    elif kind == "compile-error":
        raise RuntimeError("Inductor compilation failed: injected fault")
    elif kind == "hang":
        time.sleep(3600)


def run_point(spec: PointSpec, results_dir: str | Path,
              progress: Callable[[str], None] = lambda message: None) -> Path:
    """Measure one point and write its result file; return the file."""
    from graphbench.bench.cold_start import cold_start_in_child, start_in_child
    from graphbench.bench.driver import run_engine_workload, warm_up
    from graphbench.bench.engine_start import start_engine
    from graphbench.bench.repeats import measure_repeats, workload_record

    inject_fault(spec.label)
    startups, engine = [], None
    for kind in spec.startups:
        # (without compilation a cold start is a warm one: no child process for it)
        own_process = engine is None and _compiles(spec.config)
        if kind == "cold" and own_process:
            progress("cold start (own process)")
            startups.append(cold_start_in_child(spec.config))
            continue
        primed = None
        if (kind == "warm" and own_process and spec.config.model.kernel_search and "cold" not in spec.startups
                and spec.config.model.kernels == "graphbench"):  # (a cold start compiles what it loads itself)
            progress("the round's kernels into the compile cache (own process, unmeasured)")
            primed = start_in_child(spec.config, cold=False)["total_s"]
        if engine is not None:
            engine.close()  # tensor-parallel workers stop (no-op otherwise)
            del engine  # free its memory (graphs, KV cache) before the next start
            gc.collect()
        progress(f"{kind} start")
        engine, startup = start_engine(spec.config, kind == "cold")
        startups.append(startup if primed is None else dict(startup, primed_s=primed))
    from graphbench.runner.records import StepClock

    env = dict(environment(engine.device.type), step_clock=StepClock.VERSION)  # how its steps were timed
    workloads = []
    # The engine and torch's compile stack live until the point ends: frozen out of the collector's walk,
    # the collection before each repeat takes microseconds instead of ~0.4 s (hundreds of thousands
    # of objects), and none of them can stall a step.
    gc.collect()
    gc.freeze()
    try:
        for workload in spec.workloads:
            progress(f"{workload.name}: warm-up")
            first_deferred = len(engine.runner.deferred_log)
            warm_up(engine, workload)
            measured, repeats, calibration = measure_repeats(
                lambda w, i: run_engine_workload(engine, w, seed_offset=i), workload, spec.repeats,
                spec.target_repeat_s, progress)
            record = workload_record(measured, repeats, calibration)
            # capture on demand: the keys this workload recorded first (mostly in its warm-up pass, whose
            # steps the repeats do not count): [mode, tokens, seconds the step waited]
            record["recorded_on_demand"] = engine.runner.deferred_log[first_deferred:]
            workloads.append(record)
    finally:
        gc.unfreeze()  # (in-process callers, e.g. tests: the engine can be collected once it is dropped)
    result = {
        "label": spec.label, "system": spec.system, "status": "ok", "failure": None, "created_utc": utc_now(),
        "environment": env, "model": spec.config.model.model, "config": engine.config.to_dict(),
        "config_hash": engine.config.compute_hash(), "sweep": spec.sweep,
        "startup": startups[-1], "startups": startups, "workloads": workloads,
        "stands_for": list(spec.stands_for), "same_engine_reason": spec.same_engine_reason,
    }
    engine.close()
    return write_result(results_dir, machine_name(env), spec.label, result)


def failed_result(label: str, system: str, config: dict[str, Any] | None, reason: str, stderr_tail: str,
                  sweep: dict[str, Any] | None = None, env: dict[str, Any] | None = None) -> dict[str, Any]:
    """The record of a point that crashed, ran out of memory or timed out."""
    return {"label": label, "system": system, "status": "failed",
            "failure": {"reason": reason, "stderr_tail": stderr_tail[-4000:]}, "created_utc": utc_now(),
            "environment": env or {"switches": hatches_set(), "host": socket.gethostname()},
            "model": (config or {}).get("model", {}).get("model"), "config": config or {},
            "config_hash": None, "sweep": sweep or {}, "startup": None, "startups": [], "workloads": []}
