"""Time a kernel the way the engine runs it: many calls recorded in one CUDA graph, replayed (benchmarks/gemv.py,
skinny_blocks.py, decode_blocks.py). A harness that times Python calls back to back measures launch
overhead instead (docs/DEVELOPING.md, "Lessons the measurements taught")."""

from __future__ import annotations

import statistics
from typing import Callable


def graph_time_us(call: Callable[[int], object], num_calls: int, replays: int = 20, repeats: int = 7) -> float:
    """Median time per call of a CUDA graph holding num_calls calls (call(i) issues call i: rotate inputs
    with i so that each call streams its own memory, not what the call before left in L2)."""
    import torch

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
