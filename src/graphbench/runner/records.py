"""What the engine records: per-step records and the start-up report."""

from __future__ import annotations

from dataclasses import dataclass, field

from graphbench.runner.scheduler import BatchDescriptor


@dataclass
class StepRecord:
    """What one step was and how long it took (host wall time, synchronised by the sampled tokens)."""

    descriptor: BatchDescriptor
    seconds: float
    runtime_mode: str = "NONE"
    padded_tokens: int = 0
    # of `seconds`, the host's scheduling and launching of this step; the rest is waiting for tokens
    # (with asynchronous scheduling: the previous step's)
    launch_seconds: float = 0.0
    capture_seconds: float = 0.0  # of `seconds`, recording a key this step was the first to need (capture on demand)


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
    graph_memory_bytes: int = 0  # free device memory before capture minus after (docs/MACHINERY.md §1.7)
    graph_pool_bytes: int = 0  # of which the allocator reserved for the recordings' pool
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
