"""Measure the step-time curve: a pure-decode step at every batch size, as the engine runs it.

The engine is started with a ladder of every size (exact FULL recordings, no padding). Its max_num_seqs
requests are prefilled once with seeded random prompts; each size n then times the step of the first n
of them (inputs, the recording's replay, logits and greedy sampling) back to back, with CUDA events
around each step after a warm-up, the last token of every request redrawn each step (never the same
ids twice, never zeros). The requests do not advance: each step rewrites the same KV slot, so every
size sees the same context. Steps are launched without waiting, as asynchronous scheduling runs them:
the host prepares step i+1 while the device runs step i. `replay_batch_sizes` times a sequence of
sizes through whatever ladder the engine has (padding included): what a ladder costs on that traffic.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from graphbench.errors import GraphbenchError

DEFAULT_CONTEXT = 120  # tokens of context per request (not a block multiple: the next slot is allocated)


class DecodePool:
    """max_num_seqs prefilled requests and the batches of their first n, for timing pure-decode steps;
    adapters: loaded LoRA adapters' names, which the requests take in turn (every request on one)."""

    def __init__(self, engine, num_requests: int, context: int = DEFAULT_CONTEXT, seed: int = 0,
                 adapters: Sequence[str] = ()) -> None:
        from graphbench.bench.peer_models import random_prompts
        from graphbench.runner.request import SamplingParams

        if num_requests > engine.config.scheduler.max_num_seqs:
            raise GraphbenchError(f"{num_requests} requests need --max-num-seqs >= {num_requests}")
        self.engine, self.rng = engine, random.Random(seed)
        budget = engine.max_model_len - context
        if budget < 2:
            raise GraphbenchError(f"a context of {context} tokens leaves no room under max_model_len {engine.max_model_len}")
        params = SamplingParams(max_tokens=budget)
        prompts = random_prompts(num_requests, context, engine.arch.vocab_size, seed)
        self.requests = [engine.add_request(p, params, adapters[i % len(adapters)] if adapters else None)
                         for i, p in enumerate(prompts)]
        block = engine.config.cache.block_size
        # prefill, then decode until every request's next slot lies in a block it holds (the timed
        # steps write that slot again and again without asking the scheduler for a block). Chunked
        # prefill finishes some prompts steps before others, so contexts differ by those steps.
        for _ in range(64 + 4 * block + num_requests * context // 256):
            engine.drain()
            if all(r.output_token_ids and len(r.block_ids) * block > r.num_computed_tokens for r in self.requests):
                break
            engine.step()
        else:
            raise GraphbenchError("the prefilled requests never all stood inside their last block")
        self.contexts = sorted({r.num_computed_tokens for r in self.requests})

    def batch(self, n: int):
        """The scheduled batch of the first n requests, one decode token each, with fresh last tokens."""
        from graphbench.runner.scheduler import BatchDescriptor, ScheduledBatch

        vocab = self.engine.arch.vocab_size
        chosen = self.requests[:n]
        for r in chosen:
            r.output_token_ids[-1] = self.rng.randrange(1, vocab)
        # (the scheduler's rule: a batch runs the LoRA kernels when a request of it has an adapter)
        has_lora = self.engine.scheduler.lora == "always" or any(r.lora_slot for r in chosen)
        return ScheduledBatch(chosen, [1] * n, BatchDescriptor(n, n, uniform=True, has_lora=has_lora))


def _time_steps(engine, make_batch: Callable[[int], Any], sizes: Sequence[int]) -> tuple[list[float], list[str], list[int]]:
    """Each step's device time (ms, CUDA events), runtime mode and padded size, launched back to back."""
    import torch

    runner = engine.runner
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in sizes]
    modes, padded, last = [], [], None
    for n, (start, end) in zip(sizes, events):
        batch = make_batch(n)
        start.record()
        last = runner.launch(batch)
        end.record()
        modes.append(last.runtime_mode.name)
        padded.append(last.padded_tokens)
    last.result()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in events], modes, padded


