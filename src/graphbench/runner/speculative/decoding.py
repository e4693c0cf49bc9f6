"""The engine's side of speculative decoding: drafts for the scheduler, accepted lengths, statistics.

Each decoding request is given d = min(k, tokens it still needs - 1) drafts a step, so its query
is 1 + d tokens; when all have d = k the step is a uniform batch of 1 + k and runs a FULL
recording keyed with num_reqs = tokens // (1 + k). A drafter that finds fewer than d tokens is
filled up with the request's last token (counted as drafted and filled): the batch stays uniform,
and a filler token that happens to be right is accepted like any other. Steps run synchronously
(the next drafts need this step's tokens on the host).
"""

from __future__ import annotations

from dataclasses import dataclass

import time

from graphbench.config.parts import SpeculativeConfig
from graphbench.errors import GraphbenchError
from graphbench.runner.records import StepRecord
from graphbench.runner.request import Request
from graphbench.runner.speculative.drafters import NgramDrafter, ReplayDrafter


@dataclass
class SpeculativeStats:
    """Counters over the engine's life (a repeat takes the difference of two snapshots)."""

    num_drafted: int = 0  # tokens verified as drafts (filler included)
    num_filled: int = 0  # of those, filler: the drafter found nothing for the position
    num_accepted: int = 0  # drafts the target model agreed with (a filler that happened to be right included)
    num_verified_requests: int = 0  # (request, step) pairs with at least one draft
    num_emitted: int = 0  # tokens those requests gained (accepted + one each)
    num_proposed: int = 0  # drafts the drafter proposed (not filler)
    num_accepted_proposed: int = 0  # of those, accepted

    def to_dict(self) -> dict[str, float | int]:
        out: dict[str, float | int] = dict(vars(self))
        verified = self.num_verified_requests
        # over real proposals, as vLLM and TensorRT-LLM report it: filler positions counted apart
        out["acceptance_rate"] = self.num_accepted_proposed / self.num_proposed if self.num_proposed else 0.0
        out["mean_accepted_tokens"] = self.num_accepted / verified if verified else 0.0
        out["mean_tokens_per_verification"] = self.num_emitted / verified if verified else 0.0
        out["num_wasted"] = self.num_drafted - self.num_accepted
        return out

    def minus(self, earlier: "SpeculativeStats") -> "SpeculativeStats":
        return SpeculativeStats(*(getattr(self, f) - getattr(earlier, f) for f in vars(self)))


class SpeculativeDecoder:
    def __init__(self, config: SpeculativeConfig, vocab_size: int, seed: int):
        self.k = config.num_speculative_tokens
        self.method = config.method
        self.ngram = NgramDrafter(config.prompt_lookup_min, config.prompt_lookup_max) if self.method == "ngram" else None
        self.replay = ReplayDrafter(config.replay_acceptance, vocab_size, seed) if self.method == "replay" else None
        # off: the drafter proposes nothing and every draft is filler (a replay drafter's reference run: the
        # steps keep the measured run's 1 + k shapes, so its bf16 numerics and hence its greedy tokens match)
        self.drafting = True
        self.stats = SpeculativeStats()
        self._proposed: dict[int, int] = {}  # request id -> real proposals among its last drafts

    def drafts(self, request: Request, budget: int) -> list[int]:
        """The drafts for a decoding request this step: exactly d = min(k, still needed - 1, budget - 1)."""
        needed = request.sampling.max_tokens - len(request.output_token_ids)
        d = min(self.k, needed - 1, budget - 1)
        if d <= 0:
            return []
        if not self.drafting:
            proposal = []
        elif self.ngram is not None:
            proposal = self.ngram.propose(request.request_id, request.all_token_ids, d)
        else:
            proposal = self.replay.propose(request.prompt_token_ids, len(request.output_token_ids), d)
        filler = d - len(proposal)
        self._proposed[request.request_id] = len(proposal)  # (filler is counted when verified: record)
        last = request.output_token_ids[-1] if request.output_token_ids else request.prompt_token_ids[-1]
        return proposal + [last] * filler

    def record(self, request: Request, drafts: list[int], emitted: list[int]) -> None:
        if drafts:
            proposed = min(self._proposed.pop(request.request_id, len(drafts)), len(drafts))  # (before the filler)
            self.stats.num_proposed += proposed
            self.stats.num_filled += len(drafts) - proposed
            self.stats.num_accepted_proposed += min(len(emitted) - 1, proposed)
            self.stats.num_drafted += len(drafts)
            self.stats.num_accepted += len(emitted) - 1
            self.stats.num_verified_requests += 1
            self.stats.num_emitted += len(emitted)

    def remember(self, prompt_token_ids: list[int], output_token_ids: list[int]) -> None:
        """Replay: the greedy output of this prompt, to propose on later runs of it."""
        if self.replay is not None:
            self.replay.remember(prompt_token_ids, output_token_ids)

    def forget(self, request: Request) -> None:
        self._proposed.pop(request.request_id, None)
        if self.ngram is not None:
            self.ngram.forget(request.request_id)


