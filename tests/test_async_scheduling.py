"""Asynchronous scheduling (step N+1 launched before step N's tokens reach the host) on the CPU.

The same code path runs on the GPU, where it overlaps host and device work; here it must give
exactly the tokens of synchronous scheduling, stop on EOS, survive preemption and finish cleanly.
"""

from __future__ import annotations

import pytest

from graphbench.runner.request import PENDING_TOKEN, SamplingParams
from tests.test_engine import PROMPTS, tiny_engine


def run(engine, prompts, params_list):
    requests = [engine.add_request(p, s) for p, s in zip(prompts, params_list)]
    finished_order = []
    while engine.has_unfinished():
        finished_order += engine.step()
    return requests, finished_order


@pytest.mark.parametrize("overrides", [
    {},
    {"scheduler.max_num_batched_tokens": 8},  # chunked prefills: partial chunks sample nothing
    {"scheduler.max_num_seqs": 2},
    {"cache.num_blocks": 14, "cache.block_size": 4},  # preemption while tokens are in flight
])
def test_async_gives_the_tokens_of_sync(overrides):
    lengths = [12, 5, 9, 12, 3]
    params = [SamplingParams(max_tokens=n) for n in lengths]
    sync_reqs, _ = run(tiny_engine(**overrides, **{"scheduler.async_scheduling": False}), PROMPTS, params)
    async_engine = tiny_engine(**overrides, **{"scheduler.async_scheduling": True})
    async_reqs, finished = run(async_engine, PROMPTS, params)
    assert [r.output_token_ids for r in async_reqs] == [r.output_token_ids for r in sync_reqs]
    assert [len(r.output_token_ids) for r in async_reqs] == lengths
    assert sorted(finished, key=id) == sorted(async_reqs, key=id)  # each reported finished once
    for r in async_reqs:
        assert PENDING_TOKEN not in r.output_token_ids and r.pending_row is None and r.is_finished
        assert len(r.token_times) == len(r.output_token_ids) and r.first_token_time <= r.finish_time
    assert async_engine.allocator.num_free == async_engine.kv_cache.num_blocks  # every block came back
    if "cache.num_blocks" in overrides:
        assert any(r.num_preemptions for r in async_reqs)


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_eos_stops_a_request_and_drops_tokens_sampled_after_it(async_scheduling):
    free_run = tiny_engine().generate([PROMPTS[1]], SamplingParams(max_tokens=12))[0]
    stop = free_run[4]
    expected = free_run[: free_run.index(stop) + 1]
    assert len(expected) < 12
    engine = tiny_engine(**{"scheduler.async_scheduling": async_scheduling})
    params = SamplingParams(max_tokens=12, ignore_eos=False, stop_token_ids=(stop,))
    (request, other), finished = run(engine, [PROMPTS[1], PROMPTS[0]], [params, SamplingParams(max_tokens=12)])
    assert request.output_token_ids == expected
    assert len(other.output_token_ids) == 12 and set(finished) == {request, other}
    assert len(request.token_times) >= len(expected)
    assert engine.allocator.num_free == engine.kv_cache.num_blocks


def test_sampled_temperature_path_matches_between_modes():
    params = [SamplingParams(max_tokens=8, temperature=0.8, top_p=0.9)] * 3
    outs = []
    for async_scheduling in (False, True):
        requests, _ = run(tiny_engine(**{"scheduler.async_scheduling": async_scheduling}), PROMPTS[:3], params)
        outs.append([r.output_token_ids for r in requests])
    assert outs[0] == outs[1]


def test_pending_tokens_are_gathered_on_the_device():
    """A decode step launched before the previous tokens came back reads them from the device."""
    engine = tiny_engine(**{"scheduler.async_scheduling": True})
    requests = [engine.add_request(p, SamplingParams(max_tokens=6)) for p in PROMPTS[:3]]
    engine.step()  # prefill: launched, tokens not taken in yet
    assert all(r.output_token_ids == [PENDING_TOKEN] for r in requests)
    engine.step()  # decode of the pending tokens, then the prefill's tokens are taken in
    assert engine.inputs.num_gathers == 3
    rows = engine.inputs.gather_rows[:, :3].tolist()
    assert rows == [[0, 1, 2], [0, 1, 2]]
    first_tokens = [r.output_token_ids[0] for r in requests]
    assert engine.inputs.input_ids[:3].tolist() == first_tokens and PENDING_TOKEN not in first_tokens


def test_the_cpu_takes_each_steps_tokens_in_that_step_by_default():
    """On the CPU a step computes as it is launched: with asynchronous scheduling its tokens would reach the
    host only after the next step had computed too (TTFT a step high, the next token's gap near 0)."""
    engine = tiny_engine()
    assert engine.config.scheduler.async_scheduling is False
    requests = [engine.add_request(p, SamplingParams(max_tokens=2)) for p in PROMPTS[:2]]
    engine.step()  # the prefill: its tokens are on the host when the step returns
    assert all(len(r.output_token_ids) == 1 and PENDING_TOKEN not in r.output_token_ids for r in requests)
    assert all(r.first_token_time is not None for r in requests)
    finished = engine.step()
    assert set(finished) == set(requests) and all(len(r.token_times) == 2 for r in requests)
    # a config that sets it keeps it, and the GPU's default is on
    from graphbench.config.engine_config import EngineConfig

    assert EngineConfig().resolve(device_type="cuda").scheduler.async_scheduling is True
    assert EngineConfig().resolve(device_type="cpu").scheduler.async_scheduling is False
    assert tiny_engine(**{"scheduler.async_scheduling": True}).config.scheduler.async_scheduling is True


def test_async_scheduling_must_be_a_boolean():
    from graphbench.errors import GraphbenchError

    with pytest.raises(GraphbenchError, match="async_scheduling must be true or false, got 'yes'"):
        tiny_engine(**{"scheduler.async_scheduling": "yes"})
