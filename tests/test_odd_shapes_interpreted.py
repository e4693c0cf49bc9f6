"""Shapes of checkpoints nobody measured, in the Triton interpreter against float64: head_dim no power of two
(48, 80, 96; the kernels pad it to BLOCK_D = next_pow2 and mask) or 256, odd KV head counts and GQA ratios
(15/5, 14/2, 9/3, 7/1) in the unified, decode (splits, rotary) and KV-write kernels; and the projections'
kernels with every block start-up would time for K = 200 and 1000 (hidden sizes with no K tile of 64: the whole
row in pieces), K = 192 (three 64-wide tiles), N below any BLOCK_N or odd."""

from __future__ import annotations

from tests.interpreted import ROOT, run_interpreted

ATTENTION = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
import torch
from tests.test_triton_kernels import check_case, make_case
bf16 = dict(dtype=torch.bfloat16)
# (reqs, heads, kv heads, head_dim, make_case kwargs, check_case kwargs)
CASES = [
    ([(1, 21), (9, 9), (4, 30)], 15, 5, 48, dict(block_size=8), {{}}),  # mixed prefill / decode
    ([(1, 40), (5, 20)], 14, 2, 80, dict(max_reqs=4, num_tokens=8), dict(num_splits=2)),  # padding rows, split
    ([(1, 21), (70, 70)], 9, 3, 96, bf16, dict(rel_err=2e-2)),  # prefill tiles (BLOCK_Q 21)
    ([(1, 70), (1, 3)], 7, 1, 256, dict(max_reqs=3, num_tokens=3), dict(decode=True, num_splits=4)),
    ([(1, 5), (1, 33), (1, 18)], 15, 5, 80, dict(max_reqs=4, num_tokens=4), dict(decode=True)),
    ([(1, 70), (1, 3)], 9, 3, 48, {{}}, dict(decode=True, num_splits=2, rotary=True)),
    ([(1, 40), (1, 3)], 14, 2, 96, bf16, dict(decode=True, num_splits=2, rotary=True, early_tile=False, rel_err=2e-2)),
]
for seed, (reqs, heads, kv_heads, head_dim, made, checked) in enumerate(CASES):
    check_case(make_case(reqs, heads, kv_heads, head_dim, seed=seed + 1, **made), **checked)
print("ok")
"""

PROJECTIONS = """
import torch, torch.nn.functional as F
from graphbench.runner import kernel_choice as kc
from graphbench.runner.kernels.gemv import launch_gated_gemv, launch_gemv
from graphbench.runner.kernels.norm_gemv import launch_norm_gemv
from graphbench.runner.kernels.skinny_gemm import skinny_gate_up, skinny_gemm
g = torch.Generator().manual_seed(0)

def close(got, want, tol, what):
    err = ((got.double() - want).norm() / want.norm()).item()
    assert err < tol, (what, err)

for n, k in ((17, 200), (6, 1000), (3, 192)):  # (qkv of 5 heads of 48 over 240: 17 columns of it)
    w, b = torch.randn(2 * n, k, generator=g, dtype=torch.float64), torch.randn(2 * n, generator=g, dtype=torch.float64)
    x, res = torch.randn(1, k, generator=g, dtype=torch.float64), torch.randn(1, k, generator=g, dtype=torch.float64)
    nw = 1 + 0.1 * torch.randn(k, generator=g, dtype=torch.float64)
    h = x + res
    normed = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * nw
    f = [t.float() for t in (x, w, b, res, nw)]
    plain = kc.gemv_candidates(2 * n, k)
    assert plain
    for blocks in sorted({*plain, *(nb for p in plain for nb in kc.gemv_neighbours(p, k))}):
        out = torch.empty(1, 2 * n)
        launch_gemv(f[0], f[1], f[2], out, *blocks, interpret=True)
        close(out, x @ w.T + b, 1e-5, ("gemv", n, k, blocks))
    for blocks in kc.gated_gemv_candidates(2 * n, k):
        out = torch.empty(1, n)
        launch_gated_gemv(f[0], f[1], out, *blocks, interpret=True)
        y = x @ w.T
        close(out, F.silu(y[:, :n]) * y[:, n:], 1e-5, ("gated", n, k, blocks))
    for blocks in plain[::3]:
        out, h_out = torch.empty(1, 2 * n), torch.empty(1, k)
        launch_norm_gemv(f[0], f[3], f[4], 1e-6, f[1], f[2], out, h_out, *blocks, interpret=True)
        close(out, normed @ w.T + b, 1e-5, ("norm", n, k, blocks))
        close(h_out, h, 1e-6, ("norm h", n, k, blocks))
    if k % 64:
        assert not kc.skinny_candidates(n, k, 132) and not kc.gated_skinny_candidates(k)  # cuBLAS: K unmasked
        continue
    wb, bb = w.bfloat16(), b[:n].bfloat16()
    for rows in (5, 33):
        xb = torch.randn(rows, k, generator=g).bfloat16()
        for num_sms in (132, 8):
            for blocks in kc.skinny_candidates(2 * n, k, num_sms)[::2]:
                close(skinny_gemm(xb, wb, None, blocks), xb.double() @ wb.double().T, 1e-2, ("skinny", rows, blocks))
        for blocks in kc.gated_skinny_candidates(k)[::2]:
            y = xb.double() @ wb.double().T
            close(skinny_gate_up(xb, wb, blocks), F.silu(y[:, :n]) * y[:, n:], 2e-2, ("gated skinny", rows, blocks))
        close(skinny_gemm(xb, wb[:n], bb, (32, 64, 3, 4, 4)), xb.double() @ wb[:n].double().T + bb.double(), 1e-2, "split 3")
print("ok")
"""


def test_attention_with_odd_head_dims_and_kv_heads_matches_float64():
    run_interpreted(ATTENTION)


def test_projection_kernels_at_odd_shapes_match_float64_with_every_block_start_up_times():
    run_interpreted(PROJECTIONS)
