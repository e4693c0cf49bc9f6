"""CUDA-graph recording and replay, for one compiled piece (PIECEWISE) or the whole forward (FULL); what
the capture phase reports and which batches it warms up (runner/model_runner.py runs it).

A wrapper records its callable once per batch key during the capture phase and afterwards
replays it. Inputs must already sit at the addresses seen at capture (static buffers, or
outputs of earlier pieces, which live in the shared pool). Outputs are kept as non-owning
views, so a recording does not pin its outputs' memory: the next capture can reuse it.
"""

from __future__ import annotations

import gc
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator
from unittest import mock

import torch

from graphbench import env
from graphbench.config.modes import CUDAGraphMode
from graphbench.runner.device import pay_cublas_handle
from graphbench.runner.kernel_choice import row_class
from graphbench.runner.scheduler import BatchDescriptor


@dataclass
class GraphRuntime:
    """Set by the model runner around each forward: which recording applies, and whether to record."""

    mode: CUDAGraphMode = CUDAGraphMode.NONE
    descriptor: BatchDescriptor | None = None
    capturing: bool = False
    pool: Any = None  # shared memory pool of every recording
    stream: torch.cuda.Stream | None = None
    num_captured: dict[str, int] = field(default_factory=lambda: {"FULL": 0, "PIECEWISE": 0})


runtime = GraphRuntime()


@contextmanager
def graph_runtime(mode: CUDAGraphMode, descriptor: BatchDescriptor | None, capturing: bool = False) -> Iterator[None]:
    previous = (runtime.mode, runtime.descriptor, runtime.capturing)
    runtime.mode, runtime.descriptor, runtime.capturing = mode, descriptor, capturing
    try:
        yield
    finally:
        runtime.mode, runtime.descriptor, runtime.capturing = previous


@contextmanager
def capture_session(pool: Any, stream: torch.cuda.Stream) -> Iterator[None]:
    """Record into one pool on one side stream (both owned by the engine); gc frozen meanwhile."""
    runtime.pool, runtime.stream = pool, stream
    gc.collect()
    gc.freeze()
    with ExitStack() as stack:
        # torch.cuda.graph() runs gc.collect() and empty_cache() on every entry: hundreds of
        # captures would spend most of their time there. Done once above instead.
        stack.enter_context(mock.patch("gc.collect", lambda *args: 0))
        stack.enter_context(mock.patch("torch.cuda.empty_cache", lambda: None))
        try:
            yield
        finally:
            gc.unfreeze()
            runtime.pool = runtime.stream = None


def weak_ref(value: Any) -> Any:
    """A non-owning view of a CUDA tensor (or a tuple/list of them)."""
    if isinstance(value, torch.Tensor):
        storage = value.untyped_storage()
        alias = torch._C._construct_storage_from_data_pointer(storage.data_ptr(), value.device, storage.nbytes())
        return torch.empty(0, dtype=value.dtype, device=value.device).set_(
            alias, value.storage_offset(), value.size(), value.stride())
    if isinstance(value, (tuple, list)):
        return type(value)(weak_ref(v) for v in value)
    return value


def _addresses(args: tuple) -> tuple[int, ...]:
    return tuple(a.data_ptr() for a in args if isinstance(a, torch.Tensor))


@dataclass
class _Recording:
    graph: torch.cuda.CUDAGraph
    output: Any
    input_addresses: tuple[int, ...]
    num_replays: int = 0


# Input addresses are checked on a recording's first replays (where a buffer bug would show), or on
# every replay with the debug hatch GRAPHBENCH_CHECK_GRAPH_INPUTS=1: the check reads every argument's
# data_ptr, ~17 times in a piecewise step, for inputs that are static by construction (the engine's
# buffers and the recorded outputs of the pieces before).
NUM_CHECKED_REPLAYS = 3


