"""kernels/norm_skinny.py in the Triton interpreter: the skinny GEMMs with the residual add + RMSNorm in front
compute what the add-norm launch + the skinny GEMM compute (plain, with bias, gated; rows and columns not
multiples of the blocks; K a power of two, in two pieces, and in three with the last masked), the next residual
bit for bit; and an installed fold is what the layer's projection runs at 2..64 rows."""

from __future__ import annotations

from tests.interpreted import run_interpreted

CODE = """
import torch
from graphbench.runner.kernels.add_rmsnorm import launch_add_rmsnorm
from graphbench.runner.kernels.norm_skinny import launch_norm_skinny
from graphbench.runner.kernels.skinny_gemm import skinny_gate_up, skinny_gemm
g = torch.Generator().manual_seed(0)
for m, n, k, block_n, block_m in ((5, 40, 576, 16, 16), (33, 24, 512, 32, 32), (17, 72, 880, 64, 16), (64, 16, 64, 16, 64)):
    x, res = torch.randn(m, k, generator=g).to(torch.bfloat16), torch.randn(m, k, generator=g).to(torch.bfloat16)
    nw = (1 + 0.1 * torch.randn(k, generator=g)).to(torch.bfloat16)
    w, b = torch.randn(2 * n, k, generator=g).to(torch.bfloat16), torch.randn(2 * n, generator=g).to(torch.bfloat16)
    normed, h = torch.empty_like(x), torch.empty_like(x)
    launch_add_rmsnorm(x, res, nw, 1e-6, normed, h)
    for bias in (None, b):
        want = skinny_gemm(normed, w, bias, (16, 16, 1, 4, 1))
        got, got_h = torch.full((m, 2 * n), float("nan"), dtype=torch.bfloat16), torch.full_like(x, float("nan"))
        launch_norm_skinny(x, res, nw, 1e-6, w, bias, got, got_h, block_n, block_m, 4)
        # another order of the same sums: at most a rounding of the bfloat16 output apart
        err = ((got.float() - want.float()).abs() / (want.float().abs() + 1)).max().item()
        assert err < 2e-2 and torch.equal(got_h, h), (m, n, k, err)
    want = skinny_gate_up(normed, w, (16, 16, 4, 1))
    got, got_h = torch.full((m, n), float("nan"), dtype=torch.bfloat16), torch.full_like(x, float("nan"))
    launch_norm_skinny(x, res, nw, 1e-6, w, None, got, got_h, block_n, block_m, 4, gated=True)
    err = ((got.float() - want.float()).abs() / (want.float().abs() + 1)).max().item()
    assert err < 2e-2 and torch.equal(got_h, h), ("gated", m, n, k, err)
    # a wrong norm would be far off: the check can fail
    launch_norm_skinny(x, res, nw * 2, 1e-6, w, None, got, got_h, block_n, block_m, 4, gated=True)
    assert ((got.float() - want.float()).abs() / (want.float().abs() + 1)).max().item() > 0.1
print("ok")
"""


def test_the_folded_skinny_gemms_compute_the_add_norm_and_skinny_gemm():
    run_interpreted(CODE)


DISPATCH = """
import torch
from unittest import mock
from graphbench.runner import kernel_choice as kc, linear
from graphbench.runner.kernel_choice import KernelChoice
g = torch.Generator().manual_seed(1)
k, n, inter = 576, 48, 40
w, w2 = torch.randn(n, k, generator=g).to(torch.bfloat16), torch.randn(2 * inter, k, generator=g).to(torch.bfloat16)
b = torch.randn(n, generator=g).to(torch.bfloat16)
nw = (1 + 0.1 * torch.randn(k, generator=g)).to(torch.bfloat16)
for rows, cls in ((3, 16), (20, 32), (64, 64)):
    x, res = torch.randn(rows, k, generator=g).to(torch.bfloat16), torch.randn(rows, k, generator=g).to(torch.bfloat16)
    kc.install([KernelChoice("linear", n, k, cls, "skinny", (16, 64, 1, 4, 1)),
                KernelChoice("gate_up", 2 * inter, k, cls, "gated_skinny", (16, 64, 4, 1)),
                KernelChoice("norm_linear", n, k, cls, "unfused"), KernelChoice("norm_gate_up", 2 * inter, k, cls, "unfused")])
    want = linear.add_rmsnorm_linear_impl(x, res, nw, 1e-6, w, b), linear.add_rmsnorm_gate_up_impl(x, res, nw, 1e-6, w2)
    kc.install([KernelChoice("norm_linear", n, k, cls, "norm_skinny", (16, 16, 8)),
                KernelChoice("norm_gate_up", 2 * inter, k, cls, "norm_gated_skinny", (16, 16, 8))])
    with mock.patch.object(linear, "add_rmsnorm_rows", side_effect=AssertionError("the add-norm launched apart")):
        got = linear.add_rmsnorm_linear_impl(x, res, nw, 1e-6, w, b), linear.add_rmsnorm_gate_up_impl(x, res, nw, 1e-6, w2)
    for (a, ha), (c, hc) in zip(got, want):
        assert a.shape == c.shape and torch.equal(ha, hc)
        assert ((a.float() - c.float()).abs() / (c.float().abs() + 1)).max().item() < 2e-2
print("ok")
"""


def test_an_installed_fold_at_several_rows_runs_the_fused_kernel():
    run_interpreted(DISPATCH)
