"""Speculative decoding: drafters' exact proposals, acceptance on hand-made logits, the scheduler's
1 + k batches and freed blocks, the backend downgrade, and greedy outputs identical to k = 0."""

from __future__ import annotations

import random

import pytest
import torch

from graphbench.config import CUDAGraphMode, load_engine_config
from graphbench.errors import GraphbenchError
from graphbench.runner.attention.backend import CudagraphSupport
from graphbench.runner.dispatcher import CudagraphDispatcher, resolve_cudagraph_mode
from graphbench.runner.engine import Engine
from graphbench.runner.block_allocator import BlockAllocator
from graphbench.runner.request import Request, SamplingParams
from graphbench.runner.scheduler import Scheduler
from graphbench.runner.speculative.drafters import NgramDrafter, ReplayDrafter
from graphbench.runner.speculative.verify import accept_greedy, verify
from tests.hf_checkpoints import save_tiny_checkpoint

# ---------------------------------------------------------------- drafters


def test_ngram_proposes_what_followed_the_longest_match():
    d = NgramDrafter(min_n=1, max_n=3)
    # suffix 7,8 occurred at 1..2 (followed by 9, 4) and the 1-gram 8 too: the longer match wins
    assert d.propose(0, [5, 7, 8, 9, 4, 8, 6, 7, 8], 2) == [9, 4]
    # the most recent earlier occurrence of the suffix is used: 1,2 at 3..4 is followed by 8
    assert d.propose(1, [1, 2, 9, 1, 2, 8, 1, 2], 3) == [8, 1, 2]
    # fewer than k tokens follow the match: what there is
    assert d.propose(2, [3, 4, 3], 5) == [4, 3]
    assert d.propose(3, [1, 2, 3], 2) == []  # nothing repeats
    assert d.propose(4, [6], 2) == []


def test_ngram_respects_its_bounds_and_updates_incrementally():
    d = NgramDrafter(min_n=2, max_n=2)
    assert d.propose(0, [1, 9, 5, 1], 2) == []  # only a 1-gram (1) repeats: below min_n
    assert d.propose(0, [1, 9, 5, 1, 9], 2) == [5, 1]  # the sequence grew: 1,9 now matches
    assert d.propose(0, [1, 9, 5, 1, 9, 5], 3) == [1, 9, 5]
    assert d.propose(0, [4, 4, 4], 1) == [4]  # another sequence under the same id: indexed afresh
    d.forget(0)
    assert d.propose(0, [1, 2], 2) == []


def test_replay_proposes_the_reference_and_corrupts_at_the_set_rate():
    d = ReplayDrafter(acceptance=1.0, vocab_size=100)
    d.remember([1, 2, 3], [10, 11, 12, 13, 14])
    assert d.propose([1, 2, 3], 0, 3) == [10, 11, 12]
    assert d.propose([1, 2, 3], 3, 4) == [13, 14]
    assert d.propose([9], 0, 2) == []
    never = ReplayDrafter(acceptance=0.0, vocab_size=100)
    never.remember([1, 2, 3], [10, 99, 12])
    assert never.propose([1, 2, 3], 0, 3) == [11, 0, 13]  # each token moved by one (mod the vocabulary)
    half = ReplayDrafter(acceptance=0.5, vocab_size=1000, seed=3)
    reference = list(range(2000))
    half.remember([7], reference)
    kept = sum(a == b for a, b in zip(half.propose([7], 0, 2000), reference))
    assert 900 < kept < 1100 and half.propose([7], 0, 50) == half.propose([7], 0, 50)


# ---------------------------------------------------------------- acceptance


def test_greedy_acceptance_takes_the_longest_matching_prefix_and_one_more():
    # request A: drafts 5,6,7, targets 5,6,9,.. -> accepts 5,6, then 9 (the first mismatch's target)
    # request B: drafts 1,2, targets 1,2,3 -> all accepted plus the bonus 3
    # request C: no drafts (a prefill), target 4 -> just 4
    targets = [5, 6, 9, 8] + [1, 2, 3] + [4]
    assert accept_greedy(targets, [[5, 6, 7], [1, 2], []]) == [[5, 6, 9], [1, 2, 3], [4]]
    assert accept_greedy([0, 1], [[3]]) == [[0]]  # first draft rejected: the target's token alone


def _one_hot_logits(tokens: list[int], vocab: int = 16) -> torch.Tensor:
    logits = torch.full((len(tokens), vocab), -1e9)
    logits[torch.arange(len(tokens)), torch.tensor(tokens)] = 0.0
    return logits


def test_rejection_sampling_on_hand_made_logits():
    # temperature 1 over one-hot logits: p(draft) is 1 or 0, so acceptance is certain either way
    g = torch.Generator().manual_seed(0)
    logits = _one_hot_logits([5, 6, 9, 8, 1, 2, 3])
    out = verify(logits, [[5, 6, 7], [1, 2]], [1.0, 1.0], [1.0, 1.0], g)
    assert out == [[5, 6, 9], [1, 2, 3]]
    # a greedy request in the same batch follows the greedy rule
    out = verify(logits, [[5, 7, 7], [1, 2]], [0.0, 1.0], [1.0, 1.0], g)
    assert out == [[5, 6], [1, 2, 3]]


