"""The skinny GEMM (kernels/skinny_gemm.py) on CUDA at llama's projection shapes and a decode batch's row
counts, and its gate/up form with the activation in the epilogue: against float64 (and the launches it
replaces), and a CUDA-graph replay (PDL launches, as the engine records them) equal to the eager call bit for bit."""

from __future__ import annotations

import importlib.util

import pytest
import torch
import torch.nn.functional as F

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton"),
]

# llama-3.2-1b's qkv and down, llama-3.1-8b's qkv and down, llama-3.2-1b's lm_head
SHAPES = [(3072, 2048), (2048, 8192), (6144, 4096), (4096, 14336), (128256, 2048)]
# llama-3.2-1b's and llama-3.1-8b's [gate; up] weights
GATE_UP_SHAPES = [(16384, 2048), (28672, 4096)]


def _cases(shape):
    """(weight [n, k], x [rows, k]) in bf16 for 2, 17 and 64 rows."""
    n, k = shape
    g = torch.Generator(device="cuda").manual_seed(n + k)
    w = (torch.randn(n, k, generator=g, device="cuda") * 0.02).to(torch.bfloat16)
    for rows in (2, 17, 64):
        yield w, torch.randn(rows, k, generator=g, device="cuda").to(torch.bfloat16)


def _eager_and_replays(call):
    """call() run eagerly (which also allocates any workspace outside the recording), then recorded with PDL
    launches and replayed three times: (the eager output, the replays' outputs)."""
    from graphbench.runner.kernels.pdl import graph_launches

    with graph_launches():
        eager = call()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            recorded = call()
    replays = []
    for _ in range(3):  # the split partials' counts are zero again after every launch
        recorded.zero_()
        graph.replay()
        torch.cuda.synchronize()
        replays.append(recorded.clone())
    return eager, replays


@pytest.mark.parametrize("shape", SHAPES, ids=[f"{n}x{k}" for n, k in SHAPES])
def test_skinny_gemm_matches_float64_and_replays_bit_for_bit(shape):
    from graphbench.runner.kernel_choice import skinny_rule
    from graphbench.runner.kernels.skinny_gemm import skinny_gemm

    for w, x in _cases(shape):
        eager, replays = _eager_and_replays(lambda: skinny_gemm(x, w, None, skinny_rule(*shape, 132)))
        ref = F.linear(x.double(), w.double())
        err = ((eager.double() - ref).norm() / ref.norm()).item()
        assert eager.shape == (x.shape[0], shape[0]) and err < 1e-2, (shape, x.shape[0], err)
        assert all(torch.equal(r, eager) for r in replays), (shape, x.shape[0])


@pytest.mark.parametrize("shape", GATE_UP_SHAPES, ids=[f"{n}x{k}" for n, k in GATE_UP_SHAPES])
def test_gated_skinny_gemm_matches_two_launches_and_replays_bit_for_bit(shape):
    from graphbench.runner.kernels.gemv import launch_silu_mul
    from graphbench.runner.kernels.skinny_gemm import skinny_gate_up, skinny_gemm

    inter = shape[0] // 2
    for w, x in _cases(shape):
        two = torch.empty(x.shape[0], inter, dtype=torch.bfloat16, device="cuda")
        launch_silu_mul(skinny_gemm(x, w, None, (64, 128, 1, 4, 4)), two)
        eager, replays = _eager_and_replays(lambda: skinny_gate_up(x, w, (32, 128, 4, 4)))
        assert eager.shape == two.shape
        # the same products rounded the same way: equal but where the two kernels' dot tiles sum K apart
        assert (eager.float() - two.float()).abs().max().item() <= 1e-2 * two.float().abs().max().item(), shape
        ref = F.silu(F.linear(x.double(), w[:inter].double())) * F.linear(x.double(), w[inter:].double())
        assert ((eager.double() - ref).norm() / ref.norm()).item() < 1e-2, (shape, x.shape[0])
        assert all(torch.equal(r, eager) for r in replays), (shape, x.shape[0])
