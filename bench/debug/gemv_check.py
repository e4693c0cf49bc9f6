"""GPU check of runner/linear.py before a long run: the one-row GEMV against F.linear, directly and
through the graphbench::linear op in a torch.compile'd dynamic graph recorded in CUDA graphs.

    python bench/debug/gemv_check.py      # ~20 s; exit 1 on any mismatch
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from graphbench.runner.linear import Linear, gemv_applies, linear_impl


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def main() -> int:
    torch.manual_seed(0)
    failures = []
    shapes = [(3072, 2048), (2048, 2048), (16384, 2048), (2048, 8192), (128256, 2048),  # llama-3.2-1b
              (6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (1152, 896)]  # llama-3.1-8b, qwen 0.5b
    for n, k in shapes:
        for dtype in (torch.bfloat16, torch.float32):
            w = torch.randn(n, k, device="cuda", dtype=dtype) / k ** 0.5
            b = torch.randn(n, device="cuda", dtype=dtype)
            x = torch.randn(1, k, device="cuda", dtype=dtype)
            for bias in (None, b):
                err = rel_err(linear_impl(x, w, bias), F.linear(x.float(), w.float(), None if bias is None else b.float()))
                ok = gemv_applies(x, w) and err < (1e-2 if dtype == torch.bfloat16 else 1e-4)
                print(f"{'ok ' if ok else 'BAD'} gemv N={n} K={k} {dtype} bias={bias is not None} rel err {err:.2e}")
                if not ok:
                    failures.append((n, k, dtype))
    # the MLP's add-norm + gate/up + silu-mul, with the activation in the GEMV's epilogue (one row,
    # GRAPHBENCH_GATE_UP_SILU=1) and without it, and at several rows
    from graphbench.runner import linear
    from graphbench.runner.linear import add_rmsnorm_gate_up_impl, add_rmsnorm_gate_up_matmul

    for inter, k in ((8192, 2048), (14336, 4096), (4864, 896)):
        w = torch.randn(2 * inter, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5
        nw = 1 + torch.randn(k, device="cuda", dtype=torch.bfloat16) / 10
        for rows, silu_in_gemv in ((1, True), (1, False), (5, True)):
            linear.GATE_UP_SILU = silu_in_gemv
            x, res = (torch.randn(rows, k, device="cuda", dtype=torch.bfloat16) for _ in range(2))
            got, h = add_rmsnorm_gate_up_impl(x, res, nw, 1e-5, w)
            ref, ref_h = add_rmsnorm_gate_up_matmul(x, res, nw, 1e-5, w)
            err = rel_err(got, ref)
            ok = err < 2e-2 and torch.equal(h, ref_h)
            print(f"{'ok ' if ok else 'BAD'} add-norm + gate/up + silu I={inter} K={k} rows={rows} "
                  f"epilogue={silu_in_gemv}: rel err {err:.2e}")
            if not ok:
                failures.append(("gate_up", inter, k, rows, silu_in_gemv))
    # residual add + RMSNorm + projection (qkv): fused at one row (GRAPHBENCH_FUSED_GEMV=1), add-norm launch else
    from graphbench.runner.linear import add_rmsnorm_linear_impl, add_rmsnorm_matmul

    for n, k in ((3072, 2048), (16384, 2048), (6144, 4096), (9728, 896)):
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5
        nw = 1 + torch.randn(k, device="cuda", dtype=torch.bfloat16) / 10
        for rows in (1, 7):
            x, res = (torch.randn(rows, k, device="cuda", dtype=torch.bfloat16) for _ in range(2))
            got, h = add_rmsnorm_linear_impl(x, res, nw, 1e-5, w, None)
            ref, ref_h = add_rmsnorm_matmul(x, res, nw, 1e-5, w, None)
            err = rel_err(got, ref)
            ok = err < 1e-2 and torch.equal(h, ref_h)
            print(f"{'ok ' if ok else 'BAD'} add-norm + linear N={n} K={k} rows={rows}: rel err {err:.2e}")
            if not ok:
                failures.append(("add_norm", n, k, rows))
    # the op inside a dynamic compiled graph, recorded in CUDA graphs at 1 and 4 rows
    mlp = torch.nn.Sequential(Linear(2048, 8192, bias=False), torch.nn.SiLU(), Linear(8192, 2048, bias=True))
    mlp = mlp.to("cuda", torch.bfloat16).requires_grad_(False)  # inference, as in the engine
    compiled = torch.compile(mlp, dynamic=True, fullgraph=True)
    for rows in (1, 4, 1):
        x = torch.randn(rows, 2048, device="cuda", dtype=torch.bfloat16)
        ref = F.linear(F.silu(F.linear(x, mlp[0].weight)), mlp[2].weight, mlp[2].bias)
        static_x = x.clone()
        compiled(static_x)  # compile / warm up
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = compiled(static_x)
        static_x.copy_(x)
        graph.replay()
        err = rel_err(out, ref)
        ok = err < 2e-2
        print(f"{'ok ' if ok else 'BAD'} compiled + CUDA graph, {rows} row(s): rel err {err:.2e}")
        if not ok:
            failures.append(("compiled", rows))
    print("GEMV CHECK", "FAILED" if failures else "PASSED", failures)
    return 1 if failures else 0


if __name__ == "__main__":
    with torch.inference_mode():
        sys.exit(main())
