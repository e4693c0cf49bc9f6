"""Checkpoints of shapes no preset has, through the whole -O2 engine on the GPU in bf16 (kernel choices timed at a
cold start, compiled, captured, replayed) against transformers on the same checkpoint: two layers of real models'
widths and head layouts (multi-head attention, GQA ratios 3, 4 and 6, head_dim 80, 96 and 128, hidden sizes that
are no power of two: 960, 1536, 2560, 3072, vocabularies that are no multiple of 64), each at one and at many rows
a step. Passed on an H200 (8 tests, 213 s; benchmarks/RESULTS.md, 2026-12-06).

A kernel that computes a wrong projection or attention for a shape shows as greedy tokens transformers would not
pick; bf16 rounding alone moves a logit by far less than the margin allowed (a tenth of the logits' spread)."""

from __future__ import annotations

import pytest
import torch

from graphbench.config import load_engine_config
from graphbench.runner.engine import Engine
from graphbench.runner.request import SamplingParams
from tests.hf_checkpoints import save_tiny_checkpoint

pytestmark = pytest.mark.gpu

# (kind, what the widths are taken from, config overrides); two layers each
SHAPES = {
    "smollm2-360m": ("llama", dict(hidden_size=960, intermediate_size=2560, num_attention_heads=15,
                                   num_key_value_heads=5, vocab_size=49152, tie_word_embeddings=True)),
    "qwen2.5-1.5b": ("qwen2", dict(hidden_size=1536, intermediate_size=8960, num_attention_heads=12,
                                   num_key_value_heads=2, vocab_size=32003)),
    "mha-head-dim-80": ("llama", dict(hidden_size=2560, intermediate_size=6912, num_attention_heads=32,
                                      num_key_value_heads=32, vocab_size=50295)),
    "phi3-mini-like": ("llama", dict(hidden_size=3072, intermediate_size=8192, num_attention_heads=32,
                                     num_key_value_heads=8, vocab_size=32064)),
}
PROMPTS = [[3 + (7 * i + 5 * j) % 997 for j in range(n)] for i, n in enumerate((1, 9, 40, 3, 17, 64, 5, 2, 30, 11,
                                                                                 1, 25, 8, 50, 4, 13, 6, 21, 2, 33))]
STEPS = 12


@pytest.fixture(scope="module", params=list(SHAPES))
def checkpoint(request, tmp_path_factory):
    kind, overrides = SHAPES[request.param]
    folder = save_tiny_checkpoint(tmp_path_factory.mktemp(request.param), kind, seed=3, num_hidden_layers=2,
                                  max_position_embeddings=1024, **overrides)
    return request.param, folder, kind


def engine_tokens(folder, prompts: list[list[int]]) -> tuple[list[list[int]], Engine]:
    engine = Engine(load_engine_config(overrides={
        "model.model": str(folder), "model.device": "cuda", "model.dtype": "bfloat16", "optimization_level": 2,
        "scheduler.max_num_seqs": 32, "scheduler.max_num_batched_tokens": 1024, "scheduler.max_model_len": 256,
        "cache.num_blocks": 512}))
    params = SamplingParams(max_tokens=STEPS)
    requests = [engine.add_request(p, params) for p in prompts]
    while engine.has_unfinished():
        engine.step()
    return [r.output_token_ids for r in requests], engine


def worst_margin(hf, prompt: list[int], output: list[int]) -> float:
    """Over the output's positions: how far below transformers' best logit the engine's token is, in units of
    that position's logit spread (0: transformers' own greedy pick)."""
    ids = torch.tensor([prompt + output[:-1]], device="cuda")
    with torch.no_grad():
        logits = hf(ids).logits[0, len(prompt) - 1:].float()
    chosen = logits.gather(1, torch.tensor(output, device="cuda")[:, None])[:, 0]
    return ((logits.max(dim=1).values - chosen) / logits.std(dim=1)).max().item()


@pytest.mark.parametrize("batch", [1, 20])
def test_greedy_tokens_are_transformers_picks(checkpoint, batch):
    import transformers

    name, folder, _ = checkpoint
    prompts = PROMPTS[:batch]
    outputs, engine = engine_tokens(folder, prompts)
    replayed = [r for r in engine.records if r.runtime_mode == "FULL"]
    assert replayed, f"{name}: no step replayed a recording"
    assert engine.report.kernel_choices.get("choices"), f"{name}: no kernel choice recorded"
    engine.close()
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).cuda().eval()
    margins = [worst_margin(hf, p, o) for p, o in zip(prompts, outputs)]
    assert all(len(o) == STEPS for o in outputs)
    assert max(margins) < 0.1, (name, batch, [round(m, 3) for m in margins])
