"""Timing a projection's kernels on the GPU as a decode step runs them (runner/kernel_timing.py's choices,
runner/norm_fold_timing.py's, benchmarks/kernel_grid.py): many launches recorded in one CUDA graph with PDL,
replayed, each launch on its own copy of the weight so that the weights stream from memory as in a step
(together past the L2), not from what the launch before left in L2. A candidate that does not compile (shared
memory) is skipped. Also the search over candidates' blocks and their compiling ahead in threads.
"""

from __future__ import annotations

import functools
import logging
import os
import statistics
from typing import Callable

import torch
import torch.nn.functional as F

log = logging.getLogger("graphbench.engine")

PAST_L2_BYTES = 160 * 2**20  # weight copies a graph streams in turn (an H200's L2 is 60 MiB)
MAX_COPIES = 128


def graph_time_us(call: Callable[[int], object], num_calls: int, replays: int = 20, repeats: int = 7) -> float:
    """Median time per call of a CUDA graph holding num_calls calls (call(i) issues call i: rotate inputs
    with i so that each call streams its own memory, not what the call before left in L2)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(num_calls):  # warm-up: Triton JIT, cuBLAS handles, Inductor autotuning
            call(i)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(num_calls):
            call(i)
    graph.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / (replays * num_calls))
    return statistics.median(samples)


class ProjectionTimer:
    """Times one projection's kernels on copies of its weight (together past the L2)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        self.n, self.k = weight.shape
        self.bias = bias
        num = min(MAX_COPIES, -(-PAST_L2_BYTES // (weight.numel() * weight.element_size())))
        self.copies = [weight] + [weight.clone() for _ in range(num - 1)]
        self.calls = max(8, len(self.copies))
        self.dtype = weight.dtype

    def prepare(self, op: str, kernel: str, candidates: list[tuple], rows: int) -> None:
        """Compile these candidates' kernels ahead of their timing, in parallel."""
        x = torch.empty(rows, self.k, dtype=self.dtype, device=self.copies[0].device)
        compile_all([lambda b=b: launcher(op, kernel, b, x, self.bias)(self.copies[0]) for b in candidates])

    def time(self, op: str, kernel: str, blocks: tuple, rows: int) -> float | None:
        """Microseconds a launch (with the silu-mul after it where a gate_up kernel leaves it), or None
        where the candidate does not run."""
        x = torch.randn(rows, self.k, dtype=self.dtype, device=self.copies[0].device)
        return self.time_run(launcher(op, kernel, blocks, x, self.bias), f"{kernel} {blocks} at {rows} rows")

    def time_run(self, run: Callable[[torch.Tensor], object], what: str) -> float | None:
        """Microseconds a call of run(weight copy), or None where it does not run (a Triton compile out of
        resources, a launch the GPU refuses)."""
        try:
            return graph_time_us(lambda i: run(self.copies[i % len(self.copies)]), self.calls, replays=5, repeats=3)
        except Exception as exc:
            # out of device memory is no property of the candidate: the choice is then made without it, said aloud
            level = logging.WARNING if isinstance(exc, torch.OutOfMemoryError) else logging.DEBUG
            log.log(level, "kernel candidate %s for %dx%d skipped: %s", what, self.n, self.k, exc)
            return None


def launcher(op: str, kernel: str, blocks: tuple, x: torch.Tensor, bias: torch.Tensor | None):
    """weight -> the projection as the engine launches it with this choice."""
    from graphbench.runner.kernels import gemv as gemv_kernels
    from graphbench.runner.kernels import skinny_gemm

    def then_silu(gate_up: torch.Tensor) -> torch.Tensor:
        hidden = gate_up.new_empty((gate_up.shape[0], gate_up.shape[1] // 2))
        gemv_kernels.launch_silu_mul(gate_up, hidden)
        return hidden

    post = then_silu if op == "gate_up" else (lambda y: y)

    def gemv(w):
        out = x.new_empty((1, w.shape[0]))
        gemv_kernels.launch_gemv(x, w, bias, out, *blocks)
        return out

    def gated_gemv(w):
        out = x.new_empty((1, w.shape[0] // 2))
        gemv_kernels.launch_gated_gemv(x, w, out, *blocks)
        return out

    return {"torch": lambda w: post(F.linear(x, w, bias)),
            "gemv": gemv,
            "gated_gemv": gated_gemv,
            "skinny": lambda w: post(skinny_gemm.skinny_gemm(x, w, bias, config=blocks)),
            "gated_skinny": lambda w: skinny_gemm.skinny_gate_up(x, w, config=blocks)}[kernel]


def search(time_one: Callable[[tuple], float | None], coarse: list[tuple],
           neighbours: Callable[[tuple], list[tuple]],
           prepare: Callable[[list[tuple]], None] = lambda blocks: None) -> tuple[tuple, float, int] | None:
    """(blocks, us, candidates timed) of the fastest: the coarse grid, then the neighbours of the two fastest
    so far, up to three rounds (until a round has none new). prepare(blocks) compiles a round's candidates
    first. Two leaders, not one: with one, timing noise between near-ties sent the search down different paths
    in different processes (on the H200, SmolLM2's qkv at 32 rows ended 9% slower in 2 of 4 cold starts:
    benchmarks/RESULTS.md, 2026-12-04, whole-row GEMV tiles)."""
    prepare(coarse)
    timed: dict[tuple, float | None] = {b: time_one(b) for b in coarse}
    for _ in range(3):
        ok = {b: t for b, t in timed.items() if t is not None}
        if not ok:
            return None
        new = []
        for leader in sorted(ok, key=ok.get)[:2]:
            new += [b for b in neighbours(leader) if b not in timed and b not in new]
        if not new:
            break
        prepare(new)
        timed.update((b, time_one(b)) for b in new)
    ok = {b: t for b, t in timed.items() if t is not None}
    best = min(ok, key=ok.get)
    return best, ok[best], len(ok)  # (candidates that failed to compile or run are not counted as timed)


def precompile(run: Callable[[], object]) -> int:
    """Compile, from several threads, the kernels of graphbench's that run() launches (run() itself goes
    through with those launches left out: what it computes is garbage) -> how many distinct launches. A
    failing pass compiles nothing: the launches after it compile their kernels one by one, as without it."""
    from graphbench.runner.kernels.launch import list_launches

    try:
        with list_launches() as launches:
            run()
    except Exception as exc:  # noqa: BLE001 - an optimisation of the start-up, never its failure
        # a warning: the pass that held every batch's activations ran out of memory here unseen (RESULTS, 2026-12-06)
        log.warning("compiling the capture's kernels ahead failed (they compile at their first launch): %s: %s",
                    type(exc).__name__, exc)
        return 0
    compile_all([functools.partial(launcher.launch, grid, args, meta) for launcher, grid, args, meta in launches])
    return len(launches)


def compile_all(calls: list[Callable[[], object]]) -> None:
    """Compile the candidates these launches need, from several threads (Triton compiles mostly outside the
    GIL: LLVM and ptxas), launching nothing; one that does not compile is left to its timing to skip."""
    if len(calls) < 2:
        return
    from concurrent.futures import ThreadPoolExecutor

    from graphbench.runner.kernels.launch import compile_only

    with compile_only(), ThreadPoolExecutor(max_workers=min(len(calls), os.cpu_count() or 1, 16)) as pool:
        for future in [pool.submit(call) for call in calls]:
            try:
                future.result()
            except Exception as exc:  # out of resources: its timing says so again and skips it
                log.debug("kernel candidate not compiled ahead: %s", exc)
