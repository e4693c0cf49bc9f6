"""The uniform decode FULL recording's sampling (ModelRunner._call_forward: lm_head and the greedy pick recorded
with the forward, a sampled batch reading the recording's logits) without a GPU: the recording's callable runs
in FULL mode at a padded key where a replay would, and the tokens are the eager run's, greedy and sampled."""

from __future__ import annotations

import torch

import graphbench.runner.model_runner as model_runner_module
from graphbench.config import load_engine_config
from graphbench.config.modes import CUDAGraphMode
from graphbench.runner.engine import Engine
from graphbench.runner.request import SamplingParams
from graphbench.runner.scheduler import BatchDescriptor

FULL = CUDAGraphMode.FULL
SAMPLE = model_runner_module.sample
PROMPTS = [[1, 2, 3], list(range(10, 30)), [7], list(range(100, 111)), [300, 301, 302]]


def tiny_engine() -> Engine:
    return Engine(load_engine_config(overrides={
        "model.model": "tiny-llama", "model.device": "cpu", "model.dtype": "float32", "optimization_level": 0,
        "model.seed": 5, "scheduler.max_num_seqs": 8, "scheduler.max_num_batched_tokens": 64}))


def as_recorded(engine: Engine) -> list[bool]:
    """Uniform decode steps run FULL at the next power of two of their requests (padded rows), the recording
    being its callable; returns, per sampled step, whether it read the recording's logits."""
    runner, read = engine.runner, []
    runner.full_graph = runner._call_forward
    eager_dispatch, sample = runner.dispatcher.dispatch, runner._sample

    def dispatch(desc: BatchDescriptor):
        if not desc.uniform:
            return eager_dispatch(desc)
        padded = 1 << (desc.num_tokens - 1).bit_length()
        return FULL, BatchDescriptor(padded, padded, True, desc.has_lora)

    def read_and_sample(batch, hidden):
        read.append(runner.recorded_logits is not None)
        sample(batch, hidden)

    runner.dispatcher.dispatch, runner._sample = dispatch, read_and_sample
    return read


def run(engine: Engine, params: list[SamplingParams], monkeypatch) -> tuple[list[list[int]], list[torch.Tensor]]:
    """The requests' tokens, and the logits each sampled step drew from."""
    drawn = []
    monkeypatch.setattr(model_runner_module, "sample", lambda logits, *rest: drawn.append(logits.clone()) or SAMPLE(
        logits, *rest))
    requests = [engine.add_request(p, q) for p, q in zip(PROMPTS, params)]
    while engine.has_unfinished():
        engine.step()
    return [r.output_token_ids for r in requests], drawn


def test_recorded_sampling_gives_the_eager_runs_tokens(monkeypatch):
    params = [SamplingParams(max_tokens=10, temperature=0.9 if i % 2 else 0.0, top_p=0.95) for i in range(5)]
    for mixed in (params, [SamplingParams(max_tokens=10)] * 5):  # sampled and greedy requests; greedy only
        tokens, drawn = run(tiny_engine(), mixed, monkeypatch)
        recorded = tiny_engine()
        read = as_recorded(recorded)
        recorded_tokens, recorded_drawn = run(recorded, mixed, monkeypatch)
        assert recorded_tokens == tokens
        # every step samples (the prefill's eager); the decode steps from the recording's logits: the eager ones
        assert len(recorded_drawn) == len(drawn) == (10 if mixed is params else 0)
        for ours, theirs in zip(recorded_drawn, drawn):
            torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
        assert sum(read) >= 8 and not all(read)  # decode steps read the recording's logits; the prefill did not
        assert {r.padded_tokens for r in recorded.records if r.runtime_mode == "FULL"} >= {8}
