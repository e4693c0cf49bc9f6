"""Engine behaviour on the CPU: continuous batching, chunked prefill, preemption, sampling, bad input."""

from __future__ import annotations

import json

import pytest
import torch

from graphbench.config import load_engine_config
from graphbench.errors import GraphbenchError
from graphbench.runner.engine import Engine
from graphbench.runner.request import SamplingParams
from tests.hf_checkpoints import save_tiny_checkpoint


def tiny_engine(**overrides) -> Engine:
    values = {"model.device": "cpu", "model.dtype": "float32", "optimization_level": 0,
              "scheduler.max_num_seqs": 8, "scheduler.max_num_batched_tokens": 64}
    values.update(overrides)
    return Engine(load_engine_config(overrides=values))


PROMPTS = [[1, 2, 3], list(range(10, 50)), [7], list(range(100, 121)), [300, 301, 302, 303, 304]]


@pytest.fixture(scope="module")
def alone():
    engine = tiny_engine()
    return [engine.generate([p], SamplingParams(max_tokens=12))[0] for p in PROMPTS]


def test_staggered_requests_match_running_alone(alone):
    """Requests join and finish at different steps; each gets the tokens it gets alone."""
    engine = tiny_engine()
    lengths = [12, 5, 9, 12, 3]
    requests = [engine.add_request(PROMPTS[0], SamplingParams(max_tokens=lengths[0]))]
    pending = list(zip(PROMPTS[1:], lengths[1:]))
    steps = 0
    while engine.has_unfinished() or pending:
        if pending and steps % 2 == 1:
            prompt, n = pending.pop(0)
            requests.append(engine.add_request(prompt, SamplingParams(max_tokens=n)))
        engine.step()
        steps += 1
    for request, expected, n in zip(requests, alone, lengths):
        assert request.output_token_ids == expected[:n]
    kinds = {(r.descriptor.uniform) for r in engine.records}
    assert kinds == {True, False}  # both pure-decode and mixed steps happened


def test_chunked_prefill_and_small_token_budget(alone):
    engine = tiny_engine(**{"scheduler.max_num_batched_tokens": 8})
    outputs = engine.generate(PROMPTS, SamplingParams(max_tokens=12))
    assert outputs == alone
    assert max(r.descriptor.num_tokens for r in engine.records) <= 8


def test_max_num_seqs_limits_a_step():
    engine = tiny_engine(**{"scheduler.max_num_seqs": 2})
    engine.generate(PROMPTS, SamplingParams(max_tokens=4))
    assert max(r.descriptor.num_reqs for r in engine.records) <= 2


def test_preemption_when_kv_blocks_run_out(alone):
    # 6 blocks of 16 tokens: not enough for all five requests at once.
    engine = tiny_engine(**{"cache.num_blocks": 6})
    outputs = engine.generate(PROMPTS, SamplingParams(max_tokens=12))
    assert outputs == alone
    assert engine.allocator.num_free == 6  # every block came back


def test_uniform_descriptor_for_decode_steps():
    engine = tiny_engine()
    engine.generate([[1, 2], [3, 4, 5]], SamplingParams(max_tokens=4))
    first, *rest = engine.records
    assert (first.descriptor.num_tokens, first.descriptor.num_reqs, first.descriptor.uniform) == (5, 2, False)
    assert all((r.descriptor.num_tokens, r.descriptor.num_reqs, r.descriptor.uniform) == (2, 2, True) for r in rest)


def test_sampling_is_seeded_and_respects_top_p():
    params = SamplingParams(max_tokens=16, temperature=1.0, top_p=0.9)
    a = tiny_engine(**{"model.seed": 3}).generate([[1, 2, 3]] * 2, params)
    b = tiny_engine(**{"model.seed": 3}).generate([[1, 2, 3]] * 2, params)
    assert a == b
    greedy = tiny_engine(**{"model.seed": 3}).generate([[1, 2, 3]], SamplingParams(max_tokens=16))
    assert a[0] != greedy[0]
    # a tiny top_p keeps only the most likely token: greedy again
    nucleus = tiny_engine(**{"model.seed": 3}).generate([[1, 2, 3]], SamplingParams(max_tokens=16, temperature=1.0, top_p=1e-6))
    assert nucleus == greedy


