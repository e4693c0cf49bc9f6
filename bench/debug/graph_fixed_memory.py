"""Where does the ~68 MiB that every capture pays come from? (issue 10)

    python bench/debug/graph_fixed_memory.py     # ~15 s on a GPU

In a fresh process: free device memory (cudaMemGetInfo) and the caching allocator's reserved bytes
around (1) the first trivial CUDA-graph capture, (2) a second one, (3) the first capture holding a
cuBLAS matmul, (4) the first holding a Triton kernel, (5) 100 more trivial graphs. A fixed cost shows
up in (1) (or (3), (4)) and not in (2); a per-graph cost in (5) / 100.
"""

from __future__ import annotations

import torch

MIB = 2**20


def free_and_reserved() -> tuple[int, int]:
    torch.cuda.synchronize()
    return torch.cuda.mem_get_info()[0], torch.cuda.memory_reserved()


def capture(fn, pool, stream) -> torch.cuda.CUDAGraph:
    with torch.cuda.stream(stream):
        fn()  # eager warm-up on the capture stream (loads the kernels, creates handles)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool, stream=stream):
        fn()
    graph.replay()
    return graph


def main() -> None:
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(64, device="cuda")
    pool, stream = torch.cuda.graph_pool_handle(), torch.cuda.Stream()
    keep = []
    steps = [
        ("first trivial graph", lambda: v.add_(1)),
        ("second trivial graph", lambda: v.mul_(1)),
        ("first graph with a cuBLAS matmul", lambda: x @ x),
        ("first graph with a Triton kernel", _triton_call(v)),
    ]
    for name, fn in steps:
        before = free_and_reserved()
        keep.append(capture(fn, pool, stream))
        after = free_and_reserved()
        print(f"{name:<36} free -{(before[0] - after[0]) / MIB:7.1f} MiB   reserved +{(after[1] - before[1]) / MIB:6.1f} MiB")
    before = free_and_reserved()
    for _ in range(100):
        keep.append(capture(lambda: v.add_(1), pool, stream))
    after = free_and_reserved()
    print(f"{'100 more trivial graphs':<36} free -{(before[0] - after[0]) / MIB:7.1f} MiB   "
          f"reserved +{(after[1] - before[1]) / MIB:6.1f} MiB")


def _triton_call(v: torch.Tensor):
    from graphbench.runner.argmax import triton_argmax

    logits = torch.randn(1, 50000, device="cuda")
    return lambda: triton_argmax(logits)


if __name__ == "__main__":
    main()
