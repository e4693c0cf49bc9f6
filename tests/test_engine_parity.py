"""graphbench's engine against Hugging Face transformers on the same tiny checkpoints (CPU, float32)."""

from __future__ import annotations

import pytest
import torch

from graphbench.config import load_engine_config
from graphbench.runner.engine import Engine
from graphbench.runner.request import SamplingParams
from tests.hf_checkpoints import load_hf, save_tiny_checkpoint

PROMPTS = [[5, 17, 99, 3], [200], list(range(1, 40)), [7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 2]]


def make_engine(folder, **overrides) -> Engine:
    values = {"model.model": str(folder), "model.device": "cpu", "model.dtype": "float32", "optimization_level": 0}
    values.update(overrides)
    return Engine(load_engine_config(overrides=values))


# rope scalings, each on a checkpoint whose head_dim puts dimensions on both sides of the scaling's ramp
SCALED_ROPES = {
    "llama3-rope": ("llama", {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 64, "rope_theta": 500000.0}),
    "yarn-rope": ("qwen2", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128,
                            "rope_theta": 10000.0}),
    # DeepSeek's form: mscale and mscale_all_dim, an untruncated ramp, a factor from the two contexts
    "yarn-mscale-rope": ("llama", {"rope_type": "yarn", "factor": None, "original_max_position_embeddings": 64, "mscale": 0.707,
                                   "mscale_all_dim": 1.0, "beta_fast": 16, "beta_slow": 2, "truncate": False,
                                   "rope_theta": 10000.0}),
    # below max_position_embeddings transformers' dynamic NTK leaves the frequencies as they are
    "dynamic-rope": ("llama", {"rope_type": "dynamic", "factor": 4.0, "rope_theta": 10000.0}),
}


# shapes nobody measured: head_dim no power of two (48, 80, 96), odd KV head counts and GQA ratios, hidden and
# intermediate sizes with no 64-wide K tile, odd vocabularies, tied and untied. No EOS token: transformers'
# min_new_tokens masks it, which the engine (ignore_eos) does not (odd-llama-hd48's greedy pick at one step is
# token 2, Llama's default EOS)
NO_EOS = dict(bos_token_id=None, eos_token_id=None)
ODD_SHAPES = {
    "odd-llama-hd48": ("llama", dict(hidden_size=150, intermediate_size=200, num_attention_heads=15,
                                     num_key_value_heads=5, head_dim=48, vocab_size=1001, **NO_EOS)),
    "odd-qwen2-hd80": ("qwen2", dict(hidden_size=168, intermediate_size=486, num_attention_heads=14,
                                     num_key_value_heads=2, head_dim=80, vocab_size=777, tie_word_embeddings=False,
                                     **NO_EOS)),
    "odd-qwen2-hd96-tied": ("qwen2", dict(hidden_size=63, intermediate_size=1000, num_attention_heads=7,
                                          num_key_value_heads=1, head_dim=96, vocab_size=32001, **NO_EOS)),
}


@pytest.fixture(scope="module", params=["llama", "qwen2", *SCALED_ROPES, *ODD_SHAPES])
def checkpoint(request, tmp_path_factory):
    kind = request.param
    folder = tmp_path_factory.mktemp(kind)
    if kind in ODD_SHAPES:
        base, shape = ODD_SHAPES[kind]
        save_tiny_checkpoint(folder, base, seed=7, **shape)
    elif kind in SCALED_ROPES:
        base, rope = SCALED_ROPES[kind]
        save_tiny_checkpoint(folder, base, seed=3, rope_parameters=rope, head_dim=32)
    else:
        save_tiny_checkpoint(folder, kind, seed=1)
    return folder


def test_prompt_logits_match_transformers(checkpoint):
    engine = make_engine(checkpoint)
    ours = engine.prompt_logits(PROMPTS)
    hf = load_hf(checkpoint)
    with torch.no_grad():
        for prompt, logits in zip(PROMPTS, ours):
            expected = hf(torch.tensor([prompt])).logits[0].float()
            assert logits.shape == expected.shape
            assert (logits - expected).abs().max().item() < 1e-4


def test_greedy_generation_matches_transformers(checkpoint):
    engine = make_engine(checkpoint)
    outputs = engine.generate(PROMPTS, SamplingParams(max_tokens=32))
    hf = load_hf(checkpoint)
    for prompt, tokens in zip(PROMPTS, outputs):
        generated = hf.generate(
            torch.tensor([prompt]), max_new_tokens=32, min_new_tokens=32, do_sample=False,
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long), pad_token_id=0,
        )[0, len(prompt):].tolist()
        assert tokens == generated


def test_an_odd_shaped_checkpoint_compiled_matches_transformers(tmp_path, monkeypatch):
    # -O2 (torch.compile on the CPU, split at attention): head_dim 80, 14 heads on 2 KV heads, K = 168 and 486
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(tmp_path / "cache"))
    base, shape = ODD_SHAPES["odd-qwen2-hd80"]
    folder = save_tiny_checkpoint(tmp_path / "odd", base, seed=7, **shape)
    engine = make_engine(folder, optimization_level=2)
    hf = load_hf(folder)
    with torch.no_grad():
        for prompt, logits in zip(PROMPTS, engine.prompt_logits(PROMPTS)):
            assert (logits - hf(torch.tensor([prompt])).logits[0].float()).abs().max().item() < 1e-4
    prompt = PROMPTS[2]
    tokens = engine.generate([prompt], SamplingParams(max_tokens=8))[0]
    assert tokens == hf.generate(torch.tensor([prompt]), max_new_tokens=8, min_new_tokens=8, do_sample=False,
                                 attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                                 pad_token_id=0)[0, len(prompt):].tolist()
