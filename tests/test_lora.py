"""LoRA in the engine against transformers + peft (float32, CPU): logits, greedy tokens, mixed batches,
and the dispatcher's has_lora keys."""

from __future__ import annotations

import pytest
import torch

from graphbench.config import CUDAGraphMode, load_engine_config
from graphbench.errors import GraphbenchError
from graphbench.runner.dispatcher import CudagraphDispatcher
from graphbench.runner.engine import Engine
from graphbench.runner.request import SamplingParams
from graphbench.runner.scheduler import BatchDescriptor
from tests.hf_checkpoints import load_hf, save_peft_adapter, save_tiny_checkpoint

peft = pytest.importorskip("peft")
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def setup(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"lora-{request.param}")
    checkpoint = save_tiny_checkpoint(root / "model", request.param)
    a = save_peft_adapter(checkpoint, root / "a", seed=1, r=8, lora_alpha=16, target_modules=TARGETS)
    b = save_peft_adapter(checkpoint, root / "b", seed=2, target_modules=["q_proj", "v_proj", "down_proj"])
    engine = Engine(load_engine_config(overrides={
        "model.model": str(checkpoint), "model.device": "cpu", "model.dtype": "float32", "optimization_level": 0,
        "scheduler.max_num_seqs": 4, "scheduler.max_num_batched_tokens": 64,
        "lora.modules": [f"a={a}", f"b={b}"], "lora.max_lora_rank": 8}))
    return checkpoint, a, b, engine


def _peft_model(checkpoint, adapter):
    return peft.PeftModel.from_pretrained(load_hf(checkpoint), adapter).eval()


PROMPT = [5, 17, 99, 3, 42, 7]


def test_logits_match_transformers_with_peft(setup):
    checkpoint, a, b, engine = setup
    for name, folder in (("a", a), ("b", b)):
        with torch.no_grad():
            expected = _peft_model(checkpoint, folder)(torch.tensor([PROMPT])).logits[0]
        (ours,) = engine.prompt_logits([PROMPT], [name])
        assert torch.allclose(ours, expected, atol=1e-4), (name, (ours - expected).abs().max())
    with torch.no_grad():
        base = load_hf(checkpoint)(torch.tensor([PROMPT])).logits[0]
    (plain,) = engine.prompt_logits([PROMPT])
    assert torch.allclose(plain, base, atol=1e-4)  # no adapter: the base model, slots of zeros


def test_greedy_tokens_match_and_a_mixed_batch_gives_each_its_own(setup):
    checkpoint, a, b, engine = setup
    with torch.no_grad():
        expected = _peft_model(checkpoint, a).generate(torch.tensor([PROMPT]), max_new_tokens=32, do_sample=False,
                                                      min_new_tokens=32)[0, len(PROMPT):].tolist()
    sampling = SamplingParams(max_tokens=32)
    assert engine.generate([PROMPT], sampling, ["a"])[0] == expected
    prompts = [PROMPT, [9, 8, 7, 6, 5], [1, 2, 3, 4, 5, 6, 7, 8]]
    alone = [engine.generate([p], sampling, [lora])[0] for p, lora in zip(prompts, ["a", "b", None])]
    assert engine.generate(prompts, sampling, ["a", "b", None]) == alone
    assert len({tuple(t) for t in alone}) == 3
    assert engine.generate([PROMPT], sampling, ["b"])[0] != expected  # the adapters do differ


def test_batches_with_adapters_carry_has_lora(setup):
    *_, engine = setup
    engine.add_request(PROMPT, SamplingParams(max_tokens=2), "a")
    engine.add_request([1, 2, 3], SamplingParams(max_tokens=2))
    assert engine.scheduler.schedule().descriptor.has_lora
    engine.scheduler.running.clear()
    engine.allocator.free(list(range(engine.allocator.num_blocks - engine.allocator.num_free)))
    with pytest.raises(GraphbenchError, match="unknown LoRA adapter 'c'"):
        engine.add_request(PROMPT, SamplingParams(max_tokens=2), "c")


def test_specialised_and_shared_recordings():
    sizes = [1, 2, 4, 8]
    special = CudagraphDispatcher(CUDAGraphMode.FULL_AND_PIECEWISE, sizes, 8, has_lora=True)
    shared = CudagraphDispatcher(CUDAGraphMode.FULL_AND_PIECEWISE, sizes, 8, has_lora=True, specialize_lora=False)
    plain = CudagraphDispatcher(CUDAGraphMode.FULL_AND_PIECEWISE, sizes, 8)
    assert special.num_graphs() == {"FULL": 8, "PIECEWISE": 8} and shared.num_graphs() == {"FULL": 4, "PIECEWISE": 4}
    assert special.dispatch(BatchDescriptor(3, 3, True, True)) == (CUDAGraphMode.FULL, BatchDescriptor(4, 4, True, True))
    assert special.dispatch(BatchDescriptor(3, 3, True, False))[1].has_lora is False
    assert shared.dispatch(BatchDescriptor(3, 3, True, True))[0] == CUDAGraphMode.FULL
    assert plain.num_graphs() == {"FULL": 4, "PIECEWISE": 4}


@pytest.mark.parametrize("modules, match", [
    (["a=dummy:r=64"], "rank must be in 1..max_lora_rank"), (["x"], "NAME=PATH"), (["a=1", "a=2"], "unique"),
    (["dummy:r=4,n=5"], None)])
