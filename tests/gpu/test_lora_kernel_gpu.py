"""The Triton LoRA kernels (runner/kernels/lora_bgmv.py) on CUDA: against a float64 reference and the torch
path at llama-3.2-1b's and a Qwen2's shapes, inside CUDA-graph replays whose token rows and adapter
weights change between replays, and in the engine (-O2 recordings against the torch path, un-captured)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from graphbench.config.arch import ArchConfig
from graphbench.runner.lora.adapters import dummy_adapter
from graphbench.runner.lora.projection import lora_gate_up_impl, lora_linear
from graphbench.runner.lora.weights import lora_delta, use_lora_kernel
from tests.lora_kernel_cases import check_projection, make_layer, projections, reference, token_rows

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton"),
]

ARCHS = {
    "llama-3.2-1b": ArchConfig("LlamaForCausalLM", hidden_size=2048, intermediate_size=8192, num_hidden_layers=1,
                               num_attention_heads=32, num_key_value_heads=8, head_dim=64, vocab_size=128),
    "qwen2-0.5b": ArchConfig("Qwen2ForCausalLM", hidden_size=896, intermediate_size=4864, num_hidden_layers=1,
                             num_attention_heads=14, num_key_value_heads=2, head_dim=64, vocab_size=128),
}


def _triton(out, x, a, b, index, segments):
    from graphbench.runner.kernels.lora_bgmv import lora_add_triton

    lora_add_triton(out, x, a, b, index, segments)


def _torch(out, x, a, b, index, segments):
    out.add_(lora_delta(x, a, b, index))


BF16, FP32 = torch.bfloat16, torch.float32
# (arch, dtype, max rank, the adapters' ranks, T): decode sizes (1, 16, 37: a partial block) and prefill
# chunks (512, 2048: BLOCK_T 64); four rank-16 adapters (one of rank 8), ranks 8 and 64 at the edges
CASES = ([("llama-3.2-1b", BF16, 16, [16, 16, 8, 16], t) for t in (1, 16, 37, 512, 2048)]
         + [("llama-3.2-1b", FP32, 16, [16, 16, 8, 16], t) for t in (1, 37)]
         + [("qwen2-0.5b", BF16, 16, [16, 8], t) for t in (1, 37, 512)]
         + [("llama-3.2-1b", BF16, 64, [64, 32], t) for t in (16, 512)]
         + [("llama-3.2-1b", BF16, 8, [8], t) for t in (1, 64)])


@pytest.mark.parametrize("arch, dtype, max_rank, ranks, num_tokens", CASES,
                         ids=[f"{a}-{str(d)[6:]}-r{m}x{len(r)}-T{t}" for a, d, m, r, t in CASES])
def test_lora_kernels_match_the_reference_and_the_torch_path(arch, dtype, max_rank, ranks, num_tokens):
    layer = make_layer(ARCHS[arch], max_rank, ranks, dtype, "cuda", seed=max_rank)
    for i, name in enumerate(("qkv", "o", "gate_up", "down")):
        index = token_rows(num_tokens, len(ranks), seed=num_tokens + i).cuda()
        if dtype == torch.float32:
            check_projection(_triton, layer, ARCHS[arch], name, index, seed=i, rel_tol=1e-4)
            continue
        torch_err = check_projection(_torch, layer, ARCHS[arch], name, index, seed=i, rel_tol=2e-2)
        kernel_err = check_projection(_triton, layer, ARCHS[arch], name, index, seed=i, rel_tol=2e-2)
        assert kernel_err <= 2 * torch_err + 1e-3, (name, kernel_err, torch_err)


@pytest.mark.parametrize("t", [16, 37, 64])
def test_the_lora_epilogue_equals_the_projection_and_expand_launches(t):
    """At decode rows the skinny GEMMs add the delta in their epilogue: bit for bit the projection + the
    expand-add (+ the silu-mul for gate/up) on the GPU, one K split and several, llama-3.2-1b's shapes."""
    import torch.nn.functional as F

    from graphbench.runner.kernels.gemv import launch_silu_mul
    from graphbench.runner.kernels.lora_bgmv import lora_add_triton
    from graphbench.runner.kernels.lora_shrink import lora_shrink
    from graphbench.runner.kernels.skinny_gemm import skinny_gate_up, skinny_gemm
    from graphbench.runner import kernel_choice as kc
    from graphbench.runner.lora.projection import epilogue_blocks

    kc.forget_all()  # the rule's blocks (BLOCK_K 128, as the reference's), not another test's stored choice
    arch = ARCHS["llama-3.2-1b"]
    layer = make_layer(arch, 16, [16, 8, 16, 16], torch.bfloat16, "cuda", seed=5)
    index = token_rows(t, 4, seed=t).cuda()
    g = torch.Generator().manual_seed(t)
    for name, (a, b, segments, k) in projections(layer, arch).items():
        x = torch.randn(t, k, generator=g).to(torch.bfloat16).cuda()
        w = (torch.randn(b.shape[1], k, generator=g) / k ** 0.5).to(torch.bfloat16).cuda()
        shrunk = lora_shrink(x, a, b, index, segments)
        if name == "gate_up":
            blocks = epilogue_blocks("gate_up", x, w, 16)
            gate_up = skinny_gemm(x, w, None, (64, 128, 1, 4, 4))
            lora_add_triton(gate_up, x, a, b, index, segments)
            want = torch.empty(t, w.shape[0] // 2, dtype=torch.bfloat16, device="cuda")
            launch_silu_mul(gate_up, want)
            assert torch.equal(skinny_gate_up(x, w, blocks, lora=shrunk), want), name
            continue
        for config in ((64, 128, 1, 4, 4), (64, 128, 4, 4, 4)):
            want = skinny_gemm(x, w, None, config)
            lora_add_triton(want, x, a, b, index, segments)
            got = skinny_gemm(x, w, None, config, lora=shrunk)
            assert torch.equal(got, want), (name, config, (got.float() - want.float()).abs().max())
        ref = reference(F.linear(x, w), x, a, b, index).float()
        assert ((got.float() - ref).abs().max() / ref.abs().max()) < 2e-2, name


def test_where_cublas_was_chosen_the_epilogue_runs_the_skinny_kernels_timed_blocks():
    """A projection that start-up gave to cuBLAS adds LoRA's delta in the skinny GEMM with the blocks timed
    beside cuBLAS (the choice's epilogue_blocks), not the skinny rule's; without them, the rule's."""
    from graphbench.runner import kernel_choice as kc
    from graphbench.runner.lora.projection import epilogue_blocks

    x = torch.randn(16, 2048, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(3072, 2048, dtype=torch.bfloat16, device="cuda")
    try:
        kc.install([kc.KernelChoice("linear", 3072, 2048, 16, "torch", (), 6.3, 6.3, 30, (32, 256, 2, 4, 3))])
        assert epilogue_blocks("linear", x, w, 16) == (32, 256, 2, 4, 3)
        kc.install([kc.KernelChoice("linear", 3072, 2048, 16, "torch", (), 6.3, 6.3, 1)])
        assert epilogue_blocks("linear", x, w, 16)[:2] == (64, kc.SKINNY_BLOCK_K)  # the rule's
        # timed 128 columns wide: kept at rank 16, the rule's at rank 64 (its delta spilled at 128)
        kc.install([kc.KernelChoice("linear", 3072, 2048, 16, "torch", (), 6.3, 6.3, 30, (128, 128, 2, 4, 3))])
        assert epilogue_blocks("linear", x, w, 16) == (128, 128, 2, 4, 3)
        assert epilogue_blocks("linear", x, w, 64)[:2] == (64, kc.SKINNY_BLOCK_K)
    finally:
        kc.forget_all()


@pytest.mark.parametrize("t", [16, 64])
def test_the_add_norm_launch_also_shrinks_the_normed_rows(t):
    """lora_row_shrink.add_rmsnorm_shrink at llama-3.2-1b's shapes: the add-norm's outputs bit for bit, the shrink
    against float64, and the projection it feeds (the expand in the GEMM's epilogue) against the reference."""
    import torch.nn.functional as F

    from graphbench.runner.kernels.add_rmsnorm import launch_add_rmsnorm
    from graphbench.runner.kernels.lora_row_shrink import add_rmsnorm_shrink
    from graphbench.runner.kernels.skinny_gemm import skinny_gemm

    arch = ARCHS["llama-3.2-1b"]
    layer = make_layer(arch, 16, [16, 8, 16, 16], torch.bfloat16, "cuda", seed=6)
    index = token_rows(t, 4, seed=t).cuda()
    g = torch.Generator().manual_seed(t)
    x, res = (torch.randn(t, arch.hidden_size, generator=g).to(torch.bfloat16).cuda() for _ in range(2))
    nw = (1 + 0.1 * torch.randn(arch.hidden_size, generator=g)).to(torch.bfloat16).cuda()
    want_out, want_h = torch.empty_like(x), torch.empty_like(x)
    launch_add_rmsnorm(x, res, nw, 1e-6, want_out, want_h)
    a, b, segments = layer.qkv_a, layer.qkv_b, layer.qkv_segments
    out, h = torch.empty_like(x), torch.empty_like(x)
    shrunk = add_rmsnorm_shrink(x, res, nw, 1e-6, out, h, a, b, index, segments)
    assert torch.equal(out, want_out) and torch.equal(h, want_h)
    rows = index.long().clamp_min(0)
    ref = torch.einsum("tk,trk->tr", want_out.double(), a[rows].double()) * (index >= 0)[:, None]
    assert torch.allclose(shrunk.v.double(), ref, rtol=1e-3, atol=1e-3)
    w = (torch.randn(b.shape[1], arch.hidden_size, generator=g) / 45).to(torch.bfloat16).cuda()
    got = skinny_gemm(out, w, None, (64, 128, 1, 4, 4), lora=shrunk).float()
    expected = reference(F.linear(out, w), out, a, b, index).float()
    assert ((got - expected).abs().max() / expected.abs().max()) < 2e-2


@pytest.mark.parametrize("t", [16, 64])
@pytest.mark.parametrize("arch_name", ["llama-3.2-1b", "qwen2-0.5b"])
def test_the_row_shrink_of_o_and_down_inputs(arch_name, t):
    """lora_row_shrink.row_shrink, o's and down's inputs, 4 adapters and rows without one: near the float64
    reference; rows without an adapter exactly zero; the same v launch after launch."""
    from graphbench.runner.kernels.lora_row_shrink import row_shrink

    arch = ARCHS[arch_name]
    layer = make_layer(arch, 16, [16, 8, 16, 16], torch.bfloat16, "cuda", seed=12)
    index = token_rows(t, 4, seed=t).cuda()
    index[::5] = -1
    for name in ("o", "down"):
        a, b, segments, k = projections(layer, arch)[name]
        x = (torch.randn(t, k, generator=torch.Generator().manual_seed(t)) / 8).to(torch.bfloat16).cuda()
        v = row_shrink(x, a, b, index, segments).v
        rows = index.long().clamp_min(0)
        ref = torch.einsum("tk,trk->tr", x.double(), a[rows].double()) * (index >= 0)[:, None]
        assert torch.allclose(v.double(), ref, rtol=1e-4, atol=1e-4), (name, (v.double() - ref).abs().max())
        assert int((v[index < 0] != 0).sum()) == 0
        assert torch.equal(row_shrink(x, a, b, index, segments).v, v)


@pytest.mark.parametrize("pdl", [False, True], ids=["plain", "pdl"])
def test_a_graph_replay_follows_new_token_rows_and_new_adapter_weights(pdl):
    """One recording of the LoRA projections (the kernels, as the engine captures them: PDL inside
    graph_launches; at 16 rows the shrink then the GEMM with the delta in its epilogue); each replay after
    copying other token rows into the index buffer, or another adapter into a row, equals the ops run eagerly
    on the same inputs."""
    from graphbench.runner.kernels.pdl import graph_launches

    arch, t = ARCHS["llama-3.2-1b"], 16
    layer = make_layer(arch, 16, [16, 8, 16], torch.bfloat16, "cuda", seed=5)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(t, arch.hidden_size, generator=g).to(torch.bfloat16).cuda()
    w = (torch.randn(layer.qkv_b.shape[1], arch.hidden_size, generator=g) / 45).to(torch.bfloat16).cuda()
    w_gate_up = (torch.randn(layer.gate_up_b.shape[1], arch.hidden_size, generator=g) / 45).to(torch.bfloat16).cuda()
    base = torch.nn.functional.linear(x, w)
    index = torch.full((t,), -1, dtype=torch.int32, device="cuda")  # the static buffer the step inputs fill
    use_lora_kernel(True)

    def step():
        hidden = lora_gate_up_impl(x, w_gate_up, layer.gate_up_a, layer.gate_up_b, index, layer.gate_up_segments, True)
        return lora_linear(x, w, None, layer.qkv_a, layer.qkv_b, index, layer.qkv_segments, True), hidden

    context = graph_launches() if pdl else torch.no_grad()
    with context:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            step()  # warm-up: compiles and loads the kernels outside the capture
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            recorded = step()
    rows = [torch.full((t,), -1, dtype=torch.int32), torch.tensor([0, 1, 2, -1] * 4, dtype=torch.int32),
            torch.zeros(t, dtype=torch.int32), token_rows(t, 3, seed=7)]
    for i, new_rows in enumerate(rows):
        index.copy_(new_rows)
        if i == 3:  # another adapter into row 1: a copy into the same buffers, no re-capture
            layer.load(1, dummy_adapter("new", 16, arch, seed=77), 0)
        graph.replay()
        torch.cuda.synchronize()
        expected = step()
        for got, want in zip(recorded, expected):
            assert torch.equal(got, want), (i, (got.float() - want.float()).abs().max())
        ref = reference(base, x, layer.qkv_a, layer.qkv_b, index).float()
        err = (recorded[0].float() - ref).abs().max() / ref.abs().max()
        assert err < 2e-2, (i, err)
    assert not torch.equal(recorded[0], base)  # the last rows had adapters


def test_the_engine_with_the_kernels_gives_the_torch_paths_tokens():
    """llama-3.2-1b (dummy weights, float32: no near-ties flipped by rounding), two rank-16 adapters and
    a mixed batch: -O2 with FULL_AND_PIECEWISE recordings and the kernels against -O0, no graphs, the
    torch path."""
    from graphbench.config import load_engine_config
    from graphbench.runner.engine import Engine
    from graphbench.runner.request import SamplingParams

    base = {"model.model": "llama-3.2-1b", "model.device": "cuda", "model.dtype": "float32",
            "scheduler.max_num_seqs": 8, "scheduler.max_num_batched_tokens": 512, "scheduler.max_model_len": 512,
            "cache.num_blocks": 256, "lora.modules": ["dummy:r=16,n=2"], "lora.max_lora_rank": 16}
    prompts = [[(13 * i + j) % 900 + 5 for j in range(8 + 5 * i)] for i in range(6)]
    loras = ["dummy0", None, "dummy1", "dummy0", None, "dummy1"]
    results = {}
    for label, level, mode, kernel in (("torch", 0, "NONE", False), ("kernels", 2, None, True)):
        use_lora_kernel(kernel)
        try:
            extra = {"compilation.cudagraph_mode": mode} if mode else {}
            engine = Engine(load_engine_config(overrides=dict(base, optimization_level=level, **extra)))
            tokens = engine.generate(prompts, SamplingParams(max_tokens=24), loras)
            logits = engine.prompt_logits([p[:6] for p in prompts], loras)
            engine.close()
        finally:
            use_lora_kernel(True)
        results[label] = tokens, torch.stack([lg[-1].float().cpu() for lg in logits])
    assert results["kernels"][0] == results["torch"][0]
    assert torch.allclose(results["kernels"][1], results["torch"][1], atol=2e-3, rtol=1e-3)


def test_projections_cover_the_layers_buffers():
    layer = make_layer(ARCHS["qwen2-0.5b"], 8, [8], torch.bfloat16, "cuda")
    assert {name: segs for name, (_, _, segs, _) in projections(layer, ARCHS["qwen2-0.5b"]).items()} == {
        "qkv": [896, 128, 128], "o": [896], "gate_up": [4864, 4864], "down": [896]}


@pytest.mark.parametrize("t", [16, 300])
def test_the_shrink_sums_its_splits_the_same_whichever_finishes_first(t):
    """down's shrink (K 8192: 32 splits) at a decode block and a prefill chunk, 4 adapters: the last split of a
    token block to finish sums the partials in split order, so 20 launches give v bit for bit, near the float64
    reference, and leave every split count at zero for the next launch."""
    from graphbench.runner.kernels import lora_blocks, lora_shrink

    arch = ARCHS["llama-3.2-1b"]
    layer = make_layer(arch, 16, [16, 16, 16, 16], torch.bfloat16, "cuda", seed=11)
    a, b, segments, k = projections(layer, arch)["down"]
    index = token_rows(t, 4, seed=t).cuda()
    x = (torch.randn(t, k, generator=torch.Generator().manual_seed(t)) / 8).to(torch.bfloat16).cuda()
    assert lora_blocks.lora_blocks(t, k, b.shape[2], 1, 4)["SPLIT_K"] == 32
    first = lora_shrink.lora_shrink(x, a, b, index, segments).v.clone()
    for _ in range(20):
        assert torch.equal(lora_shrink.lora_shrink(x, a, b, index, segments).v, first)
    rows = index.long().clamp_min(0)
    ref = torch.einsum("tk,trk->tr", x.double(), a[rows].double()) * (index >= 0)[:, None]
    assert torch.allclose(first.double(), ref, rtol=1e-2, atol=1e-2)
    torch.cuda.synchronize()
    assert all(int(c.abs().sum()) == 0 for c in lora_shrink._split_counts.values())
