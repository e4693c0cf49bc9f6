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


@pytest.mark.parametrize("rows", [1, 64])
def test_add_norm_early_loads_match_in_a_pdl_graph(rows):
    """In a recorded chain A -> B -> C of PDL launches, C loads the residual A wrote before it waits for B;
    its rows equal those of the same chain launched eagerly, without PDL."""
    from graphbench.runner.kernels import add_rmsnorm as kernels
    from graphbench.runner.kernels.pdl import graph_launches

    g = torch.Generator(device="cuda").manual_seed(1)
    x, r = (torch.randn(rows, 2048, device="cuda", generator=g).to(torch.bfloat16) for _ in range(2))
    weight = torch.randn(2048, device="cuda", generator=g).to(torch.bfloat16)
    outs = [torch.empty_like(x) for _ in range(6)]

    def chain():
        kernels.launch_add_rmsnorm(x, r, weight, 1e-5, outs[0], outs[1])  # A: h = outs[1]
        kernels.launch_add_rmsnorm(outs[0], x, weight, 1e-5, outs[2], outs[3])  # B: outs[2], C's x
        kernels.launch_add_rmsnorm(outs[2], outs[1], weight, 1e-5, outs[4], outs[5])  # C: A's h as residual

    chain()  # eager: no PDL outside graph_launches
    eager = [o.clone() for o in outs[4:]]
    with graph_launches():
        chain()  # loads the PDL variants before the recording
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            chain()
    for o in outs:
        o.zero_()
    for _ in range(20):
        graph.replay()
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(eager, outs[4:]))
    assert outs[4].abs().sum() > 0
