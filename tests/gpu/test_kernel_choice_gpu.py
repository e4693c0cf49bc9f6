"""Kernel choices by measurement on the GPU: every candidate start-up may time computes what F.linear
computes (SmolLM2's K = 576, whose tiles split three ways, and a llama shape), and timing a model's
projections gives a choice per shape and row class that is no slower than cuBLAS in the same timing."""

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

# SmolLM2-135M's qkv, o, down and lm_head; llama-3.2-1b's qkv; qwen2.5-0.5b's down (K = 4864 = 19 x 256)
SHAPES = [(960, 576), (576, 576), (576, 1536), (49152, 576), (3072, 2048), (896, 4864)]


def _rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    return ((got.double() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("shape", SHAPES, ids=[f"{n}x{k}" for n, k in SHAPES])
def test_every_candidate_computes_the_projection(shape):
    from graphbench.runner import kernel_choice as kc
    from graphbench.runner.kernel_bench import launcher as _launcher
    from graphbench.runner.kernels.paged_attention import sm_count

    n, k = shape
    g = torch.Generator(device="cuda").manual_seed(n + k)
    w = (torch.randn(n, k, generator=g, device="cuda") * 0.02).to(torch.bfloat16)
    sms = sm_count(0)
    for rows in kc.ROW_CLASSES:
        x = torch.randn(rows, k, generator=g, device="cuda").to(torch.bfloat16)
        ref = F.linear(x.double(), w.double())
        if rows == 1:
            coarse = kc.gemv_candidates(n, k)  # and their neighbours (warps; pipeline stages for long K loops)
            grid = [("gemv", b) for b in coarse + [nb for c in coarse for nb in kc.gemv_neighbours(c, k)]]
        else:
            coarse = kc.skinny_candidates(n, k, sms)
            grid = [("skinny", b) for b in coarse + [nb for c in coarse for nb in kc.skinny_neighbours(c, k)]]
        for kernel, blocks in grid:
            try:
                got = _launcher("linear", kernel, blocks, x, None)(w)
            except Exception as exc:  # out of shared memory: start-up skips it too
                assert "resource" in str(exc).lower() or "shared memory" in str(exc).lower(), (kernel, blocks, exc)
                continue
            assert got.shape == (rows, n) and _rel_err(got, ref) < 1e-2, (kernel, blocks, rows)


def test_a_model_gets_a_choice_per_shape_and_row_class():
    from graphbench.config.arch import load_arch
    from graphbench.runner import kernel_choice as kc
    from graphbench.runner.kernel_timing import measure, model_projections
    from graphbench.runner.loader import build_model

    arch = load_arch("smollm2-135m")
    model = build_model(arch, 2048, torch.bfloat16, torch.device("cuda"))
    choices = measure(model, max_rows=8192)
    projections = model_projections(model)
    # every shape at every row class, and at one row qkv's and gate/up's add-norm folded in or not
    assert len(projections) == 5 and len(choices) == 5 * len(kc.ROW_CLASSES) + 2
    assert [c.op for c in choices[-2:]] == ["norm_linear", "norm_gate_up"]
    for c in choices:
        assert c.us is not None and c.torch_us is not None and c.us <= c.torch_us, c
        assert c.kernel in ("torch", "unfused") or kc.blocks_fit(c.kernel, c.blocks, c.n, c.k, c.rows), c
    print([(c.op, c.kernel, c.blocks, round(c.us, 2), round(c.torch_us, 2)) for c in choices[-2:]])
    assert max(c.rows for c in measure(model, max_rows=16) if c.op in ("linear", "gate_up")) == 16  # no class the step never holds


@pytest.mark.parametrize("gated", [False, True])
def test_every_folded_norm_candidate_computes_the_add_norm_and_gemv(gated):
    """Each norm_gemv candidate start-up may time gives the add-norm launch + the GEMV's output bit for bit
    (SmolLM2's qkv and gate/up shapes)."""
    from graphbench.runner import kernel_choice as kc
    from graphbench.runner.kernels.add_rmsnorm import launch_add_rmsnorm
    from graphbench.runner.kernels.gemv import launch_gated_gemv, launch_gemv
    from graphbench.runner.kernels.norm_gemv import launch_norm_gemv

    n, k = (3072, 576) if gated else (960, 576)
    g = torch.Generator(device="cuda").manual_seed(n)
    w = (torch.randn(n, k, generator=g, device="cuda") * 0.02).to(torch.bfloat16)
    x, res = (torch.randn(1, k, generator=g, device="cuda").to(torch.bfloat16) for _ in range(2))
    nw = (1 + 0.1 * torch.randn(k, generator=g, device="cuda")).to(torch.bfloat16)
    normed, h = torch.empty_like(x), torch.empty_like(x)
    launch_add_rmsnorm(x, res, nw, 1e-6, normed, h)
    grid = kc.gated_gemv_candidates(n, k) if gated else kc.gemv_candidates(n, k)
    out_n = n // 2 if gated else n
    for blocks in grid + [nb for b in grid for nb in kc.gemv_neighbours(b)]:
        want, got = (torch.empty(1, out_n, dtype=torch.bfloat16, device="cuda") for _ in range(2))
        got_h = torch.empty_like(x)
        (launch_gated_gemv if gated else lambda *a: launch_gemv(a[0], a[1], None, *a[2:]))(normed, w, want, *blocks)
        launch_norm_gemv(x, res, nw, 1e-6, w, None, got, got_h, *blocks, gated=gated)
        assert torch.equal(got, want) and torch.equal(got_h, h), blocks
