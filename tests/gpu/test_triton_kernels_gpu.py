"""Triton paged-attention kernels on CUDA (bf16/fp16, llama-sized heads), and CUDA-graph capture."""

from __future__ import annotations

import importlib.util
import math
import random
from pathlib import Path

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton"),
]

_spec = importlib.util.spec_from_file_location(
    "_triton_kernels_cpu_helpers", Path(__file__).resolve().parents[1] / "test_triton_kernels.py")
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)

MODELS = {"llama-3.2-1b": (32, 8, 64), "llama-3.1-8b": (32, 8, 128)}
_rng = random.Random(0)
SCENARIOS = {
    "decode_b1": ([(1, 3000)], {}),
    "decode_b3": ([(1, 100), (1, 1500), (1, 4000)], {}),
    "decode_b64_padded": ([(1, _rng.randint(100, 4000)) for _ in range(50)], {"max_reqs": 64, "num_tokens": 64}),
    "prefill": ([(1, 1), (300, 300), (513, 513), (17, 17)], {}),
    "mixed_padded": ([(1, 2000), (1, 37), (256, 1024), (100, 100), (1, 4000)],
                     {"max_reqs": 8, "num_tokens": 384, "strided_inputs": True}),
}


@pytest.mark.parametrize("splits", [None, 1])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("model", list(MODELS))
def test_paged_attention_cuda(model, dtype, scenario, splits):
    reqs, kwargs = SCENARIOS[scenario]
    case = helpers.make_case(reqs, *MODELS[model], dtype=dtype, device="cuda", seed=7, **kwargs)
    helpers.check_case(case, num_splits=splits, rel_err=2e-2)


