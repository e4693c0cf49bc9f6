"""The add-norm inside the skinny GEMM (kernels/norm_gemm.py at 29aa69a) against the add-norm kernel + the skinny /
gated GEMM, each in a CUDA graph with PDL launches (bench/RESULTS.md, 2026-12-03). A one-off probe."""
import sys, torch
from graphbench.bench.graph_timing import graph_time_us
from graphbench.runner.kernels.add_rmsnorm import launch_add_rmsnorm
from graphbench.runner.kernels.norm_gemm import norm_gemm
from graphbench.runner.kernels.skinny_gemm import gemm_sms, skinny_gate_up, skinny_gemm
from graphbench.runner.kernels.pdl import graph_launches
import contextlib
copies = 8
for (n, k, gated) in ((3072, 2048, False), (16384, 2048, True), (6144, 4096, False), (28672, 4096, True)):
    ws = [(torch.randn(n, k, device="cuda") * 0.02).bfloat16() for _ in range(copies)]
    nw = torch.ones(k, device="cuda", dtype=torch.bfloat16)
    for rows in (16, 64):
        x = torch.randn(rows, k, device="cuda").bfloat16(); r = torch.randn(rows, k, device="cuda").bfloat16()
        sms = gemm_sms(x)
        def two(i):
            normed, h = torch.empty_like(x), torch.empty_like(x)
            launch_add_rmsnorm(x, r, nw, 1e-5, normed, h)
            return skinny_gate_up(normed, ws[i % copies]) if gated else skinny_gemm(normed, ws[i % copies], None)
        with graph_launches():
            t2 = graph_time_us(two, 32)
            line = f"{n}x{k} gated={gated} rows={rows}: two launches {t2:.2f} us"
            for sq_tile in (False, True):
                for h_in_loop in (True, False):
                    def one(i):
                        return norm_gemm(x, r, nw, 1e-5, ws[i % copies], None, sms, gated, sq_tile, h_in_loop)
                    line += f"; sq_tile={int(sq_tile)} h_in_loop={int(h_in_loop)} {graph_time_us(one, 32):.2f}"
            print(line, flush=True)
