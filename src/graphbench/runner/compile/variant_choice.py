"""Keep a compile_sizes variant only where it makes the step faster (-O3's measured choice).

-O3 compiles a concrete-size variant of each piece for the small decode sizes, its GEMMs autotuned by
Inductor (compile/pieces.py). Inductor times each GEMM alone; in the step, on the H200, the variants
lost to the dynamic pieces (graphbench's fused add-norm kernels + cuBLAS) at batch 2/4/8: llama-3.2-1b
steps of 1.318 / 1.245 / 1.344 ms against -O2's 1.124 / 1.132 / 1.140 ms (benchmarks/RESULTS.md, 2026-11-30,
8bb0ab8), and PDL was not the difference. So, once compiled, each size's forward is recorded as a CUDA
graph twice, with its variants and with the dynamic pieces, the two replayed in turn and timed with
CUDA events, and the faster is kept. The start-up report records both times per size.
compilation.static_variants = always keeps every variant unmeasured (vLLM's -O3).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field


ALWAYS_NOTE = "compilation.static_variants = always"

# A variant is kept when its step is at least this much faster than the dynamic pieces' step: on a
# tie the dynamic code (shared by every size, and what -O2 runs) stays.
MIN_GAIN = 0.01
NUM_ROUNDS = 5  # rounds of (variants, dynamic) replays, the order alternating between rounds
NUM_REPLAYS = 10  # replays timed together in a round


@dataclass
class SizeTiming:
    size: int
    static_ms: float  # median step (one forward replay) with this size's compiled variants
    dynamic_ms: float  # the same step with the dynamic pieces
    kept: str  # "static" or "dynamic"


@dataclass
class VariantChoice:
    """What the engine did with its compile_sizes variants, for the start-up report."""

    policy: str  # "measured", "always" (every variant kept, unmeasured) or "none" (no variants)
    note: str = ""  # why nothing was measured, when nothing was
    seconds: float = 0.0
    sizes: list[SizeTiming] = field(default_factory=list)
    # sizes whose every variant is its traced piece (graphbench's kernels run each projection there):
    # nothing compiled, nothing timed
    piece_sizes: list[int] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def choose(static_ms: float, dynamic_ms: float, min_gain: float = MIN_GAIN) -> str:
    """'static' when the variants' step is at least min_gain faster than the dynamic one, else 'dynamic'."""
    return "static" if static_ms < dynamic_ms * (1.0 - min_gain) else "dynamic"


def skip_reason(*, device_type: str, tp_size: int, policy: str = "measure") -> str:
    """Why the variants are kept unmeasured ('' when they are measured); policy: compilation.static_variants."""
    if policy == "always":
        return ALWAYS_NOTE
    if device_type != "cuda":
        return f"timing needs CUDA graphs; running on {device_type}"
    if tp_size > 1:
        # every rank would time (and may choose) on its own, across collectives that wait for the others
        return f"tensor parallel ({tp_size} ranks): the ranks' choices could differ"
    return ""


def choose_static_variants(engine) -> VariantChoice:
    """Time each compile_sizes size with and without its variants; keep the faster (see module doc)."""
    sizes = list(engine.config.compilation.compile_sizes or [])
    backend = engine.compiled.backend
    if not sizes:
        return VariantChoice("none")
    reason = skip_reason(device_type=engine.device.type, tp_size=engine.config.parallel.tensor_parallel_size,
                         policy=engine.config.compilation.static_variants)
    if reason:
        return VariantChoice("always", note=reason)
    started = time.perf_counter()
    choice = VariantChoice("measured")
    # nothing to time where the variants are the pieces the dynamic code runs (pieces.own_kernels_at)
    choice.piece_sizes = [size for size in sizes if backend.variants_are_pieces(size)]
    for size in sizes:
        if size in choice.piece_sizes:
            backend.use_static_size(size, False)
            continue
        static_ms, dynamic_ms = _time_size(engine, size)
        kept = choose(static_ms, dynamic_ms)
        choice.sizes.append(SizeTiming(size, round(static_ms, 4), round(dynamic_ms, 4), kept))
        backend.use_static_size(size, kept == "static")
    choice.seconds = time.perf_counter() - started
    return choice


def _time_size(engine, size: int) -> tuple[float, float]:
    """(variants ms, dynamic ms): the median replay of the forward at this size recorded both ways."""
    import torch

    samples = _record_and_time(engine, size)  # its recordings are gone when it returns
    # Their pool is released only once no recording holds it: left cached, it would be handed back
    # during the engine's capture and shrink the graph memory measured there (by ~70 MiB on the H200).
    torch.cuda.synchronize(engine.device)
    torch.cuda.empty_cache()
    return statistics.median(samples["static"]), statistics.median(samples["dynamic"])


def _record_and_time(engine, size: int) -> dict[str, list[float]]:
    import torch

    from graphbench.runner.kernels.pdl import graph_launches
    from graphbench.runner.scheduler import BatchDescriptor

    runner, backend = engine.runner, engine.compiled.backend
    dql, max_reqs = engine.dispatcher.decode_query_len, engine.inputs.max_num_reqs
    uniform = size % dql == 0 and size // dql <= max_reqs
    num_reqs = size // dql if uniform else min(size, max_reqs)
    descriptor = BatchDescriptor(size, num_reqs if uniform else None, uniform)
    pool = torch.cuda.graph_pool_handle()
    graphs = {}
    with graph_launches():  # launched as in the engine's own recordings (PDL)
        for kind in ("static", "dynamic"):
            backend.use_static_size(size, kind == "static")
            graphs[kind] = runner.record_forward(size, num_reqs, descriptor, pool)
    samples: dict[str, list[float]] = {"static": [], "dynamic": []}
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for kind in graphs:  # one untimed replay each
        graphs[kind].replay()
    for round_ in range(NUM_ROUNDS):
        order = ("static", "dynamic") if round_ % 2 == 0 else ("dynamic", "static")
        for kind in order:
            begin.record()
            for _ in range(NUM_REPLAYS):
                graphs[kind].replay()
            end.record()
            end.synchronize()
            samples[kind].append(begin.elapsed_time(end) / NUM_REPLAYS)
    return samples