@pytest.mark.parametrize("rotary", [False, True], ids=["roped", "rotary_in_kernel"])
@pytest.mark.parametrize("splits", [None, 1])
@pytest.mark.parametrize("scenario", ["decode_b1", "decode_b3", "decode_b64_padded"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("model", list(MODELS))
def test_paged_decode_cuda(model, dtype, scenario, splits, rotary):
    """The uniform-decode kernel (no request search, the new K/V written and the splits merged in the
    kernel) on the same decode scenarios, with q and k rotated before it or by it."""
    reqs, kwargs = SCENARIOS[scenario]
    case = helpers.make_case(reqs, *MODELS[model], dtype=dtype, device="cuda", seed=11, **kwargs)
    helpers.check_case(case, num_splits=splits, rel_err=2e-2, decode=True, rotary=rotary)


@pytest.mark.parametrize("rotary", [False, True], ids=["roped", "rotary_in_kernel"])
def test_paged_decode_cuda_graph_replay_with_new_lengths(rotary):
    """One recording of decode attention (writing the new K/V) for 4 slots replays correctly for new contexts."""
    from graphbench.runner.kernels.paged_decode import paged_decode

    heads, kv_heads, head_dim = MODELS["llama-3.2-1b"]
    sizes = dict(max_reqs=8, num_tokens=4, num_blocks=700, max_blocks_per_seq=256, dtype=torch.bfloat16,
                 device="cuda")
    layouts = [[(1, 100), (1, 2500)], [(1, 4000), (1, 1), (1, 333), (1, 3999)], [(1, 17)]]
    cases = [helpers.make_case(layout, heads, kv_heads, head_dim, seed=i, **sizes) for i, layout in enumerate(layouts)]
    static = {name: value.clone() for name, value in cases[0].items() if isinstance(value, torch.Tensor)}
    out = torch.zeros_like(static["q"])
    scale = 1.0 / math.sqrt(head_dim)
    cos_sin = helpers.rotary_table({"q": static["q"], "seq_lens": torch.tensor([4000])}) if rotary else None

    def step():
        paged_decode(static["q"], static["k_cache"], static["v_cache"], out, static["query_start_loc"],
                     static["seq_lens"], static["block_tables"], scale,
                     (static["k"], static["v"], static["slot_mapping"]), cos_sin=cos_sin)

    step()  # warm-up (JIT) outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for case in cases:
        _copy_into(static, case)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        n = case["num_real_tokens"]
        meta = [case[k] for k in ("query_start_loc", "seq_lens", "block_tables")]
        if rotary:  # the reference sees q and k rotated in torch
            case = dict(case)
            case["q"], case["k"] = helpers.rotated_inputs(case, cos_sin)
        kc, vc = helpers.expected_cache(case)
        ref = helpers.reference_attention(case["q"], kc, vc, *meta, case["num_reqs"], scale)
        got = out[:n].double()
        assert ((got - ref).norm() / ref.norm()).item() < 2e-2
        assert (out[n:] == 0).all()


def test_paged_attention_float32_cuda():
    case = helpers.make_case([(1, 700), (33, 90), (64, 64)], 32, 8, 128, device="cuda", max_reqs=4, num_tokens=128)
    helpers.check_case(case, rtol=1e-4, atol=1e-4)


def _copy_into(static: dict, case: dict) -> None:
    for name, value in static.items():
        if isinstance(value, torch.Tensor):
            value.copy_(case[name])


@pytest.mark.parametrize("explicit_workspace", [False, True])
@pytest.mark.parametrize("shape", ["mixed", "decode"])
@pytest.mark.parametrize("model", list(MODELS))
def test_cuda_graph_replay_with_new_inputs(model, shape, explicit_workspace):
    """Capture write + attention once; new request layouts in the same buffers replay correctly."""
    from graphbench.runner.kernels.kv_cache_write import write_kv_cache
    from graphbench.runner.kernels.paged_attention import attention_config, make_workspace, paged_attention

    heads, kv_heads, head_dim = MODELS[model]
    if shape == "mixed":
        static_sizes = dict(max_reqs=8, num_tokens=96, num_blocks=700, max_blocks_per_seq=256)
        layouts = [[(1, 900), (40, 40), (1, 3), (30, 2000)], [(1, 4000), (1, 1), (1, 77), (64, 64), (17, 300), (1, 16)]]
    else:  # decode graph: few tokens -> split-KV path
        static_sizes = dict(max_reqs=4, num_tokens=4, num_blocks=700, max_blocks_per_seq=256)
        layouts = [[(1, 100), (1, 2500)], [(1, 4000), (1, 1), (1, 333), (1, 3999)]]
    dtype = torch.bfloat16
    a, b = (helpers.make_case(layout, heads, kv_heads, head_dim, dtype=dtype, device="cuda", seed=i, **static_sizes)
            for i, layout in enumerate(layouts))
    static = {name: value.clone() for name, value in a.items() if isinstance(value, torch.Tensor)}
    out = torch.zeros_like(static["q"])
    scale = 1.0 / math.sqrt(head_dim)
    workspace = None
    if explicit_workspace:
        cfg = attention_config(static_sizes["num_tokens"], static_sizes["max_reqs"], heads, kv_heads, head_dim,
                               dtype, torch.cuda.get_device_properties(0).multi_processor_count)
        if cfg["NUM_SPLITS"] > 1:
            workspace = make_workspace(static_sizes["num_tokens"], heads, head_dim, cfg["NUM_SPLITS"], "cuda")

    def step():
        write_kv_cache(static["k"], static["v"], static["k_cache"], static["v_cache"], static["slot_mapping"])
        paged_attention(static["q"], static["k_cache"], static["v_cache"], out, static["query_start_loc"],
                        static["seq_lens"], static["block_tables"], scale, workspace=workspace)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # compile + warm up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for case in (b, a):
        _copy_into(static, case)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        want_kc, want_vc = helpers.expected_cache(case)
        assert torch.equal(static["k_cache"].nan_to_num(0.0), want_kc.nan_to_num(0.0))
        assert torch.equal(static["v_cache"].isnan(), want_vc.isnan())
        n = case["num_real_tokens"]
        ref = helpers.reference_attention(case["q"], want_kc, want_vc, case["query_start_loc"], case["seq_lens"],
                                          case["block_tables"], case["num_reqs"], scale)
        assert torch.isfinite(out).all() and (out[n:] == 0).all()
        err = ((out[:n].double() - ref).norm() / ref.norm()).item()
        assert err < 2e-2, f"relative error {err:.3g} after replay"


@pytest.mark.parametrize("rows", [1, 7, 64, 256])
@pytest.mark.parametrize("vocab", [128256, 151936])
def test_triton_argmax_cuda(rows, vocab):
    from graphbench.runner.kernels.argmax import triton_argmax

    g = torch.Generator(device="cuda").manual_seed(rows)
    logits = torch.randn(rows, vocab, device="cuda", generator=g).to(torch.bfloat16)
    logits[0, 11] = logits[0, vocab - 2] = 40.0  # a tie across chunks: the first index wins
    got = triton_argmax(logits)
    assert torch.equal(got, logits.argmax(-1)) and got[0].item() == 11


def test_cached_direct_launches_compute_what_the_jit_path_does(monkeypatch):
    """runner/kernels/launch.py with GRAPHBENCH_DIRECT_LAUNCH on: the same scenarios pass, repeated launches of
    the same specialisation skip the JIT path, and add-norm's output is bit-identical to the JIT path's."""
    from graphbench.runner.kernels import kv_cache_write, launch, paged_attention, paged_decode
    from graphbench.runner.kernels.add_rmsnorm import _add_rmsnorm_launch, launch_add_rmsnorm

    x, r = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16), torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(2048, device="cuda", dtype=torch.bfloat16)
    jit_out, jit_h = torch.empty_like(x), torch.empty_like(x)
    monkeypatch.setattr(launch, "_direct", False)
    launch_add_rmsnorm(x, r, w, 1e-5, jit_out, jit_h)  # the JIT path
    monkeypatch.setattr(launch, "_direct", True)
    before = {k: k.num_direct for k in (kv_cache_write._write_kv_launch, paged_attention._attention_launch,
                                        paged_decode._decode_launch, _add_rmsnorm_launch)}
    for launcher in before:  # as a fresh process's: earlier tests' engines keyed these launchers for their
        # own launches (with PDL's option in the capture: another set of keywords, so no key here)
        launcher.compiled.clear()
        launcher.key_function, launcher.keyable = None, launcher.constexpr is not None
    for _ in range(3):
        out, h = torch.empty_like(x), torch.empty_like(x)
        launch_add_rmsnorm(x, r, w, 1e-5, out, h)
        assert torch.equal(out, jit_out) and torch.equal(h, jit_h)
        for scenario, decode in (("mixed_padded", False), ("decode_b64_padded", True)):
            reqs, kwargs = SCENARIOS[scenario]
            case = helpers.make_case(reqs, *MODELS["llama-3.2-1b"], dtype=torch.bfloat16, device="cuda", seed=5, **kwargs)
            helpers.check_case(case, rel_err=2e-2, decode=decode)
    assert all(launcher.num_direct > count for launcher, count in before.items()), \
        {k.kernel.fn.__name__: (count, k.num_direct) for k, count in before.items()}


def test_cached_direct_launches_of_every_kernel_and_in_a_cuda_graph(monkeypatch):
    """GEMV, silu-mul and argmax give the JIT path's exact output through direct launches, and a graph
    captured from direct launches replays new inputs as the JIT path computes them."""
    from graphbench.runner.kernels import add_rmsnorm, argmax, gemv, launch

    x = torch.randn(1, 2048, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(3072, 2048, device="cuda", dtype=torch.bfloat16)
    gate_up = torch.randn(64, 2 * 2048, device="cuda", dtype=torch.bfloat16)
    logits = torch.randn(4, 128256, device="cuda", dtype=torch.float32)

    def run_all():
        y = torch.empty(1, 3072, device="cuda", dtype=torch.bfloat16)
        gemv.launch_gemv(x, w, None, y, 8, 1024, 8)
        h = torch.empty(64, 2048, device="cuda", dtype=torch.bfloat16)
        gemv.launch_silu_mul(gate_up, h)
        return y, h, argmax.triton_argmax(logits)

    monkeypatch.setattr(launch, "_direct", False)
    expected = run_all()  # the JIT path
    monkeypatch.setattr(launch, "_direct", True)
    for _ in range(3):
        for got, want in zip(run_all(), expected):
            assert torch.equal(got, want)
    for launcher in (gemv._gemv_launch, gemv._silu_mul_launch, argmax._chunk_argmax_launch,
                     argmax._row_argmax_launch):
        assert launcher.num_direct >= 2, launcher.kernel.fn.__name__

    # a graph recorded from direct launches (add-norm then silu-mul on its output), replayed on new inputs
    a, r = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16), torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    nw = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    normed, h, act = torch.empty_like(a), torch.empty_like(a), torch.empty(64, 2048, device="cuda", dtype=torch.bfloat16)

    def step():
        add_rmsnorm.launch_add_rmsnorm(a, r, nw, 1e-5, normed, h)
        gemv.launch_silu_mul(normed, act)

    for _ in range(2):
        step()  # the second one direct
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    a.copy_(torch.randn_like(a))
    r.copy_(torch.randn_like(r))
    graph.replay()
    torch.cuda.synchronize()
    replayed = act.clone()
    monkeypatch.setattr(launch, "_direct", False)
    step()
    assert torch.equal(replayed, act)