def test_rejection_sampling_keeps_the_target_distribution():
    # one draft (token 0) against p = (0.5, 0.3, 0.2): the first token emitted must follow p exactly
    p = torch.tensor([0.5, 0.3, 0.2])
    logits = torch.log(p).repeat(2, 1)  # row 0 judges the draft, row 1 gives the bonus
    g = torch.Generator().manual_seed(1)
    counts = [0, 0, 0]
    trials = 6000
    for _ in range(trials):
        counts[verify(logits, [[0]], [1.0], [1.0], g)[0][0]] += 1
    assert [round(c / trials, 2) for c in counts] == pytest.approx([0.5, 0.3, 0.2], abs=0.02)


# ---------------------------------------------------------------- scheduler and dispatcher


def _request(i: int, prompt: list[int], max_tokens: int = 8) -> Request:
    return Request(i, prompt, SamplingParams(max_tokens=max_tokens))


def test_decoding_requests_contribute_one_plus_k_tokens_and_rejected_blocks_are_freed():
    allocator = BlockAllocator(16)
    scheduler = Scheduler(allocator, block_size=4, max_num_seqs=4, max_num_batched_tokens=64, decode_query_len=3,
                          drafts=lambda request, budget: [7, 7])
    requests = [_request(i, [1, 2, 3, 4]) for i in range(2)]
    for r in requests:
        scheduler.add(r)
    prefill = scheduler.schedule()
    assert prefill.num_new_tokens == [4, 4] and not prefill.descriptor.uniform
    scheduler.update(prefill)
    for r in requests:
        r.output_token_ids.append(5)  # the prefill's sampled token
    decode = scheduler.schedule()
    assert decode.num_new_tokens == [3, 3] and decode.draft_token_ids == [[7, 7], [7, 7]]
    assert decode.descriptor.uniform and decode.descriptor.num_tokens == 6
    assert [len(r.block_ids) for r in requests] == [2, 2]  # 4 + 1 + 2 tokens: a second block
    scheduler.update(decode)
    free_before = allocator.num_free
    scheduler.reject(requests[0], 2)  # both drafts rejected: 5 tokens computed, 2 blocks still needed
    scheduler.reject(requests[1], 2)
    assert requests[0].num_computed_tokens == 5 and allocator.num_free == free_before
    requests[1].num_computed_tokens = 4  # as if only the prompt were kept: its second block goes back
    scheduler.reject(requests[1], 0)
    assert len(requests[1].block_ids) == 1 and allocator.num_free == free_before + 1


def test_uniform_one_plus_k_steps_dispatch_to_full_keys():
    dispatcher = CudagraphDispatcher(CUDAGraphMode.FULL_AND_PIECEWISE, [3, 6, 12, 24], max_num_seqs=8,
                                     decode_query_len=3)
    from graphbench.runner.scheduler import BatchDescriptor

    mode, key = dispatcher.dispatch(BatchDescriptor(9, 3, True))
    assert mode == CUDAGraphMode.FULL and key == BatchDescriptor(12, 4, True)
    mode, key = dispatcher.dispatch(BatchDescriptor(9, 2, False))  # a prefill among them: piecewise
    assert mode == CUDAGraphMode.PIECEWISE and key.num_reqs is None


def test_a_single_token_backend_downgrades_one_plus_k_graphs():
    single = CudagraphSupport.UNIFORM_SINGLE_TOKEN_DECODE
    r = resolve_cudagraph_mode(CUDAGraphMode.FULL_AND_PIECEWISE, single, compiling=True, attention_split=True,
                               decode_query_len=3, backend_name="single")
    assert r.resolved == CUDAGraphMode.PIECEWISE and "uniform batches of 3 tokens" in r.reason
    r = resolve_cudagraph_mode(CUDAGraphMode.FULL_DECODE_ONLY, single, compiling=False, attention_split=False,
                               decode_query_len=3, backend_name="single")
    assert r.resolved == CUDAGraphMode.NONE
    kept = resolve_cudagraph_mode(CUDAGraphMode.FULL_AND_PIECEWISE, single, compiling=True, attention_split=True,
                                  decode_query_len=1)
    assert kept.resolved == CUDAGraphMode.FULL_AND_PIECEWISE and not kept.reason
    batch = resolve_cudagraph_mode(CUDAGraphMode.FULL_AND_PIECEWISE, CudagraphSupport.UNIFORM_BATCH, compiling=True,
                                   attention_split=True, decode_query_len=3)
    assert batch.resolved == CUDAGraphMode.FULL_AND_PIECEWISE