def measure_sizes(engine, pool: DecodePool, sizes: Sequence[int], warmup: int, timed: int,
                  progress: Callable[[int, int], None] | None = None) -> dict[int, dict[str, Any]]:
    """Median, p10, p90 step ms per size, with the mode each size ran in."""
    out = {}
    for i, n in enumerate(sizes):
        _time_steps(engine, pool.batch, [n] * warmup)
        ms, modes, padded = _time_steps(engine, pool.batch, [n] * timed)
        ms.sort()
        out[n] = {"median_ms": statistics.median(ms), "p10_ms": ms[len(ms) // 10],
                  "p90_ms": ms[(9 * len(ms)) // 10], "modes": sorted(set(modes)), "padded": max(padded)}
        if progress is not None:
            progress(i + 1, len(sizes))
    return out


def replay_batch_sizes(engine, pool: DecodePool, sequence: Sequence[int], warmup: int = 50) -> dict[str, Any]:
    """Time a sequence of pure-decode batch sizes through the engine's own ladder (padding included)."""
    _time_steps(engine, pool.batch, list(sequence[:warmup]))
    started = time.perf_counter()
    ms, modes, padded = _time_steps(engine, pool.batch, list(sequence))
    wall = time.perf_counter() - started
    counts: dict[str, int] = {}
    for m in modes:
        counts[m] = counts.get(m, 0) + 1
    return {"mean_step_ms": statistics.fmean(ms), "median_step_ms": statistics.median(ms),
            "wall_ms_per_step": 1e3 * wall / len(sequence), "num_steps": len(sequence), "runtime_modes": counts,
            "padded_tokens": sum(padded), "real_tokens": sum(sequence)}


def capture_by_size(engine, mode: str = "FULL") -> tuple[dict[int, float], dict[int, int]]:
    """Seconds and free-memory bytes of each size's recording in the engine's capture log."""
    seconds, memory = {}, {}
    for row_mode, size, s, b in engine.report.capture_log:
        if row_mode == mode:
            seconds[size], memory[size] = s, b
    return seconds, memory


def eager_sizes(max_size: int, every: int) -> list[int]:
    """1, every, 2*every, ... and max_size: where the eager curve is measured (0: nowhere)."""
    if every <= 0:
        return []
    return sorted({1, max_size, *range(every, max_size + 1, every)})


def derived_config(config, changes: dict[str, Any]):
    """A copy of an (unresolved) EngineConfig with {'section.key': value} changes."""
    from graphbench.config.engine_config import config_from_dict, set_dotted

    data = config.to_dict()
    for dotted, value in changes.items():
        set_dotted(data, dotted, value)
    return config_from_dict(data)


def measure_step_curve(config, max_size: int, *, eager_every: int = 0, context: int = DEFAULT_CONTEXT,
                       warmup: int = 5, timed: int = 25, progress: Callable[[str, int, int], None] | None = None):
    """The curve 1..max_size of an engine config (its model and -O level; its ladder and mode are replaced)."""
    import torch

    from graphbench.bench.environment import environment, utc_now
    from graphbench.ladders.step_curve import StepCurve
    from graphbench.runner.engine import Engine

    if not torch.cuda.is_available():
        raise GraphbenchError("the step-time curve times CUDA-graph replays and needs a GPU (none is visible)")
    started = time.perf_counter()
    sizes = list(range(1, max_size + 1))
    base = {"scheduler.max_num_seqs": max_size}
    engine = Engine(derived_config(config, dict(base, **{
        "compilation.cudagraph_mode": "FULL_DECODE_ONLY", "compilation.cudagraph_capture_sizes": sizes,
        "compilation.max_cudagraph_capture_size": max_size})))
    try:
        report = engine.report
        pool = DecodePool(engine, max_size, context)
        step = (lambda i, n: progress("graphs", i, n)) if progress else None
        graph = measure_sizes(engine, pool, sizes, warmup, timed, step)
        capture_s, capture_bytes = capture_by_size(engine)
        level, env = engine.config.optimization_level, environment("cuda")
        startup = {"capture_s": report.capture_seconds, "graph_memory_bytes": report.graph_memory_bytes,
                   "total_s": report.total_seconds}
    finally:
        engine.close()
    not_full = [n for n, row in graph.items() if row["modes"] != ["FULL"] or row["padded"] != n]
    if not_full:
        raise GraphbenchError(f"sizes {not_full[:5]} did not replay their own FULL recording")
    eager: dict[int, dict[str, Any]] = {}
    if eager_every > 0:
        engine = Engine(derived_config(config, dict(base, **{"compilation.cudagraph_mode": "NONE"})))
        try:
            step = (lambda i, n: progress("eager", i, n)) if progress else None
            eager = measure_sizes(engine, DecodePool(engine, max_size, context), eager_sizes(max_size, eager_every),
                                  warmup, timed, step)
        finally:
            engine.close()
    meta = {"model": config.model.model, "optimization_level": level, "cudagraph_mode": "FULL_DECODE_ONLY",
            "context_tokens": context, "context_range": [pool.contexts[0], pool.contexts[-1]], "warmup_steps": warmup, "timed_steps": timed, "date": utc_now(),
            "environment": env, "startup": startup, "wall_s": time.perf_counter() - started,
            "spread": {str(n): [row["p10_ms"], row["p90_ms"]] for n, row in graph.items()}}
    return StepCurve({n: row["median_ms"] for n, row in graph.items()},
                     {n: row["median_ms"] for n, row in eager.items()}, capture_s, capture_bytes, meta)
