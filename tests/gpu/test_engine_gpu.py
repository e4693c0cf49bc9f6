"""The engine on the GPU: parity with transformers in bf16, Triton vs reference backend."""

from __future__ import annotations

import pytest
import torch

from graphbench.config import load_engine_config
from graphbench.runner.engine import Engine
from graphbench.runner.request import SamplingParams
from tests.hf_checkpoints import save_tiny_checkpoint

pytestmark = pytest.mark.gpu


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def gpu_engine(**overrides) -> Engine:
    values = {"model.device": "cuda", "model.dtype": "bfloat16", "optimization_level": 0,
              "scheduler.max_num_seqs": 16, "scheduler.max_num_batched_tokens": 512, "cache.num_blocks": 512}
    values.update(overrides)
    return Engine(load_engine_config(overrides=values))


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_bf16_logits_match_transformers(tmp_path, kind):
    import transformers

    folder = save_tiny_checkpoint(tmp_path / kind, kind, seed=2)
    prompts = [[5, 17, 99, 3], [200], list(range(1, 40))]
    engine = gpu_engine(**{"model.model": str(folder)})
    ours = engine.prompt_logits(prompts)
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).cuda().eval()
    with torch.no_grad():
        for prompt, logits in zip(prompts, ours):
            expected = hf(torch.tensor([prompt], device="cuda")).logits[0]
            assert rel_err(logits, expected) < 2e-2


def test_triton_backend_matches_reference_on_llama_1b():
    prompts = [list(range(3, 3 + n)) for n in (1, 17, 64, 130)]
    params = SamplingParams(max_tokens=24)
    # float32: the two backends compute the same function (16 layers of it) up to tf32/fp32 rounding
    fp32 = {"model.model": "llama-3.2-1b", "model.dtype": "float32"}
    triton32 = gpu_engine(**fp32, **{"model.attention_backend": "triton"})
    ref32 = gpu_engine(**fp32, **{"model.attention_backend": "reference"})
    for x, y in zip(triton32.prompt_logits(prompts), ref32.prompt_logits(prompts)):
        assert rel_err(x, y) < 2e-3
    # bfloat16: rounding differs between the backends and compounds over 16 layers; logits stay close
    common = {"model.model": "llama-3.2-1b"}
    triton_engine = gpu_engine(**common, **{"model.attention_backend": "triton"})
    ref_engine = gpu_engine(**common, **{"model.attention_backend": "reference"})
    for x, y in zip(triton_engine.prompt_logits(prompts), ref_engine.prompt_logits(prompts)):
        assert rel_err(x, y) < 5e-2
    # greedy tokens in float32: dummy weights give near-tied logits, so bf16 rounding flips tokens
    out_a = triton32.generate(prompts, params)
    out_b = ref32.generate(prompts, params)
    same = sum(x == y for p, q in zip(out_a, out_b) for x, y in zip(p, q))
    assert same / sum(map(len, out_a)) >= 0.99


def test_unset_token_budget_follows_the_gpu():
    """An engine left at the default token budget takes vLLM's server default for its GPU (8192 on an
    H200), sizes its step buffers for it, and prefills one such step of many prompts."""
    from graphbench.config.parts import default_max_num_batched_tokens

    props = torch.cuda.get_device_properties(0)
    expected = default_max_num_batched_tokens(props.name, props.total_memory)
    engine = gpu_engine(**{"scheduler.max_num_batched_tokens": None, "scheduler.max_num_seqs": 64,
                           "cache.num_blocks": 2048})
    assert engine.config.scheduler.max_num_batched_tokens == expected
    assert engine.inputs.input_ids.shape[0] >= expected
    prompts = [list(range(3, 3 + 128)) for _ in range(64)]  # 8192 prompt tokens
    outputs = engine.generate(prompts, SamplingParams(max_tokens=4, ignore_eos=True))
    assert [len(o) for o in outputs] == [4] * 64


def test_packed_inputs_give_the_copies_tokens():
    """One packed upload a step (runner/kernels/step_inputs.py; a FULL recording unpacks it itself) against a
    copy per buffer, in one -O2 engine (FULL and piecewise recordings, asynchronous steps whose tokens come
    from the device): the same greedy tokens."""
    engine = gpu_engine(**{"model.model": "llama-3.2-1b", "optimization_level": 2})
    assert engine.inputs.packed
    prompts = [list(range(3, 3 + n)) for n in (1, 17, 64, 130)] + [[7] * 5] * 6
    params = SamplingParams(max_tokens=12)
    packed = engine.generate(prompts, params)
    engine.inputs.packed = False
    copied = engine.generate(prompts, params)
    assert packed == copied and all(len(o) == 12 for o in packed)


@pytest.mark.parametrize("level", [0, 2])
def test_nan_logits_are_an_error_on_the_gpu_and_the_next_step_never_reads_a_bad_token(level):
    """llama-3.2-1b's vocabulary takes the Triton argmax: a NaN row is flagged in the host's copy (an error
    naming the requests) while the device keeps a valid id, so the step already launched behind it (its
    input token read on the device) runs on a real token, not an out-of-range one."""
    from graphbench.errors import GraphbenchError

    engine = gpu_engine(**{"model.model": "llama-3.2-1b", "optimization_level": level})
    assert len(engine.generate([[5, 6, 7]], SamplingParams(max_tokens=4))[0]) == 4
    with torch.no_grad():
        engine.model.norm.weight.fill_(float("nan"))
    with pytest.raises(GraphbenchError, match="logits hold a NaN for request"):
        engine.generate([[5, 6, 7], [9] * 20], SamplingParams(max_tokens=6))
    ids = engine.runner.sampled_ids
    assert ((ids >= 0) & (ids < engine.arch.vocab_size)).all()
    torch.cuda.synchronize()  # no device-side assert from an out-of-range embedding row
    engine.close()