def test_bad_speculative_settings_are_errors():
    for overrides, match in [({"speculative.method": "eagle"}, "unknown speculative method"),
                             ({"speculative.prompt_lookup_min": 5, "speculative.prompt_lookup_max": 3}, "above"),
                             ({"speculative.replay_acceptance": float("nan")}, "replay_acceptance")]:
        with pytest.raises(GraphbenchError, match=match):
            load_engine_config(overrides=overrides)


# ---------------------------------------------------------------- the engine, against k = 0


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def checkpoint(request, tmp_path_factory):
    return save_tiny_checkpoint(tmp_path_factory.mktemp(request.param), request.param)


def _engine(checkpoint, **overrides) -> Engine:
    base = {"model.model": str(checkpoint), "model.device": "cpu", "model.dtype": "float32", "optimization_level": 0,
            "scheduler.max_num_seqs": 4, "scheduler.max_num_batched_tokens": 48}
    return Engine(load_engine_config(overrides={**base, **overrides}))


def _run_staggered(engine: Engine, prompts: list[list[int]], max_tokens: list[int]) -> list[list[int]]:
    """Requests join at different steps and finish at different steps (continuous batching)."""
    requests, step = [], 0
    while len(requests) < len(prompts) or engine.has_unfinished():
        if len(requests) < len(prompts) and step % 3 == 0:
            i = len(requests)
            requests.append(engine.add_request(prompts[i], SamplingParams(max_tokens=max_tokens[i])))
        engine.step()
        step += 1
    return [r.output_token_ids for r in requests]


def test_greedy_outputs_with_drafts_are_those_without(checkpoint):
    rng = random.Random(0)
    span = [rng.randrange(1, 256) for _ in range(8)]
    prompts = [span * 3, [rng.randrange(1, 256) for _ in range(5)], span[:4] * 3 + [9], span * 2 + [1, 2]]
    max_tokens = [20, 13, 17, 9]
    expected = _run_staggered(_engine(checkpoint), prompts, max_tokens)
    for k in (1, 2, 4):
        for method in ("ngram", "replay"):
            engine = _engine(checkpoint, **{"speculative.num_speculative_tokens": k, "speculative.method": method})
            if method == "replay":
                for p, out in zip(prompts, expected):
                    engine.speculative.remember(p, out)
            assert _run_staggered(engine, prompts, max_tokens) == expected, (k, method)
            stats = engine.speculative.stats
            assert stats.num_drafted > 0 and engine.allocator.num_free == engine.allocator.num_blocks
            if method == "replay":  # the reference's own tokens: every draft accepted
                assert stats.num_accepted == stats.num_drafted
            assert any(r.descriptor.uniform and r.descriptor.num_tokens % (1 + k) == 0 for r in engine.records)


def test_generate_with_the_replay_drafter_makes_its_reference_first():
    import json

    from typer.testing import CliRunner

    from graphbench.cli.main import app

    base = ["generate", "--device", "cpu", "-O", "0", "-p", "5,6,7,8", "-p", "9,10", "--max-tokens", "12", "--format", "json"]
    runner = CliRunner()
    plain = runner.invoke(app, base)
    replay = runner.invoke(app, [*base, "--num-speculative-tokens", "3", "--speculative-method", "replay"])
    assert plain.exit_code == 0 and replay.exit_code == 0, replay.output
    assert json.loads(replay.stdout)["outputs"] == json.loads(plain.stdout)["outputs"]
    # the steps are generate's own, not the reference pass's: one prefill of both prompts first
    assert [step["kind"] for step in json.loads(replay.stdout)["steps"]][:2] == ["mixed", "decode"]


def test_the_acceptance_rate_is_over_real_proposals_filler_counted_apart():
    """A drafter that found 1 of 4 drafts: the 3 filler positions are not proposals (counting them had
    halved the rate on real text), and a filler that happens to be right is not a proposal accepted."""
    from graphbench.config.parts import SpeculativeConfig
    from graphbench.runner.request import Request, SamplingParams
    from graphbench.runner.speculative.decoding import SpeculativeDecoder

    decoder = SpeculativeDecoder(SpeculativeConfig(num_speculative_tokens=4, method="ngram"), 100, 0)
    request = Request(1, [7, 8, 9, 7, 8], SamplingParams(max_tokens=20))
    request.output_token_ids = [9]
    proposed = len(decoder.ngram.propose(99, request.all_token_ids, 4))  # what the lookup finds ("7 8 9" before)
    drafts = decoder.drafts(request, budget=16)
    assert len(drafts) == 4 and 1 <= proposed < 4
    decoder.record(request, drafts, drafts[:proposed + 1] + [5])  # every proposal and one filler accepted
    stats = decoder.stats.to_dict()
    assert stats["num_proposed"] == proposed and stats["num_accepted_proposed"] == proposed
    assert stats["acceptance_rate"] == 1.0 and stats["num_accepted"] == proposed + 1
    assert stats["num_filled"] == 4 - proposed and stats["mean_tokens_per_verification"] == proposed + 2
