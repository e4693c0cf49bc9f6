"""The residual add + RMSNorm split across the projections around it (runner/residual_fold.py), on the GPU:
the producer's h is the projection's output + the residual rounded as the add-norm kernel rounds it, its rstd
is 1 / rms(h), the consumer's tiles are the add-norm kernel's normed rows bit for bit, and a recorded launch
gives its eager result every replay (the count of column blocks is zeroed after each launch)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton"),
]

BF16 = torch.bfloat16
# (hidden, the producer's K, the consumer's N, the producer's blocks): SmolLM2's o -> gate/up, down -> qkv;
# llama-3.2-1b's o with 4 K splits
CASES = [(576, 576, 3072, (32, 64, 1, 4, 5)), (576, 1536, 960, (32, 128, 6, 4, 4)), (2048, 2048, 3072, (64, 128, 4, 4, 4))]


@pytest.mark.parametrize("case", CASES, ids=[f"{h}x{k}" for h, k, _, _ in CASES])
@pytest.mark.parametrize("rows", [2, 16, 37, 64])
def test_fold_kernels_round_as_the_add_norm_kernel(case, rows):
    from graphbench.runner.kernels import skinny_gemm as sk

    hidden, k, n, blocks = case
    g = torch.Generator(device="cuda").manual_seed(rows + k)
    w = (torch.randn(hidden, k, generator=g, device="cuda") * 0.02).to(BF16)
    x = torch.randn(rows, k, generator=g, device="cuda").to(BF16)
    res = torch.randn(rows, hidden, generator=g, device="cuda").to(BF16)
    h, rstd = sk.skinny_gemm_residual(x, w, res, 1e-6, blocks)
    y = sk.skinny_gemm(x, w, None, blocks)
    assert torch.equal(h, (y.float() + res.float()).to(BF16))
    want_rstd = torch.rsqrt(h.double().pow(2).mean(-1) + 1e-6)
    assert torch.allclose(rstd.double(), want_rstd, rtol=1e-5)
    nw = (1 + 0.3 * torch.randn(hidden, generator=g, device="cuda")).to(BF16)
    wc = (torch.randn(n, hidden, generator=g, device="cuda") * 0.02).to(BF16)
    normed = ((h.float() * rstd[:, None]).to(BF16).float() * nw.float()).to(BF16)
    consumer = (32, 64, 1, 4, 4)
    assert torch.equal(sk.skinny_gemm(h, wc, None, consumer, norm=(rstd, nw)), sk.skinny_gemm(normed, wc, None, consumer))
    gated = (16, 64, 4, 4)
    assert torch.equal(sk.skinny_gate_up(h, wc, gated, norm=(rstd, nw)), sk.skinny_gate_up(normed, wc, gated))


def test_a_recorded_fold_replays_its_eager_result():
    from graphbench.runner.kernels import skinny_gemm as sk

    hidden, k, _, blocks = CASES[2]
    g = torch.Generator(device="cuda").manual_seed(0)
    w = (torch.randn(hidden, k, generator=g, device="cuda") * 0.02).to(BF16)
    x = torch.randn(64, k, generator=g, device="cuda").to(BF16)
    res = torch.randn(64, hidden, generator=g, device="cuda").to(BF16)
    want_h, want_rstd = sk.skinny_gemm_residual(x, w, res, 1e-6, blocks)  # (also the warm-up before capture)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        h, rstd = sk.skinny_gemm_residual(x, w, res, 1e-6, blocks)
    for _ in range(20):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(h, want_h) and torch.equal(rstd, want_rstd)
