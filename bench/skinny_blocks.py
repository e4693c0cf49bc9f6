"""The skinny GEMM's blocks for a projection shape: a grid of (BLOCK_N, BLOCK_K, SPLIT_K, warps, stages)
against cuBLAS, each timed inside a CUDA graph (how kernels/skinny_gemm.py's MEASURED_BEST is filled).

    python bench/skinny_blocks.py --shapes 128256x2048,128256x4096 --rows 64 --out skinny-blocks.json

Per config: a graph of 10 launches over weight copies used in turn (so each launch streams its weights
from memory, not L2), replayed 5 times; the median per launch. cuBLAS (torch's F.linear) the same way.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics


def graph_us(fn, copies: list, launches: int = 10, replays: int = 5) -> float:
    import torch

    for w in copies:  # compile / load outside the recording
        fn(w)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(launches):
            fn(copies[i % len(copies)])
    graph.replay()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(replays):
        begin.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end) * 1e3 / launches)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="128256x2048,128256x4096", help="N x K of each weight")
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    import torch
    import torch.nn.functional as F

    from graphbench.runner.kernels.skinny_gemm import skinny_gemm

    results = []
    for spec in args.shapes.split(","):
        n, k = (int(v) for v in spec.split("x"))
        weight_bytes = n * k * 2
        copies = [torch.randn(n, k, dtype=torch.bfloat16, device="cuda") * 0.02
                  for _ in range(max(2, -(-2 * 60 * 2**20 // weight_bytes)))]  # >= 120 MiB in turn: past L2
        x = torch.randn(args.rows, k, dtype=torch.bfloat16, device="cuda")
        cublas = graph_us(lambda w: F.linear(x, w), copies)
        reference = F.linear(x, copies[0]).float()
        rows = []
        for block_n, block_k, splits, warps, stages in itertools.product((64, 128), (64, 128), (1, 2), (4, 8), (3, 5)):
            if k % (block_k * splits) or (block_n == 64 and warps == 8):
                continue
            config = (block_n, block_k, splits, warps, stages)
            try:
                err = (skinny_gemm(x, copies[0], None, config=config).float() - reference).abs().max().item()
                us = graph_us(lambda w: skinny_gemm(x, w, None, config=config), copies)
            except Exception as exc:  # a config this GPU cannot run (shared memory)
                print(f"{spec} {config}: {type(exc).__name__}", flush=True)
                continue
            rows.append({"config": list(config), "us": us, "max_abs_err": err})
            print(f"{spec} rows {args.rows} {config}: {us:8.2f} us (cuBLAS {cublas:.2f})", flush=True)
        best = min(rows, key=lambda r: r["us"]) if rows else None
        floor = weight_bytes / 4.2e12 * 1e6
        results.append({"shape": [n, k], "rows": args.rows, "cublas_us": cublas, "best": best, "grid": rows,
                        "floor_us_at_4.2TBps": floor})
        if best:
            print(f"{spec}: best {tuple(best['config'])} {best['us']:.2f} us against cuBLAS {cublas:.2f} us "
                  f"({cublas / best['us']:.3f}x); weights at 4.2 TB/s {floor:.1f} us", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
