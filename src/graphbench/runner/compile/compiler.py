"""torch.compile of the model forward at start-up: token dimension dynamic, no guards, no recompiles."""

from __future__ import annotations

import inspect
import logging
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import torch

from graphbench.runner.compile.splitting import CompileStats, SplittingBackend
from graphbench.runner.compile.compile_stack import import_compile_stack

log = logging.getLogger("graphbench.compile")


@dataclass
class CompileTimes:
    dynamo_seconds: float = 0.0
    inductor_seconds: float = 0.0  # compiling (cold) or loading from Inductor's caches
    static_inductor_seconds: float = 0.0
    loaded_seconds: float = 0.0  # warm start: loading the saved split graph and pieces (no Dynamo)
    loaded: bool = False
    import_seconds: float = 0.0  # importing the compile stack (none when every piece runs as traced)


def use_cache_dir(directory: Path) -> None:
    """Point Inductor's and Triton's caches into this config's compile-cache directory (environment only:
    Inductor reads it when it compiles or loads, and is imported only then: compile_stack.py)."""
    directory.mkdir(parents=True, exist_ok=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(directory / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(directory / "triton")


def start_compile_workers() -> int:
    """Start Inductor's compile subprocesses now; returns Inductor's compile_threads.

    Inductor starts its worker pool lazily and compiles in the main process until the workers have
    imported torch (seconds on a machine without bytecode caches), which a short compile never waits
    for. Started here, right after the cache directory is set (workers inherit it), they are ready
    by the time the compile_sizes variants compile.
    """
    import torch._inductor.config as inductor_config

    threads = int(getattr(inductor_config, "compile_threads", 1) or 1)
    if threads <= 1:
        return threads
    try:
        from torch._inductor.async_compile import AsyncCompile

        AsyncCompile.warm_pool()
        AsyncCompile.use_process_pool()  # submits the pool's readiness probe: the workers start now
    except Exception as exc:  # a torch without these hooks: Inductor starts its pool itself
        log.debug("could not start Inductor's compile workers early: %s", str(exc))
    return threads


@contextmanager
def _no_zero_one_specialisation() -> Iterator[None]:
    """Trace so that the code is valid for every token count, 1 included."""
    import torch.fx.experimental._config as fx_config

    if not hasattr(fx_config, "backed_size_oblivious"):
        yield
        return
    previous = fx_config.backed_size_oblivious
    fx_config.backed_size_oblivious = True
    try:
        yield
    finally:
        fx_config.backed_size_oblivious = previous


class CompiledForward:
    """The compiled model forward. The first call traces and compiles; later calls never recompile."""

    def __init__(self, forward: Callable, backend: SplittingBackend):
        self.backend = backend
        options = {"guard_filter_fn": lambda entries: [False for _ in entries]}
        extra = {}
        if "isolate_recompiles" in inspect.signature(torch.compile).parameters:
            # Several engines in one process compile the same code object: keep their entries apart.
            extra["isolate_recompiles"] = True
        self.times = CompileTimes()
        self._restored = backend.restore()
        if self._restored is not None:
            self.compiled = True
            self.times.loaded, self.times.loaded_seconds = True, backend.stats.load_seconds
            self.times.import_seconds = backend.stats.import_seconds
            return
        self.times.import_seconds = import_compile_stack()
        self._compiled = torch.compile(forward, fullgraph=True, dynamic=False, backend=backend, options=options,
                                       **extra)
        self.compiled = False

    @property
    def stats(self) -> CompileStats:
        return self.backend.stats

    def __call__(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        if self._restored is not None:
            return self._restored(input_ids, positions)
        if not self.compiled:
            return self._first_call(input_ids, positions)
        with torch.compiler.set_stance("fail_on_recompile"):
            return self._compiled(input_ids, positions)

    def _first_call(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        torch._dynamo.mark_dynamic(input_ids, 0)
        torch._dynamo.mark_dynamic(positions, 0)
        self.backend.current_inputs = (input_ids, positions)
        started = time.perf_counter()
        # Each engine adds one entry for CausalLM.forward; the default limit (8) is per code object.
        # (recompile_limit since torch 2.6; cache_size_limit is its alias, which patch() cannot always read)
        limit = "recompile_limit" if "recompile_limit" in torch._dynamo.config._config else "cache_size_limit"
        with _no_zero_one_specialisation(), torch._dynamo.config.patch(**{limit: 1024}):
            out = self._compiled(input_ids, positions)
        total = time.perf_counter() - started
        self.backend.current_inputs = ()
        self.compiled = True
        self.times.inductor_seconds = self.stats.inductor_seconds
        self.times.dynamo_seconds = max(0.0, total - self.stats.inductor_seconds)
        return out

    def finish_startup(self) -> None:
        self.times.static_inductor_seconds = self.stats.static_inductor_seconds
        self.backend.finish_startup()
