"""A request trace replayed through graphbench's scheduler with no model: each step's token count.

Pure Python, no torch (`graphbench tune` starts fast). The loop is the engine's step (runner/engine.py)
and the benchmark driver's feeding (bench/driver.py) with the model taken out: each step the scheduler
picks its batch (decodes first, chunked prefill, KV blocks, preemption) within max_num_seqs,
max_num_batched_tokens, the block size and the number of KV blocks; every request past its prompt
samples one token; with asynchronous scheduling (the engine's default) a request's last token comes back
one step later, so it holds its sequence slot and blocks for that step. What is recorded is what the
engine's results record as ``batch_size_histogram`` (bench/metrics.py): the unpadded token count of
every step, prefill, mixed and pure-decode alike, the distribution a ladder is tuned for.

What is modelled of the traffic: requests are sent in the recorded order; at most ``max_concurrency``
are in flight (vLLM's client semaphore), all at once when the trace has none (the scheduler then admits
up to max_num_seqs: closed loop at max_num_seqs). Without ``max_concurrency``, a trace that records each
request's send time (``start_times``, vllm-project/vllm PR #32667) sends each request at it: the rate's
random draws as vLLM made them, or a `--dataset-name timed_trace` run's timestamps (its ``request_rate``
stays "inf" although its requests were spread over the run). Otherwise a finite ``request_rate`` sends
request i at i / rate seconds (the mean spacing, not vLLM's random Poisson draws). Either is counted in
steps of the recorded median inter-token latency; without recorded latencies neither can be turned into
steps and is ignored (a warning says so). With ``max_concurrency`` the send times are when a request got
past the client's semaphore, not when it arrived, so they are not used. Not modelled: speculative decoding
(one token per decode step), stop tokens (every request generates its recorded output length),
prefix caching.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from graphbench.errors import GraphbenchError
from graphbench.ladders.distributions import BatchSizeDistribution
from graphbench.ladders.request_trace import RequestTrace, is_request_trace, parse_request_trace
from graphbench.runner.block_allocator import BlockAllocator
from graphbench.runner.request import Request, SamplingParams
from graphbench.runner.scheduler import Scheduler

MAX_REPLAY_TOKENS = 1 << 25  # prompt and output tokens of a trace: a replay of minutes, not hours


@dataclass(frozen=True, slots=True)
class ReplayLimits:
    """The engine limits a trace is replayed at (num_kv_blocks None: enough that nothing is preempted)."""

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    block_size: int = 16
    num_kv_blocks: int | None = None
    enable_chunked_prefill: bool = True
    async_scheduling: bool = True

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "max_num_batched_tokens", "block_size", "num_kv_blocks"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise GraphbenchError(f"{name} must be a positive integer, got {value!r}")
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise GraphbenchError(f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= "
                                  f"max_num_seqs ({self.max_num_seqs})")

    def text(self) -> str:
        blocks = "KV blocks for all" if self.num_kv_blocks is None else f"{self.num_kv_blocks} KV blocks"
        return (f"max_num_seqs {self.max_num_seqs}, max_num_batched_tokens {self.max_num_batched_tokens}, "
                f"block size {self.block_size}, {blocks}")


def replay_steps(input_lens: Sequence[int], output_lens: Sequence[int], limits: ReplayLimits, *,
                 concurrency: int | None = None, arrival_steps: Sequence[int] | None = None,
                 source: str = "trace", phase: str = "all") -> Counter[int]:
    """Step token count -> steps, for the requests replayed in order (see the module docstring);
    arrival_steps: the step at which each request is sent (default: all at the start); phase decode or
    mixed: that phase's steps only (uniform decode steps, or the others)."""
    _check_trace(input_lens, output_lens, limits, source)
    num_blocks = limits.num_kv_blocks or sum(-(-(i + o) // limits.block_size) for i, o in zip(input_lens, output_lens))
    scheduler = Scheduler(BlockAllocator(num_blocks), limits.block_size, limits.max_num_seqs,
                          limits.max_num_batched_tokens, 1, limits.enable_chunked_prefill)
    prompts: dict[int, list[int]] = {}  # one list per prompt length (the scheduler only reads its length)
    pending = deque(range(len(input_lens)))
    arrivals = arrival_steps or [0] * len(input_lens)
    counts: Counter[int] = Counter()
    step = in_flight = 0
    previous: list[tuple[Request, int]] = []
    while pending or scheduler.has_unfinished():
        while pending and (concurrency is None or in_flight < concurrency) and arrivals[pending[0]] <= step:
            i = pending.popleft()
            prompt = prompts.setdefault(input_lens[i], [0] * input_lens[i])
            scheduler.add(Request(i, prompt, SamplingParams(max_tokens=output_lens[i])))
            in_flight += 1
        batch = scheduler.schedule()
        fills: list[tuple[Request, int]] = []
        if batch is not None:
            scheduler.update(batch)
            for request in batch.requests:
                if request.num_computed_tokens >= request.num_tokens:  # not a partial prefill chunk
                    request.output_token_ids.append(0)
                    fills.append((request, len(request.output_token_ids) - 1))
            if phase == "all" or (phase == "decode") == batch.descriptor.uniform:
                counts[batch.num_tokens] += 1
            step += 1
        done = _take(scheduler, previous)
        if limits.async_scheduling:
            previous = fills
        else:
            done += _take(scheduler, fills)
            previous = []
        in_flight -= done
        if batch is None and not done and not previous:
            if pending and not scheduler.has_unfinished():
                step = max(step, arrivals[pending[0]])  # idle until the next request is sent
            elif scheduler.has_unfinished():
                raise GraphbenchError(f"{source}: the scheduler cannot make progress at {limits.text()}: "
                                      "raise --num-kv-blocks")
    return counts


def _take(scheduler: Scheduler, fills: list[tuple[Request, int]]) -> int:
    """A step's tokens come back: the requests whose last token it was finish; how many did."""
    done = 0
    for request, index in fills:
        if not request.is_finished and index + 1 >= request.sampling.max_tokens:
            scheduler.finish(request)
            done += 1
    return done


def _check_trace(input_lens: Sequence[int], output_lens: Sequence[int], limits: ReplayLimits, source: str) -> None:
    if len(input_lens) != len(output_lens) or not input_lens:
        raise GraphbenchError(f"{source}: a trace needs as many output lengths as input lengths, and a request")
    total = sum(input_lens) + sum(output_lens)
    if total > MAX_REPLAY_TOKENS:
        raise GraphbenchError(f"{source}: {total} tokens to replay, more than {MAX_REPLAY_TOKENS}: give fewer requests")
    for i, (n_in, n_out) in enumerate(zip(input_lens, output_lens)):
        if n_in > limits.max_num_batched_tokens and not limits.enable_chunked_prefill:
            raise GraphbenchError(f"{source}: request {i}'s prompt of {n_in} tokens never fits a step of "
                                  f"{limits.max_num_batched_tokens} without chunked prefill")
        blocks = -(-(n_in + n_out) // limits.block_size)
        if limits.num_kv_blocks is not None and blocks > limits.num_kv_blocks:
            raise GraphbenchError(f"{source}: request {i} ({n_in} + {n_out} tokens) needs {blocks} KV blocks but "
                                  f"the cache holds {limits.num_kv_blocks}: raise --num-kv-blocks")


def arrival_steps(trace: RequestTrace) -> list[int] | None:
    """Each request at its recorded send time (without max_concurrency), else request i at i / request_rate
    seconds, in steps of the recorded median inter-token latency; None when the trace sends all at once or
    records no latencies."""
    if not trace.seconds_per_step:
        return None
    if recorded_arrivals(trace):
        latest, steps = 0, []
        for seconds in trace.arrival_s or ():  # in the recorded order: a send time a little early waits its turn
            latest = max(latest, math.floor(seconds / trace.seconds_per_step))
            steps.append(latest)
        return steps
    if trace.request_rate is None:
        return None
    return [math.floor(i / trace.request_rate / trace.seconds_per_step) for i in range(len(trace))]


def recorded_arrivals(trace: RequestTrace) -> bool:
    """Whether the trace's send times are its arrivals (recorded, and no client semaphore delayed them)."""
    return trace.arrival_s is not None and trace.max_concurrency is None and len(trace) > 1


def trace_distribution(traces: Sequence[RequestTrace], limits: ReplayLimits,
                       phase: str = "all") -> tuple[BatchSizeDistribution, list[str]]:
    """The summed step token counts of the traces replayed at the limits, and warnings (a rate that
    could not be modelled, failed requests left out)."""
    counts: Counter[int] = Counter()
    warnings: list[str] = []
    for trace in traces:
        arrivals = arrival_steps(trace)
        if trace.request_rate is not None and arrivals is None:
            warnings.append(f"{trace.source}: request_rate {trace.request_rate:g}/s ignored (no recorded "
                            "inter-token latencies to count it in steps): requests replayed as sent all at once")
        elif recorded_arrivals(trace) and arrivals is None and max(trace.arrival_s or (0.0,)) > 0:
            key = "arrival_s" if trace.tool == "request lengths" else "start_times"
            warnings.append(f"{trace.source}: {key} (sends over {max(trace.arrival_s or (0.0,)):g} s) ignored "
                            "(no recorded inter-token latencies to count them in steps): requests replayed as sent "
                            "all at once")
        if trace.num_failed:
            warnings.append(f"{trace.source}: {trace.num_failed} failed request(s) left out")
        counts += replay_steps(trace.input_lens, trace.output_lens, limits, concurrency=trace.max_concurrency,
                               arrival_steps=arrivals, source=trace.source, phase=phase)
    requests = sum(len(t) for t in traces)
    names = ", ".join(dict.fromkeys(t.source for t in traces))
    concurrency = sorted({t.max_concurrency for t in traces}, key=lambda c: (c is None, c or 0))
    shown = "/".join("unbounded" if c is None else str(c) for c in concurrency)
    steps = "" if phase == "all" else f"; {phase} steps"
    source = f"replay of {names} ({requests} requests, concurrency {shown}; {limits.text()}{steps})"
    if not counts:
        raise GraphbenchError(f"the replay of {names} has no {phase} steps")
    return BatchSizeDistribution(counts, source=source), warnings


MAX_TRACE_BYTES = 1 << 30  # read whole, so not past this


def replay_files(paths: Sequence[Path], limits: ReplayLimits,
                 phase: str = "all") -> tuple[BatchSizeDistribution, list[str]] | None:
    """The files, told apart by content, as request traces replayed into one distribution with warnings;
    None when none of them is a request trace; an error when only some are."""
    traces: list[RequestTrace] = []
    found, others = [], []
    for path in paths:
        text = None
        if path.is_file() and path.stat().st_size <= MAX_TRACE_BYTES:
            try:
                text = path.read_text(encoding="utf-8-sig")
            except (OSError, UnicodeDecodeError):
                text = None
        if text is not None and is_request_trace(text):
            traces += parse_request_trace(text, str(path))
            found.append(path)
        else:
            others.append(path)
    if not found:
        return None
    if others:
        raise GraphbenchError(f"request traces ({found[0]}) mixed with other files ({others[0]}): give one kind")
    return trace_distribution(traces, limits, phase)
