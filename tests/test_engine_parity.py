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


@pytest.fixture(scope="module", params=["llama", "qwen2", *SCALED_ROPES])
def checkpoint(request, tmp_path_factory):
    kind = request.param
    folder = tmp_path_factory.mktemp(kind)
    if kind in SCALED_ROPES:
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