class CUDAGraphWrapper:
    """Records and replays `fn` when the step's runtime mode is this wrapper's mode."""

    def __init__(self, fn: Callable[..., Any], mode: CUDAGraphMode, name: str):
        self.fn, self.mode, self.name = fn, mode, name
        self.recordings: dict[BatchDescriptor, _Recording] = {}
        self.check_all_replays = env.hatch(env.CHECK_GRAPH_INPUTS)

    def __call__(self, *args: Any) -> Any:
        if runtime.mode != self.mode:
            return self.fn(*args)
        key = runtime.descriptor
        recording = self.recordings.get(key)
        if recording is None:
            if not runtime.capturing:
                raise RuntimeError(f"{self.name}: no {self.mode.value} recording for {key} (dispatcher bug)")
            return self._record(key, args)
        if recording.num_replays < NUM_CHECKED_REPLAYS or self.check_all_replays:
            recording.num_replays += 1
            if _addresses(args) != recording.input_addresses:
                raise RuntimeError(f"{self.name}: inputs moved since the {key} recording; replay would read stale memory")
        recording.graph.replay()
        return recording.output

    def _record(self, key: BatchDescriptor, args: tuple) -> Any:
        graph = torch.cuda.CUDAGraph()
        # relaxed: a kernel variant first launched inside a recording may load its module there (Triton's
        # first launch calls cuModuleLoadData, which CUDA's global mode refuses while a stream captures):
        # the capture's warm-up runs one batch of each kind of kernels, not every batch (model_runner)
        with torch.cuda.graph(graph, pool=runtime.pool, stream=runtime.stream, capture_error_mode="relaxed"):
            output = self.fn(*args)
        self.recordings[key] = _Recording(graph, weak_ref(output), _addresses(args))
        runtime.num_captured[self.mode.value] += 1
        return output


@dataclass
class CaptureReport:
    seconds: float = 0.0
    memory_bytes: int = 0
    pool_bytes: int = 0  # what the caching allocator reserved for the recordings (their memory pool)
    num_graphs: dict[str, int] = field(default_factory=dict)
    # one row per dispatcher key in capture order: [mode, num_tokens, seconds, free-memory delta bytes];
    # what vLLM-style estimates sample (benchmarks/graph_memory.py) and the capture-time model fits
    per_key: list[list] = field(default_factory=list)
    deferred: int = 0  # keys left for their first use (capture on demand)
    precompiled: list = field(default_factory=lambda: [0, 0.0])  # [launches compiled ahead (cold), seconds]


def pay_first_capture(stream: torch.cuda.Stream, dtype: torch.dtype, size: int) -> int:
    """Run and record one cuBLAS matmul ([64, size] x [size, size]) on the stream the engine's recordings
    will use; the device memory that cost: the stream's cuBLAS workspace (32 MiB on an H100; benchmarks/
    RESULTS.md, 2026-12-06). A warm start had paid it inside its first recording, a cold start in its
    kernel-choice timing, before the capture's reading. Not counted: cuBLAS's handle and code and the current
    stream's workspace (device.pay_cublas_handle, ~100 MiB), which every CUDA start pays, graphs or not."""
    device = stream.device
    pay_cublas_handle(device, dtype, size)  # (the engine has paid it: here for a caller that has not)
    x = torch.ones(64, size, device=device, dtype=dtype)
    w = torch.ones(size, size, device=device, dtype=dtype)
    torch.cuda.empty_cache()  # (torch.cuda.graph empties it on entry: cached blocks would read as negative cost)
    free_before = torch.cuda.mem_get_info(device)[0]
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        torch.nn.functional.linear(x, w)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream, capture_error_mode="relaxed"):  # (as the engine's recordings)
        torch.nn.functional.linear(x, w)
    graph.replay()
    torch.cuda.synchronize(device)
    del graph
    torch.cuda.empty_cache()  # the recording's pool: what stays is the stream's cuBLAS setup
    kept = free_before - torch.cuda.mem_get_info(device)[0]
    del x, w
    torch.cuda.empty_cache()
    return max(0, kept)


def warmup_batches(batches: list[tuple[int, int, bool, bool]]) -> list[tuple[int, int, bool, bool]]:
    """The batches (tokens, requests, uniform decode, adapters) the capture runs eagerly before its
    recordings, in the order given: the first of each kind of kernels: its row class (kernel_choice.py:
    one row, the skinny GEMM's 16, 32 and 64-row tiles, more: cuBLAS), uniform decode or not, adapters or
    not. Running every batch instead made an H200 warm start ready in 5.51 against 4.55 s
    for the same graph memory (benchmarks/RESULTS.md, 2026-12-03, b54438c)."""
    first: dict[tuple, tuple[int, int, bool, bool]] = {}
    for batch in batches:
        first.setdefault((row_class(batch[0]), batch[2], batch[3]), batch)
    return list(first.values())


def graph_launches_if_triton():
    """runner/kernels/pdl.py's graph_launches (a no-op without Triton, where no kernel of graphbench's runs)."""
    try:
        from graphbench.runner.kernels.pdl import graph_launches
    except ImportError:
        from contextlib import nullcontext

        return nullcontext()
    return graph_launches()