def test_bad_lora_settings(modules, match):
    if match is None:
        assert len(load_engine_config(overrides={"lora.modules": modules}).lora.adapters()) == 5
        with pytest.raises(GraphbenchError, match="do not fit"):
            load_engine_config(overrides={"lora.modules": modules, "lora.max_loras": 2})
        return
    with pytest.raises(GraphbenchError, match=match):
        load_engine_config(overrides={"lora.modules": modules})


def test_the_lora_ops_add_nothing_for_a_key_without_adapters():
    import torch.nn.functional as F

    from graphbench.runner.linear import add_rmsnorm_torch
    from graphbench.runner.lora.projection import (lora_add_rmsnorm_gate_up, lora_add_rmsnorm_linear, lora_gate_up_impl,
                                                   lora_linear)
    from graphbench.runner.lora.weights import adapters_active, lora_delta

    torch.manual_seed(0)
    x, w, bias, a, b = torch.randn(3, 8), torch.randn(6, 8), torch.randn(6), torch.randn(2, 4, 8), torch.randn(2, 6, 4)
    index = torch.tensor([1, -1, 0], dtype=torch.int32)  # each token's adapter row, -1: none
    for own_kernels in (True, False):
        got = lora_linear(x, w, bias, a, b, index, [6], own_kernels)
        delta = got - F.linear(x, w, bias)
        assert torch.allclose(delta, lora_delta(x, a, b, index), atol=1e-5) and delta[1].abs().sum() == 0
        assert delta[0].abs().sum() > 0 and torch.allclose(delta[0], b[1] @ (a[1] @ x[0]), atol=1e-5)
        assert torch.allclose(delta[2], b[0] @ (a[0] @ x[2]), atol=1e-5)
        gate_up = F.linear(x, w) + lora_delta(x, a, b, index)  # [gate | up], 3 columns each
        want = F.silu(gate_up[:, :3]) * gate_up[:, 3:]
        assert torch.allclose(lora_gate_up_impl(x, w, a, b, index, [3, 3], own_kernels), want, atol=1e-5)
        # with the residual add + RMSNorm in front (one launch with the shrink on a GPU): the same as apart
        residual, nw = torch.randn(3, 8), 1 + 0.1 * torch.randn(8)
        got, h = lora_add_rmsnorm_linear(x, residual, nw, 1e-6, w, bias, a, b, index, [6], own_kernels)
        normed, want_h = add_rmsnorm_torch(x, residual, nw, 1e-6)
        assert torch.equal(h, want_h) and torch.allclose(got, lora_linear(normed, w, bias, a, b, index, [6], own_kernels))
        hidden, h = lora_add_rmsnorm_gate_up(x, residual, nw, 1e-6, w, a, b, index, [3, 3], own_kernels)
        assert torch.allclose(hidden, lora_gate_up_impl(normed, w, a, b, index, [3, 3], own_kernels), atol=1e-6)
        with adapters_active(False):
            assert torch.equal(lora_linear(x, w, bias, a, b, index, [6], own_kernels), F.linear(x, w, bias))
            plain = F.linear(x, w)
            assert torch.equal(lora_gate_up_impl(x, w, a, b, index, [3, 3], own_kernels), F.silu(plain[:, :3]) * plain[:, 3:])


def test_a_lora_share_spreads_adapters_evenly():
    from graphbench.bench.workloads import Workload

    names = ["a", "b"]
    half = Workload(concurrency=4, lora_share=0.5)
    assert [half.adapter_for(i, names) for i in range(6)] == [None, "a", None, "b", None, "a"]
    assert [Workload(lora_share=1.0).adapter_for(i, names) for i in range(3)] == ["a", "b", "a"]
    assert [Workload(lora_share=0.25).adapter_for(i, names) for i in range(8)].count(None) == 6
    assert Workload(lora_share=0.0).adapter_for(3, []) is None
    assert half.name == "closed-c4-lora0.5"
    with pytest.raises(GraphbenchError, match="needs adapters"):
        half.adapter_for(1, [])
    with pytest.raises(GraphbenchError, match="LoRA share"):
        Workload(lora_share=float("nan"))


def test_the_report_table_compares_each_share_with_share_zero():
    from graphbench.reports.lora_table import lora_table

    def workload(name, share, tps, tpot):
        return {"name": name, "lora_share": share, "summary": {"output_tokens_per_s": {"median": tps},
                                                              "tpot_p50_ms": {"median": tpot}}}

    result = {"label": "O2", "system": "graphbench", "status": "ok",
              "config": {"lora": {"modules": ["dummy:r=16,n=4"], "cudagraph_specialize_lora": False}},
              "startup": {"num_graphs": {"FULL": 11, "PIECEWISE": 19}, "capture_s": 1.5, "graph_memory_bytes": 60 << 20},
              "workloads": [workload("closed-c16", 0.0, 100.0, 2.0), workload("closed-c16-lora1", 1.0, 80.0, 2.5)]}
    table = lora_table([result, {"label": "plain", "status": "ok", "config": {}, "workloads": []}])
    assert table["point"].tolist() == ["O2", "O2"] and table["adapters"].tolist() == [4, 4]
    assert table["specialised"].tolist() == ["no", "no"] and table["graph keys"][0] == "FULL 11 / PIECEWISE 19"
    assert table["tok/s vs share 0 %"].tolist() == pytest.approx([0.0, -20.0])
    assert table["TPOT vs share 0 %"].tolist() == pytest.approx([0.0, 25.0]) and table["graph MiB"][0] == 60.0
