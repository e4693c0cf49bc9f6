"""The add-norm inside the skinny GEMM (kernels/norm_gemm.py, GRAPHBENCH_NORM_IN_GEMM) against the two launches it
replaces: the add-norm kernel, then the skinny GEMM (qkv) or the gated GEMM with its activation (gate/up).

    python bench/norm_gemm.py --rows 16,64 --out norm-gemm.json

Each side: a CUDA graph of launches over weight copies used in turn (each launch streams its weights from
memory, not L2), launched with PDL as the engine records them, replayed; the median per launch
(graphbench.bench.graph_timing). Shapes: llama-3.2-1b's and llama-3.1-8b's qkv and [gate; up] weights. The
fused side's result is checked against the two launches' first (bf16's precision: it rounds once where they
round twice).
"""

from __future__ import annotations

import argparse
import json

# (N, K, gated): the projections that follow an add-norm in llama-3.2-1b and llama-3.1-8b
SHAPES = [(3072, 2048, False), (16384, 2048, True), (6144, 4096, False), (28672, 4096, True)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="16,64", help="row counts (2..64)")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    import torch

    from graphbench.bench.graph_timing import graph_time_us
    from graphbench.runner.kernels.add_rmsnorm import launch_add_rmsnorm
    from graphbench.runner.kernels.norm_gemm import norm_gemm
    from graphbench.runner.kernels.pdl import graph_launches
    from graphbench.runner.kernels.skinny_gemm import gemm_sms, skinny_gate_up, skinny_gemm

    results = []
    for n, k, gated in SHAPES:
        copies = [torch.randn(n, k, dtype=torch.bfloat16, device="cuda") * 0.02
                  for _ in range(max(2, -(-2 * 60 * 2**20 // (n * k * 2))))]  # >= 120 MiB in turn: past L2
        norm_weight = (1 + 0.1 * torch.randn(k, device="cuda")).to(torch.bfloat16)
        for rows in [int(r) for r in args.rows.split(",") if r]:
            x = torch.randn(rows, k, dtype=torch.bfloat16, device="cuda")
            residual = 4 * torch.randn(rows, k, dtype=torch.bfloat16, device="cuda")
            sms = gemm_sms(x)

            def two_launches(i):
                normed, h = torch.empty_like(x), torch.empty_like(x)
                launch_add_rmsnorm(x, residual, norm_weight, 1e-5, normed, h)
                return skinny_gate_up(normed, copies[i]) if gated else skinny_gemm(normed, copies[i], None)

            def fused(i):
                return norm_gemm(x, residual, norm_weight, 1e-5, copies[i], None, sms, gated)[0]

            with graph_launches():
                want, got = two_launches(0).double(), fused(0).double()
                error = ((got - want).norm() / want.norm()).item()
                two_us = graph_time_us(two_launches, len(copies))
                fused_us = graph_time_us(fused, len(copies))
            name = f"{n}x{k}{' gated' if gated else ''}"
            print(f"{name:<18} rows {rows:>2}: add-norm + GEMM {two_us:7.2f} us, fused {fused_us:7.2f} us "
                  f"({two_us / fused_us:.3f}x); relative difference {error:.1e}", flush=True)
            results.append({"shape": [n, k], "gated": gated, "rows": rows, "two_launches_us": two_us,
                            "fused_us": fused_us, "relative_difference": error})
            if args.out:  # after each case: a time limit keeps what was measured
                with open(args.out, "w") as f:
                    json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