def test_sampler_top_p_distribution():
    from graphbench.runner.sampler import sample

    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])).repeat(4000, 1)
    g = torch.Generator().manual_seed(0)
    tokens = sample(logits, torch.ones(4000), torch.full((4000,), 0.7), g, all_greedy=False)
    counts = torch.bincount(tokens, minlength=4).tolist()
    assert counts[2] == counts[3] == 0  # outside the 0.7 nucleus (0.5 + 0.3 reaches it)
    assert abs(counts[0] / 4000 - 0.5 / 0.8) < 0.03


def test_prompt_too_long_is_rejected():
    engine = tiny_engine(**{"scheduler.max_model_len": 32})
    with pytest.raises(GraphbenchError, match="exceeds max_model_len 32"):
        engine.add_request(list(range(30)), SamplingParams(max_tokens=4))


def test_request_larger_than_kv_cache_is_rejected():
    engine = tiny_engine(**{"cache.num_blocks": 2})
    with pytest.raises(GraphbenchError, match="needs 3 KV blocks but the cache holds only 2"):
        engine.add_request(list(range(40)), SamplingParams(max_tokens=4))


def test_token_outside_vocab_is_rejected():
    with pytest.raises(GraphbenchError, match="outside the vocabulary"):
        tiny_engine().add_request([1, 99999])


def test_checkpoint_errors(tmp_path):
    folder = save_tiny_checkpoint(tmp_path / "ckpt", "llama")
    cfg = {"model.model": str(folder)}
    # unsupported architecture
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(dict(config, architectures=["GPT2LMHeadModel"])))
    with pytest.raises(GraphbenchError, match="unsupported architecture 'GPT2LMHeadModel'"):
        tiny_engine(**cfg)
    (folder / "config.json").write_text(json.dumps(config))
    # corrupt safetensors
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(GraphbenchError, match="corrupt or truncated"):
        tiny_engine(**cfg)
    # missing weights file
    weights.unlink()
    with pytest.raises(GraphbenchError, match="no \\*.safetensors"):
        tiny_engine(**cfg)
    # missing config.json
    (folder / "config.json").unlink()
    with pytest.raises(GraphbenchError, match="not a checkpoint folder|no config.json"):
        tiny_engine(**cfg)


def test_sharded_checkpoint_loads_and_missing_shard_is_reported(tmp_path):
    import transformers

    folder = save_tiny_checkpoint(tmp_path / "one", "llama")
    model = transformers.AutoModelForCausalLM.from_pretrained(folder)
    sharded = tmp_path / "sharded"
    model.save_pretrained(sharded, max_shard_size="100KB")
    assert len(list(sharded.glob("*.safetensors"))) > 1
    prompt = [[1, 2, 3, 4]]
    assert tiny_engine(**{"model.model": str(sharded)}).generate(prompt) == tiny_engine(
        **{"model.model": str(folder)}).generate(prompt)
    next(sharded.glob("model-00002-*.safetensors")).unlink()
    with pytest.raises(GraphbenchError, match="missing shard"):
        tiny_engine(**{"model.model": str(sharded)})


def test_preset_cannot_load_safetensors():
    with pytest.raises(GraphbenchError, match="use --load-format dummy"):
        tiny_engine(**{"model.load_format": "safetensors"})


def test_close_lets_go_of_the_weights_and_kv_cache_and_refuses_more_work():
    import weakref

    engine = tiny_engine()
    tokens = engine.generate([[1, 2, 3]], SamplingParams(max_tokens=4))
    weight, kv = weakref.ref(engine.model.lm_head.weight), weakref.ref(engine.kv_cache.layers[0][0])
    engine.close()
    assert weight() is None and kv() is None  # nothing else held them: their memory is free
    assert engine.report.num_kv_blocks > 0 and len(engine.records) > 0  # what was measured stays
    assert not engine.has_unfinished()
    with pytest.raises(GraphbenchError, match="this engine is closed: start a new one"):
        engine.add_request([1, 2, 3])
    with pytest.raises(GraphbenchError, match="this engine is closed"):
        engine.step()
    engine.close()  # twice: nothing more to do
    assert tiny_engine().generate([[1, 2, 3]], SamplingParams(max_tokens=4)) == tokens
