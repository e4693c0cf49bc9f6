"""Batch-1 decode projections inside a CUDA graph: cuBLAS vs a Triton GEMV vs Inductor's GEMV.

    python bench/gemv.py --model llama-3.2-1b [--out gemv.json]

A first harness timed these with back-to-back Python calls, which measured launch overhead (cuBLAS o_proj
15.4 us isolated against 5.7 us in the engine's graph: bench/RESULTS.md, 2026-11-29, a8b12c7). Here every variant is recorded in a CUDA graph
as a run of calls over rotating weight copies (> 200 MB in all, so no copy is still in L2), the graph
is replayed and timed with CUDA events (median of 7), and time per call = replay time / calls.

Variants, for each projection of the model at M = 1 row:
- cublas: torch.nn.functional.linear (what the engine runs today);
- inductor: torch.compile of the same linear with coordinate_descent_tuning, which rewrites an M = 1
  matmul as a multiply + sum reduction and tunes its blocks (gpt-fast's decode path);
- triton: the reduction GEMV below over a grid of (BLOCK_N, BLOCK_K, num_warps); the best is kept;
- engine: runner/linear.py's linear as the engine runs it (its kernel with the blocks it picks).
"""

from __future__ import annotations

import argparse
import itertools
import json

import torch
import triton
import triton.language as tl

from graphbench.bench.graph_timing import graph_time_us


@triton.jit
def _gemv_row_kernel(x_ptr, w_ptr, y_ptr, N, K, stride_wn,
                     BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # y[n] = sum_k x[k] * w[n, k] for BLOCK_N rows n; K % BLOCK_K == 0 (checked by the caller)
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < N
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)  # summed over K once, after the loop
    for k0 in range(0, K, BLOCK_K):
        w = tl.load(w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + (k0 + offs_k)[None, :],
                    mask=n_ok[:, None], other=0.0)
        x = tl.load(x_ptr + k0 + offs_k)
        acc += w.to(tl.float32) * x.to(tl.float32)[None, :]
    tl.store(y_ptr + offs_n, tl.sum(acc, axis=1).to(y_ptr.dtype.element_ty), mask=n_ok)


def triton_gemv(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, block_n: int, block_k: int,
                num_warps: int) -> None:
    """y[1, N] = x[1, K] @ w[N, K].T."""
    n, k = w.shape
    assert k % block_k == 0 and x.shape == (1, k)
    _gemv_row_kernel[(triton.cdiv(n, block_n),)](x, w, y, n, k, w.stride(0), BLOCK_N=block_n, BLOCK_K=block_k,
                                                 num_warps=num_warps, num_stages=1)


def projection_shapes(model: str) -> dict[str, tuple[int, int]]:
    from graphbench.config import load_arch

    arch = load_arch(model)
    h, hd = arch.hidden_size, arch.head_dim
    return {"qkv": ((arch.num_attention_heads + 2 * arch.num_key_value_heads) * hd, h),
            "o_proj": (h, arch.num_attention_heads * hd), "gate_up": (2 * arch.intermediate_size, h),
            "down": (h, arch.intermediate_size), "lm_head": (arch.vocab_size, h)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-3.2-1b")
    p.add_argument("--out", default=None)
    p.add_argument("--quick", action="store_true", help="a smaller Triton config grid")
    args = p.parse_args()
    torch.manual_seed(0)
    grid = list(itertools.product((1, 2, 4, 8), (256, 512, 1024, 2048, 4096), (2, 4, 8)))
    if args.quick:
        grid = list(itertools.product((2, 4), (512, 1024), (4, 8)))
    rows = []
    for name, (n, k) in projection_shapes(args.model).items():
        num_copies = max(2, min(16, -(-200_000_000 // (n * k * 2))))
        weights = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5 for _ in range(num_copies)]
        x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
        ref = torch.nn.functional.linear(x, weights[0]).float()
        y = torch.empty(1, n, device="cuda", dtype=torch.bfloat16)

        def close(got: torch.Tensor) -> bool:
            return ((got.float() - ref).norm() / ref.norm()).item() < 1e-2

        times = {"cublas": graph_time_us(lambda i: torch.nn.functional.linear(x, weights[i]), num_copies)}
        compiled = torch.compile(torch.nn.functional.linear, dynamic=False,
                                 options={"coordinate_descent_tuning": True})
        assert close(compiled(x, weights[0]))
        times["inductor"] = graph_time_us(lambda i: compiled(x, weights[i]), num_copies)
        best = None
        for block_n, block_k, warps in grid:
            if k % block_k:
                continue
            try:
                triton_gemv(x, weights[0], y, block_n, block_k, warps)
            except Exception as exc:  # noqa: BLE001 - a config that does not compile is skipped, with its error
                print(f"  triton {(block_n, block_k, warps)} failed: {str(exc)[:200]}", flush=True)
                continue
            if not close(y):
                print(f"  triton {(block_n, block_k, warps)} wrong for {name}", flush=True)
                continue
            us = graph_time_us(lambda i, c=(block_n, block_k, warps): triton_gemv(x, weights[i], y, *c), num_copies)
            if best is None or us < best[0]:
                best = (us, (block_n, block_k, warps))
        times["triton"] = best[0] if best else float("nan")
        from graphbench.runner.linear import _gemv_config, linear_impl

        times["engine"] = graph_time_us(lambda i: linear_impl(x, weights[i]), num_copies)  # its chosen blocks
        gbs = {v: n * k * 2 / (us * 1e-6) / 1e9 for v, us in times.items()}
        rows.append({"proj": name, "n": n, "k": k, "m": 1, "us": times, "gb_per_s": gbs, "triton_config": best[1] if best else None})
        print(f"{name:<8} N={n:<6} K={k:<5} " + "   ".join(f"{v} {us:6.2f} us ({gbs[v]:4.0f} GB/s)"
                                                      for v, us in times.items()) + f"   triton cfg {best[1] if best else None}, engine cfg {_gemv_config(n, k)}",
              flush=True)
        weights.clear()  # free this projection's copies before the next
        torch._dynamo.reset()
    total = {v: sum(r["us"][v] for r in rows if r["proj"] != "lm_head") for v in ("cublas", "inductor", "triton", "engine")}
    print("per layer (qkv + o_proj + gate_up + down): " + ", ".join(f"{v} {us:.1f} us" for v, us in total.items()))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows, "per_layer_us": total, "gpu": torch.cuda.get_device_name(),
                       "torch": torch.__version__, "triton": triton.__version__}, f, indent=1)


if __name__ == "__main__":
    main()
