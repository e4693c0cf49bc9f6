"""The skinny GEMM's blocks for a projection shape: a grid of (BLOCK_N, BLOCK_K, SPLIT_K, warps, stages)
against cuBLAS, each timed inside a CUDA graph (how kernels/skinny_gemm.py's MEASURED_BEST is filled).

    python benchmarks/skinny_blocks.py --shapes 128256x2048,128256x4096 --rows 64 --out skinny-blocks.json
    python benchmarks/skinny_blocks.py --shapes 6144x4096,4096x4096 --block-n 16,32,64,128 --splits 1,2,4,8 \
        --warps 4,8 --stages 3,4,5 --jobs 14
    python benchmarks/skinny_blocks.py --gated --shapes 16384x2048,28672x4096 --block-n 16,32,64 --block-k 64,128 \
        --warps 4,8 --stages 3,4,5 --jobs 14

With --gated the shapes are [gate; up] weights and the grid is kernels/skinny_gemm.skinny_gate_up's (BLOCK_N,
BLOCK_K, warps, stages), silu(gate) * up in the GEMM's epilogue, against the two launches it replaces (the
skinny GEMM with its MEASURED_BEST blocks, then the silu-mul kernel) and cuBLAS + silu-mul; launched with PDL,
as the engine records them.

Per config: a CUDA graph of launches over weight copies used in turn (so each launch streams its weights
from memory, not L2), replayed; the median per launch (graphbench.bench.graph_timing). cuBLAS (torch's F.linear) the same way.
With --jobs N the grid's kernels are first compiled by N processes at once (into Triton's cache, which
the timing process then loads from): a wide grid is mostly compile time, and timing stays one process
on the GPU at a time.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json


def grid(args: argparse.Namespace, k: int) -> list[tuple[int, ...]]:
    """The configs of the grid that fit K (K a multiple of BLOCK_K x SPLIT_K): (BLOCK_N, BLOCK_K, SPLIT_K,
    warps, stages), or with --gated (BLOCK_N, BLOCK_K, warps, stages)."""
    ints = lambda text: [int(v) for v in text.split(",") if v]  # noqa: E731
    if args.gated:
        return [c for c in itertools.product(ints(args.block_n), ints(args.block_k), ints(args.warps),
                                             ints(args.stages)) if k % c[1] == 0]
    return [c for c in itertools.product(ints(args.block_n), ints(args.block_k), ints(args.splits), ints(args.warps),
                                         ints(args.stages))
            if k % (c[1] * c[2]) == 0]


def gemm(x, w, config: tuple[int, ...] | None):
    """The skinny GEMM with these blocks (a 5-tuple; None: its MEASURED_BEST), or the gated GEMM's (a 4-tuple)."""
    if config is not None and len(config) == 4:
        from graphbench.runner.kernels.skinny_gemm import skinny_gate_up

        return skinny_gate_up(x, w, config)
    from graphbench.runner.kernels.skinny_gemm import skinny_gemm

    return skinny_gemm(x, w, None, config=config)


def compile_worker(jobs: list[list]) -> None:
    """Launch each (n, k, rows, config) once, a gated config (4 values) with PDL as the timing pass launches
    it (a variant of its own): Triton compiles it into its cache (or says it cannot)."""
    import torch

    from graphbench.runner.kernels.pdl import graph_launches

    for n, k, rows, config in jobs:
        try:
            with graph_launches() if len(config) == 4 else contextlib.nullcontext():
                gemm(torch.zeros(rows, k, dtype=torch.bfloat16, device="cuda"),
                     torch.zeros(n, k, dtype=torch.bfloat16, device="cuda"), tuple(config))
        except Exception:  # noqa: BLE001 - a config this GPU cannot run: the timing pass reports it
            pass
    torch.cuda.synchronize()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="128256x2048,128256x4096", help="N x K of each weight")
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--block-n", default="64,128")
    p.add_argument("--block-k", default="64,128")
    p.add_argument("--splits", default="1,2")
    p.add_argument("--warps", default="4,8")
    p.add_argument("--stages", default="3,5")
    p.add_argument("--jobs", type=int, default=1, help="processes compiling the grid before it is timed")
    p.add_argument("--gated", action="store_true", help="time skinny_gate_up's blocks on [gate; up] weights (no --splits)")
    p.add_argument("--out", default=None)
    p.add_argument("--compile-jobs", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.compile_jobs:
        compile_worker(json.loads(args.compile_jobs))
        return
    shapes = [tuple(int(v) for v in spec.split("x")) for spec in args.shapes.split(",")]
    import torch
    import torch.nn.functional as F

    from graphbench.bench.graph_timing import graph_time_us
    from kernel_grid import precompile, time_grid

    if args.jobs > 1:
        precompile(__file__, [[n, k, args.rows, list(c)] for n, k in shapes for c in grid(args, k)], args.jobs)
    from graphbench.runner.kernels.skinny_gemm import MEASURED_BEST as measured

    from graphbench.runner.kernels.gemv import launch_silu_mul
    from graphbench.runner.kernels.pdl import graph_launches

    def then_silu(gate_up):  # the engine's second launch after a gate/up projection
        hidden = gate_up.new_empty((gate_up.shape[0], gate_up.shape[1] // 2))
        launch_silu_mul(gate_up, hidden)
        return hidden

    results = []
    for n, k in shapes:
        spec = f"{n}x{k}"
        weight_bytes = n * k * 2
        copies = [torch.randn(n, k, dtype=torch.bfloat16, device="cuda") * 0.02
                  for _ in range(max(2, -(-2 * 60 * 2**20 // weight_bytes)))]  # >= 120 MiB in turn: past L2
        x = torch.randn(args.rows, k, dtype=torch.bfloat16, device="cuda")
        # --gated: PDL launches as the engine records them, both products and the activation against two launches
        with graph_launches() if args.gated else contextlib.nullcontext():
            post = then_silu if args.gated else (lambda y: y)
            cublas = graph_time_us(lambda i: post(F.linear(x, copies[i])), len(copies))
            # the engine's skinny GEMM where it has measured blocks (the baseline of a --gated grid)
            skinny = None
            if (n, k) in measured:
                skinny = round(graph_time_us(lambda i: post(gemm(x, copies[i], None)), len(copies)), 2)
            rows = time_grid(f"{spec} rows {args.rows}", grid(args, k), lambda i, c: gemm(x, copies[i], c),
                             len(copies), post(F.linear(x, copies[0])).float(), f"cuBLAS {cublas:.2f}, skinny {skinny}")
        best = min(rows, key=lambda r: r["us"]) if rows else None
        floor = weight_bytes / 4.2e12 * 1e6
        results.append({"shape": [n, k], "rows": args.rows, "kernel": "gated" if args.gated else "skinny",
                        "cublas_us": cublas, "skinny_measured_best_us": skinny, "best": best, "grid": rows,
                        "floor_us_at_4.2TBps": floor})
        if best:
            then = " + silu-mul" if args.gated else ""
            print(f"{spec}: best {tuple(best['config'])} {best['us']:.2f} us against cuBLAS{then} {cublas:.2f} us "
                  f"({cublas / best['us']:.3f}x), the skinny GEMM's measured blocks{then} {skinny}; weights at 4.2 TB/s "
                  f"{floor:.1f} us", flush=True)
        if args.out:  # after each case: a time limit keeps what was measured
            with open(args.out, "w") as f:
                json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
