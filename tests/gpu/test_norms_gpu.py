"""The embedding + first norm and the final add + norm kernels (runner/norms.py) in bfloat16 on the GPU,
against the eager model's torch ops."""

from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def test_norm_kernels_match_the_eager_model_in_bfloat16():
    from graphbench.runner.norms import add_rmsnorm_impl, add_rmsnorm_torch, embed_rmsnorm_impl, embed_rmsnorm_torch

    g = torch.Generator(device="cuda").manual_seed(0)
    table = torch.randn(128256, 2048, device="cuda", generator=g).to(torch.bfloat16)
    weight = torch.randn(2048, device="cuda", generator=g).to(torch.bfloat16)
    ids = torch.randint(0, 128256, (64,), device="cuda", generator=g)
    x = torch.randn(64, 2048, device="cuda", generator=g).to(torch.bfloat16)
    for got, want in ((embed_rmsnorm_impl(ids, table, weight, 1e-5), embed_rmsnorm_torch(ids, table, weight, 1e-5)),
                      (add_rmsnorm_impl(x, table[ids], weight, 1e-5), add_rmsnorm_torch(x, table[ids], weight, 1e-5))):
        assert torch.equal(got[1], want[1])  # the residual: exact
        exact = (got[0] == want[0]).float().mean().item()
        rel = ((got[0].float() - want[0].float()).norm() / want[0].float().norm()).item()
        assert exact > 0.99 and rel < 1e-3, (exact, rel)  # the norm: 1/sqrt against rsqrt, last bits only
