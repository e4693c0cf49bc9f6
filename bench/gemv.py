"""Decode projections: torch's matmul (cuBLAS) vs graphbench's Triton GEMV (runner/gemv.py).

    python bench/gemv.py --model llama-3.2-1b --rows 1,4,8

For each projection of the model (qkv, o_proj, gate_up, down, lm_head) and each row count, CUDA-event
median of back-to-back calls on rotating weight copies (so that no weight sits in L2), achieved
bandwidth (weight bytes / time) and the ratio. Also sweeps BLOCK_N / BLOCK_K / num_warps for the GEMV.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch


def time_us(fn, calls: int = 50, repeats: int = 7) -> float:
    for _ in range(5):
        fn(0)
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(calls):
            fn(i)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(samples)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-3.2-1b")
    p.add_argument("--rows", default="1,4,8")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    from graphbench.config import load_arch
    from graphbench.runner.gemv import gemv

    arch = load_arch(args.model)
    h, hd = arch.hidden_size, arch.head_dim
    shapes = {"qkv": ((arch.num_attention_heads + 2 * arch.num_key_value_heads) * hd, h),
              "o_proj": (h, arch.num_attention_heads * hd), "gate_up": (2 * arch.intermediate_size, h),
              "down": (h, arch.intermediate_size), "lm_head": (arch.vocab_size, h)}
    configs = [(16, 128, 4), (16, 256, 4), (32, 128, 4), (8, 256, 4), (16, 512, 8), (64, 64, 4)]
    rows_out = []
    for name, (n, k) in shapes.items():
        copies = max(2, int(4e9 // (n * k * 2 * 8)) or 2)  # ~500 MB of copies: none stays in L2
        weights = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(min(copies, 16))]
        for m in [int(r) for r in args.rows.split(",")]:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            ref = x @ weights[0].T
            cublas = time_us(lambda i: torch.matmul(x, weights[i % len(weights)].T))
            best = None
            for bn, bk, warps in configs:
                got = gemv(x, weights[0], block_n=bn, block_k=bk, num_warps=warps)
                if ((got.float() - ref.float()).norm() / ref.float().norm()).item() > 1e-2:
                    raise SystemExit(f"gemv wrong for {name} m={m} config {(bn, bk, warps)}")
                us = time_us(lambda i, bn=bn, bk=bk, w=warps: gemv(x, weights[i % len(weights)], block_n=bn,
                                                                   block_k=bk, num_warps=w))
                if best is None or us < best[0]:
                    best = (us, (bn, bk, warps))
            gbs = lambda us: n * k * 2 / (us * 1e-6) / 1e9  # noqa: E731
            row = {"proj": name, "n": n, "k": k, "m": m, "cublas_us": cublas, "cublas_gbs": gbs(cublas),
                   "gemv_us": best[0], "gemv_gbs": gbs(best[0]), "gemv_config": best[1], "speedup": cublas / best[0]}
            rows_out.append(row)
            print(f"{name:<8} m={m:<2} N={n:<6} K={k:<6} cuBLAS {cublas:7.2f} us ({gbs(cublas):5.0f} GB/s)   "
                  f"gemv {best[0]:7.2f} us ({gbs(best[0]):5.0f} GB/s) {best[1]}   x{cublas / best[0]:.2f}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows_out, f, indent=1)


if __name__ == "__main__":
    main()
