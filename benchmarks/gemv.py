"""Batch-1 decode projections inside a CUDA graph: cuBLAS vs the engine's Triton GEMV over a grid of blocks.

    python benchmarks/gemv.py --model llama-3.2-1b [--out gemv.json]
    python benchmarks/gemv.py --model llama-3.2-1b --projections down --block-n 1,2,4 --block-k 2048,4096,8192 \
        --warps 2,4,8,16 --stages 1,2,3 --jobs 15

A first harness timed these with back-to-back Python calls, which measured launch overhead (cuBLAS o_proj
15.4 us isolated against 5.7 us in the engine's graph: benchmarks/RESULTS.md, 2026-11-29, a8b12c7). Here every
variant is recorded in a CUDA graph as a run of calls over rotating weight copies (> 200 MB in all, so no
copy is still in L2), the graph is replayed and timed with CUDA events (median of 7), and time per call =
replay time / calls (graphbench.bench.graph_timing). The calls are launched with PDL as the engine records
them (--no-pdl: without), so a call's first weight tile loads while the call before finishes.

Variants, for each projection of the model at M = 1 row:
- cublas: torch.nn.functional.linear;
- inductor (with --inductor): torch.compile of the same linear with coordinate_descent_tuning, which
  rewrites an M = 1 matmul as a multiply + sum reduction and tunes its blocks (gpt-fast's decode path);
- the engine's GEMV (runner/kernels/gemv.py) over a grid of (BLOCK_N, BLOCK_K, num_warps, num_stages),
  compiled first by --jobs processes at once (benchmarks/kernel_grid.py);
- engine: runner/linear.py's linear as the engine runs it (the blocks it picks).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json


def projection_shapes(model: str) -> dict[str, tuple[int, int]]:
    """(N, K) of each of the model's batch-1 projections."""
    from graphbench.config import load_arch

    arch = load_arch(model)
    h, hd = arch.hidden_size, arch.head_dim
    return {"qkv": ((arch.num_attention_heads + 2 * arch.num_key_value_heads) * hd, h),
            "o_proj": (h, arch.num_attention_heads * hd), "gate_up": (2 * arch.intermediate_size, h),
            "down": (h, arch.intermediate_size), "lm_head": (arch.vocab_size, h)}


def grid(args: argparse.Namespace, k: int) -> list[tuple[int, int, int, int]]:
    """(BLOCK_N, BLOCK_K, warps, stages) configs whose BLOCK_K divides K and whose float32 partial sums
    take at most 128 registers a thread (more spills: such a config only costs compile time)."""
    ints = lambda text: [int(v) for v in text.split(",") if v]  # noqa: E731
    return [c for c in itertools.product(ints(args.block_n), ints(args.block_k), ints(args.warps), ints(args.stages))
            if k % c[1] == 0 and c[0] * c[1] <= 128 * 32 * c[2]]


def run_gemv(x, w, y, config) -> None:
    from graphbench.runner.kernels.gemv import launch_gemv

    block_n, block_k, warps, stages = config
    launch_gemv(x, w, None, y, block_n, block_k, warps, num_stages=stages)


def compile_worker(jobs: list[list]) -> None:
    """Launch each (n, k, config, pdl) once, with PDL or without as the timing pass will (each is a variant of
    its own): Triton compiles it into its cache (or says it cannot)."""
    import torch

    from graphbench.runner.kernels.pdl import graph_launches

    for n, k, config, pdl in jobs:
        x = torch.zeros(1, k, dtype=torch.bfloat16, device="cuda")
        with contextlib.suppress(Exception), graph_launches() if pdl else contextlib.nullcontext():
            # (a config this GPU cannot run: the timing pass reports it)
            run_gemv(x, torch.zeros(n, k, dtype=torch.bfloat16, device="cuda"),
                     torch.empty(1, n, dtype=torch.bfloat16, device="cuda"), tuple(config))
    torch.cuda.synchronize()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-3.2-1b")
    p.add_argument("--projections", default="qkv,o_proj,gate_up,down,lm_head")
    p.add_argument("--block-n", default="1,2,4,8")
    p.add_argument("--block-k", default="512,1024,2048,4096")
    p.add_argument("--warps", default="2,4,8")
    p.add_argument("--stages", default="1")
    p.add_argument("--jobs", type=int, default=1, help="processes compiling the grid before it is timed")
    p.add_argument("--no-pdl", action="store_true", help="launch without programmatic dependent launch")
    p.add_argument("--inductor", action="store_true", help="also time Inductor's tuned reduction")
    p.add_argument("--out", default=None)
    p.add_argument("--compile-jobs", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.compile_jobs is not None:
        return compile_worker(json.loads(args.compile_jobs))

    import torch
    import triton

    from graphbench.bench.graph_timing import graph_time_us
    from kernel_grid import precompile, time_grid
    from graphbench.runner.kernels.pdl import graph_launches
    from graphbench.runner.kernel_choice import gemv_config
    from graphbench.runner.linear import linear_impl

    shapes = {name: nk for name, nk in projection_shapes(args.model).items() if name in args.projections.split(",")}
    if args.jobs > 1:
        precompile(__file__, [[n, k, list(c), not args.no_pdl] for n, k in shapes.values() for c in grid(args, k)],
                   args.jobs)
    torch.manual_seed(0)
    rows = []
    for name, (n, k) in shapes.items():
        num_copies = max(2, min(16, -(-200_000_000 // (n * k * 2))))
        weights = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5 for _ in range(num_copies)]
        x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
        ref = torch.nn.functional.linear(x.double(), weights[0].double()).float()
        y = torch.empty(1, n, device="cuda", dtype=torch.bfloat16)
        with contextlib.nullcontext() if args.no_pdl else graph_launches():  # (a generator: one per use)
            times = {"cublas": graph_time_us(lambda i: torch.nn.functional.linear(x, weights[i]), num_copies)}
            if args.inductor:
                compiled = torch.compile(torch.nn.functional.linear, dynamic=False,
                                         options={"coordinate_descent_tuning": True})
                times["inductor"] = graph_time_us(lambda i: compiled(x, weights[i]), num_copies)

            def run(i, config):
                run_gemv(x, weights[i], y, config)
                return y

            results = time_grid(f"{name} N={n} K={k}", grid(args, k), run, num_copies, ref,
                                f"engine's {gemv_config(n, k)}")
            scale = ref.abs().max().item()
            results = [r for r in results if r["max_abs_err"] <= 2e-2 * scale]  # a wrong config is not a result
            best = min(results, key=lambda r: r["us"]) if results else None
            times["grid best"] = best["us"] if best else float("nan")
            times["engine"] = graph_time_us(lambda i: linear_impl(x, weights[i]), num_copies)
        gbs = {v: n * k * 2 / (us * 1e-6) / 1e9 for v, us in times.items()}
        rows.append({"proj": name, "n": n, "k": k, "m": 1, "us": times, "gb_per_s": gbs, "grid": results,
                     "best_config": best["config"] if best else None, "engine_config": gemv_config(n, k)})
        print(f"{name:<8} N={n:<6} K={k:<5} " + "   ".join(f"{v} {us:6.2f} us ({gbs[v]:4.0f} GB/s)"
                                                      for v, us in times.items())
              + f"   best (BLOCK_N, BLOCK_K, warps, stages) {best['config'] if best else None},"
                f" engine's {gemv_config(n, k)}", flush=True)
        weights.clear()  # free this projection's copies before the next
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows, "pdl": not args.no_pdl, "gpu": torch.cuda.get_device_name(),
                       "torch": torch.__version__, "triton": triton.__version__}, f, indent=1)


if __name__ == "__main__":
    main()