def speculative_step(engine) -> list[Request]:
    """One step of speculative decoding for `engine` (runner/engine.py's Engine): drafts scheduled with each decoding request, verified, the
    accepted tokens and one more appended, the rejected drafts' KV slots given back."""
    started = time.perf_counter()
    batch = engine.scheduler.schedule()
    if batch is None:
        engine.step_clock.ended(engine.scheduler.has_unfinished())
        if engine.scheduler.has_unfinished():
            raise GraphbenchError("the scheduler cannot make progress: the KV cache is too small for any waiting request")
        return []
    tokens, mode, padded = engine.runner.verify_step(batch)
    launch_seconds = time.perf_counter() - started
    engine.scheduler.update(batch)
    now = time.perf_counter()
    finished = []
    for request, drafts, gained in zip(batch.requests, batch.draft_token_ids, tokens):
        if request.num_computed_tokens < request.num_tokens + len(drafts):
            continue  # a prefill chunk that is not the prompt's last
        stop = next((i for i, token in enumerate(gained) if request.stops_at(token)), len(gained) - 1)
        engine.speculative.record(request, drafts, gained[: stop + 1])  # (tokens after a stop are dropped)
        engine.scheduler.reject(request, len(drafts) - (len(gained) - 1))
        for token in gained:
            request.output_token_ids.append(token)
            request.token_times.append(now)
            if request.first_token_time is None:
                request.first_token_time = now
            eos = request.stops_at(token)
            if eos or len(request.output_token_ids) >= request.sampling.max_tokens:
                request.finish_time, request.finish_reason = now, "stop" if eos else "length"
                engine.scheduler.finish(request)
                engine.speculative.forget(request)
                finished.append(request)
                break
    seconds = engine.step_clock.lap(started, engine.scheduler.has_unfinished())
    engine.records.append(StepRecord(batch.descriptor, seconds, mode.value, padded, launch_seconds,
                                     engine.runner.take_capture_stall()))
    return finished


def make_replay_reference(engine, prompts: list[list[int]], max_tokens: list[int]) -> None:
    """The replay drafter's reference: these prompts run once greedily, with filler drafts (the
    measured run's 1 + k shapes: in bfloat16 a reference made with one-token decodes diverged from
    the 1 + k run's greedy tokens, acceptance 2% at k = 4, batch 16 on the H200, benchmarks/RESULTS.md,
    2026-12-01, ff050d4). Their outputs are what later runs of the same prompts are proposed; the
    steps are not kept in engine.records."""
    from graphbench.runner.request import SamplingParams

    speculative = engine.speculative
    first_record, speculative.drafting = len(engine.records), False
    try:
        requests = [engine.add_request(p, SamplingParams(max_tokens=n)) for p, n in zip(prompts, max_tokens)]
        while engine.has_unfinished():
            engine.step()
    finally:
        speculative.drafting = True
        del engine.records[first_record:]
    for request in requests:
        speculative.remember(request.prompt_token_ids, request.output_token_ids)

