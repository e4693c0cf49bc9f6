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
from tests.hf_checkpoints import load_hf, save_tiny_checkpoint

peft = pytest.importorskip("peft")
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _adapter(checkpoint, folder, seed: int, rank: int, targets=TARGETS, alpha: int = 16):
    """A PEFT adapter on the checkpoint with random A and B (PEFT starts B at zero: no effect)."""
    torch.manual_seed(seed)
    model = peft.get_peft_model(load_hf(checkpoint),
                                peft.LoraConfig(r=rank, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.normal_(0, 0.1)
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def setup(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"lora-{request.param}")
    checkpoint = save_tiny_checkpoint(root / "model", request.param)
    a = _adapter(checkpoint, root / "a", seed=1, rank=8)
    b = _adapter(checkpoint, root / "b", seed=2, rank=4, targets=["q_proj", "v_proj", "down_proj"], alpha=8)
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
