"""kernels/norm_gemv.py in the Triton interpreter: the one-row GEMVs with the residual add + RMSNorm in front
compute the add-norm launch + the GEMV's result bit for bit (plain and gated, with bias, N not a multiple of
the block, one and several K tiles, K not a power of two, in K tiles or the whole row in pieces), and program 0 alone writes the next residual."""

from __future__ import annotations

from tests.interpreted import run_interpreted

CODE = """
import torch
from graphbench.runner.kernels.add_rmsnorm import launch_add_rmsnorm
from graphbench.runner.kernels.gemv import launch_gated_gemv, launch_gemv
from graphbench.runner.kernels.norm_gemv import launch_norm_gemv
g = torch.Generator().manual_seed(0)
for dtype in (torch.bfloat16, torch.float32):
    for n, k, block_n, block_k in ((37, 576, 4, 64), (48, 512, 16, 512), (20, 768, 2, 256), (37, 576, 4, 1024)):
        x, res = torch.randn(1, k, generator=g).to(dtype), torch.randn(1, k, generator=g).to(dtype)
        nw = (1 + 0.1 * torch.randn(k, generator=g)).to(dtype)
        w, b = torch.randn(2 * n, k, generator=g).to(dtype), torch.randn(2 * n, generator=g).to(dtype)
        normed, h = torch.empty_like(x), torch.empty_like(x)
        launch_add_rmsnorm(x, res, nw, 1e-6, normed, h)
        for bias in (None, b):
            want = torch.empty(1, 2 * n, dtype=dtype)
            launch_gemv(normed, w, bias, want, block_n, block_k, 2, interpret=True)
            got, got_h = torch.empty(1, 2 * n, dtype=dtype), torch.full_like(x, float("nan"))
            launch_norm_gemv(x, res, nw, 1e-6, w, bias, got, got_h, block_n, block_k, 2, interpret=True)
            assert torch.equal(got, want) and torch.equal(got_h, h), (dtype, n, k, (got.float() - want.float()).abs().max())
        want = torch.empty(1, n, dtype=dtype)
        launch_gated_gemv(normed, w, want, block_n, block_k, 2, interpret=True)
        got, got_h = torch.empty(1, n, dtype=dtype), torch.full_like(x, float("nan"))
        launch_norm_gemv(x, res, nw, 1e-6, w, None, got, got_h, block_n, block_k, 2, gated=True, interpret=True)
        assert torch.equal(got, want) and torch.equal(got_h, h), ("gated", dtype, n, k)
print("ok")
"""


def test_the_fused_gemvs_compute_the_add_norm_and_gemv_bit_for_bit():
    run_interpreted(CODE)


DISPATCH = """
import torch
from unittest import mock
from graphbench.runner import kernel_choice as kc, linear
from graphbench.runner.kernel_choice import KernelChoice
g = torch.Generator().manual_seed(1)
k, n, inter = 512, 48, 40
x, res = torch.randn(1, k, generator=g).to(torch.bfloat16), torch.randn(1, k, generator=g).to(torch.bfloat16)
nw = (1 + 0.1 * torch.randn(k, generator=g)).to(torch.bfloat16)
w, w2 = torch.randn(n, k, generator=g).to(torch.bfloat16), torch.randn(2 * inter, k, generator=g).to(torch.bfloat16)
b = torch.randn(n, generator=g).to(torch.bfloat16)
kc.install([KernelChoice("linear", n, k, 1, "gemv", (4, 256, 2)), KernelChoice("gate_up", 2 * inter, k, 1, "gated_gemv", (4, 256, 2))])
want = linear.add_rmsnorm_linear_impl(x, res, nw, 1e-6, w, b), linear.add_rmsnorm_gate_up_impl(x, res, nw, 1e-6, w2)
kc.install([KernelChoice("norm_linear", n, k, 1, "norm_gemv", (4, 256, 2)),
            KernelChoice("norm_gate_up", 2 * inter, k, 1, "norm_gated_gemv", (4, 256, 2))])
with mock.patch.object(linear, "add_rmsnorm_rows", side_effect=AssertionError("the add-norm launched apart")):
    got = linear.add_rmsnorm_linear_impl(x, res, nw, 1e-6, w, b), linear.add_rmsnorm_gate_up_impl(x, res, nw, 1e-6, w2)
for (a, ha), (c, hc) in zip(got, want):
    assert torch.equal(a, c) and torch.equal(ha, hc)
# two rows never fold (the choice is a one-row one): the add-norm launch runs
calls, real = [], linear.add_rmsnorm_rows
with mock.patch.object(linear, "add_rmsnorm_rows", side_effect=lambda *a: calls.append(1) or real(*a)):
    linear.add_rmsnorm_linear_impl(torch.cat([x, x]), torch.cat([res, res]), nw, 1e-6, w, b)
assert calls == [1]
print("ok")
"""


def test_an_installed_fold_runs_the_fused_kernel_with_the_same_result():
    run_interpreted(DISPATCH)
