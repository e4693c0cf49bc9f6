"""CUDA-graph recording and replay, for one compiled piece (PIECEWISE) or the whole forward (FULL).

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
