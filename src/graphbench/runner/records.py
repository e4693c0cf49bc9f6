"""What the engine records: per-step records and the start-up report."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from graphbench.runner.scheduler import BatchDescriptor


@dataclass
class StepRecord:
    """What one step was and how long it took (host wall time, synchronised by the sampled tokens; from the end
    of the step before while requests were running: StepClock)."""

    descriptor: BatchDescriptor
    seconds: float
    runtime_mode: str = "NONE"
    padded_tokens: int = 0
    # of `seconds`, the host's scheduling and launching of this step; the rest is waiting for tokens (with
    # asynchronous scheduling: the previous step's) and what the caller did since the step before
    launch_seconds: float = 0.0
    capture_seconds: float = 0.0  # of `seconds`, recording a key this step was the first to need (capture on demand)


class StepClock:
    """When a step began, for its record: at the end of the step before while requests were running, else at
    its own start (the engine sat idle: no request, or the caller waiting for arrivals). Timed from its own
    start alone, a step hid what the caller did between steps: with asynchronous scheduling the device
    finished meanwhile and the step's wait for tokens shrank by as much, so 0.3 ms of host delay a step made
    SmolLM2's decode steps read 61% shorter while its tokens/s fell 18% (benchmarks/RESULTS.md, 2026-12-06,
    the gate's A/A and A/B on an H100)."""

    __slots__ = ("_busy_since",)
    # a result's environment.step_clock (bench/point.py): this clock; absent in files written before it, whose
    # steps ran from their own start (compare and gate warn across the two: reports/compare_match.py)
    VERSION = 2

    def __init__(self) -> None:
        self._busy_since: float | None = None

    def lap(self, started: float, busy: bool) -> float:
        """Seconds of the step that started at `started` and ends now (from the end of the step before, if the
        engine was busy then); the next step begins now if busy (requests still running), else at its own start."""
        begun = started if self._busy_since is None else self._busy_since
        return self.ended(busy) - begun

    def ended(self, busy: bool) -> float:
        """Now; the next step begins here if busy, else at its own start (a step that ran nothing; drain())."""
        now = time.perf_counter()
        self._busy_since = now if busy else None
        return now


@dataclass
class StartupReport:
    """Seconds per start-up phase, graph memory, and the KV cache it ended with."""

    load_seconds: float = 0.0
    kv_cache_seconds: float = 0.0
    dynamo_seconds: float = 0.0
    inductor_seconds: float = 0.0
    compile_sizes_seconds: float = 0.0
    compile_import_seconds: float = 0.0  # importing torch's compile stack (not compile work; see compiler.py)
    compile_from_cache: bool = False
    compile_loaded: bool = False  # warm start loaded the saved compiled forward (no Dynamo trace)
    compile_loaded_seconds: float = 0.0
    compile_cache_rebuilt: bool = False  # the cache entry was unreadable and was compiled afresh
    compile_cache_dir: str | None = None
    capture_seconds: float = 0.0
    # a cold start's kernel launches compiled ahead of the capture, from threads, and the seconds (inside capture's)
    capture_precompiled: list = field(default_factory=lambda: [0, 0.0])
    graph_memory_bytes: int = 0  # free device memory before capture minus after, + graph_setup_bytes (MACHINERY §1.7)
    graph_pool_bytes: int = 0  # of which the allocator reserved for the recordings' pool
    graph_setup_bytes: int = 0  # of graph memory: the capture stream's cuBLAS setup (engine_startup.pay_graph_setup)
    capture_log: list = field(default_factory=list)  # [mode, num_tokens, seconds, memory bytes] per key
    num_graphs: dict = field(default_factory=dict)  # dispatcher keys per runtime mode
    num_recordings: dict = field(default_factory=dict)  # CUDA graphs recorded (piecewise: per piece)
    cudagraph_mode: dict = field(default_factory=dict)  # requested, resolved, reason
    total_seconds: float = 0.0
    num_kv_blocks: int = 0
    num_kv_tokens: int = 0
    kv_cache_bytes: int = 0
    weights_bytes: int = 0
    static_variants: dict = field(default_factory=dict)  # compile_sizes variants kept or not (variant_choice.py)
    # the projections' kernels: {"source": measured | loaded | shared | rules | earlier in this process, "seconds",
    # "choices"} (kernel_timing.py)
    kernel_choices: dict = field(default_factory=dict)
    deferred_recordings: int = 0  # keys start-up left for their first use (capture on demand)
    extra: dict = field(default_factory=dict)

    @property
    def compile_seconds(self) -> float:
        return self.dynamo_seconds + self.inductor_seconds + self.compile_sizes_seconds + self.compile_loaded_seconds


def startup_record(report: StartupReport, capture_sizes: Sequence[int], mixed_sizes: Sequence[int] | None, *,
                   cold: bool, total_s: float) -> dict[str, Any]:
    """A start-up report as a result's `startup` record (docs/RESULTS_SCHEMA.md): total_s, and where the time went;
    cold: this config's compile cache was cleared first (a start that found nothing in it is cold too)."""
    r = report
    compiled = r.compile_cache_dir is not None
    return {
        "cold": cold or (compiled and not r.compile_from_cache), "cache_cleared": cold, "total_s": total_s, "load_s": r.load_seconds, "kv_cache_s": r.kv_cache_seconds,
        "dynamo_s": r.dynamo_seconds, "inductor_s": r.inductor_seconds, "compile_sizes_s": r.compile_sizes_seconds,
        "compile_import_s": r.compile_import_seconds,
        "loaded_s": r.compile_loaded_seconds, "compile_loaded": r.compile_loaded, "capture_s": r.capture_seconds,
        "graph_memory_bytes": r.graph_memory_bytes, "graph_pool_bytes": r.graph_pool_bytes,
        "graph_setup_bytes": r.graph_setup_bytes, "num_graphs": r.num_graphs, "num_recordings": r.num_recordings,
        "cudagraph_mode": r.cudagraph_mode, "kv_cache_tokens": r.num_kv_tokens, "kv_cache_bytes": r.kv_cache_bytes, "weights_bytes": r.weights_bytes,
        "compile_cache_dir": r.compile_cache_dir,
        "capture_sizes": list(capture_sizes),
        "mixed_capture_sizes": mixed_sizes,  # None: the one ladder served both phases
        "static_variants": r.static_variants,
        "kernel_choices": r.kernel_choices,
        # timing graphbench's projection kernels (a cold start) or loading them (kernel_timing.load_or_measure)
        "kernel_choices_s": float((r.kernel_choices or {}).get("seconds", 0.0)),
        "deferred_recordings": r.deferred_recordings,  # keys left for their first use (capture on demand)
        "capture_precompiled": r.capture_precompiled,  # [kernel launches compiled ahead (cold), seconds]
        "capture_log": r.capture_log,
    }  # fmt: skip


def step_kind(record: StepRecord) -> str:
    """decode: every request decodes 1 + k tokens (what a FULL recording is for); mixed: prefill or mixed steps."""
    return "decode" if record.descriptor.uniform else "mixed"


def runtime_modes_by_kind(records: Iterable[StepRecord]) -> dict[str, dict[str, int]]:
    """How many steps of each kind ran in each runtime mode: {"decode": {"FULL": 15}, "mixed": {"NONE": 1}}."""
    counts: dict[str, Counter[str]] = {}
    for record in records:
        counts.setdefault(step_kind(record), Counter())[record.runtime_mode] += 1
    return {kind: dict(sorted(counts[kind].items())) for kind in ("decode", "mixed") if kind in counts}
