"""Drives a workload through graphbench's engine and measures one repeat."""

from __future__ import annotations

import copy
import functools
import gc
import time
from collections import deque
from typing import Any

from graphbench.bench.host_load import HostProbe
from graphbench.bench.metrics import request_metrics, step_metrics
from graphbench.bench.prompts import workload_prompts
from graphbench.bench.workloads import Workload


def run_engine_workload(engine, workload: Workload, seed_offset: int = 0,
                        max_output_len: int | None = None) -> dict[str, Any]:
    """Run every request of the workload to completion; return this repeat's metrics.
    max_output_len caps each request's output (the warm-up's shorter pass)."""
    import torch

    specs = workload.requests()
    prompts = workload_prompts(workload, engine.arch.vocab_size, seed_offset, engine.config.model.model)
    speculative = getattr(engine, "speculative", None)
    if speculative is not None and speculative.method == "replay":
        from graphbench.runner.speculative.decoding import make_replay_reference

        make_replay_reference(engine, prompts, [s.capped_output_len(max_output_len) for s in specs])
    stats_before = copy.copy(speculative.stats) if speculative is not None else None
    cuda = engine.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        allocator_before = _allocator_calls()
    first_record = len(engine.records)
    # real text ends where the model ends it (its eos): its tokens are read here, before the clock starts
    stops = checkpoint_stops(engine.config.model.model) if workload.prompt_kind == "text" else ()
    pending = deque(zip(specs, prompts))
    finished: list[Any] = []
    # no collector pauses inside a repeat (they land on random steps and spread the repeats);
    # what a repeat leaves is collected before the next one
    gc.collect()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        probe = HostProbe()
        start = time.perf_counter()
        duration = _drive(engine, workload, pending, finished, start, max_output_len, stops)
        host = probe.record(duration)
    finally:
        if gc_was_enabled:
            gc.enable()
    output_tokens = sum(len(r.output_token_ids) for r in finished)
    prompt_tokens = sum(len(r.prompt_token_ids) for r in finished)
    result: dict[str, Any] = {
        "output_tokens_per_s": output_tokens / duration,
        "total_tokens_per_s": (output_tokens + prompt_tokens) / duration,
        "requests_per_s": len(finished) / duration,
        "duration_s": duration,
        "num_requests": len(finished),
        # to tell a slow repeat's cause: the host's load, this process's CPU share and its waits for a CPU
        **host,
    }
    if speculative is not None:
        spec = speculative.stats.minus(stats_before).to_dict()
        result.update({"spec_acceptance_rate": spec["acceptance_rate"],
                       "spec_mean_accepted_tokens": spec["mean_accepted_tokens"],
                       "spec_drafted_tokens": spec["num_drafted"], "spec_accepted_tokens": spec["num_accepted"],
                       "spec_wasted_tokens": spec["num_wasted"], "spec_filled_tokens": spec["num_filled"],
                       "spec_proposed_tokens": spec["num_proposed"]})
    result.update(request_metrics(finished))
    result.update(step_metrics(engine.records[first_record:]))
    result["peak_memory_bytes"] = torch.cuda.max_memory_allocated() if cuda else None
    if cuda:  # a repeat that had to cudaMalloc (or free and retry) stalls in those steps
        result.update({name: after - allocator_before[name] for name, after in _allocator_calls().items()})
    del engine.records[first_record:]  # keep memory flat over long sweeps
    return result


@functools.lru_cache(maxsize=4)
def checkpoint_stops(model: str) -> tuple[int, ...]:
    """The checkpoint's eos tokens, its tokenizer's included (read once a process: loading a tokenizer
    takes 0.2-0.9 s, which a repeat timed it with had counted)."""
    from graphbench.checkpoints.text import load_text

    return load_text(model).stop_token_ids


def _allocator_calls() -> dict[str, int]:
    """The caching allocator's device calls so far: cudaMalloc calls, cudaFree calls, and retries (a
    cudaMalloc that failed, so cached blocks were freed, after a device-wide sync, and it was tried again)."""
    import torch

    stats = torch.cuda.memory_stats()
    return {"device_mallocs": stats.get("num_device_alloc", 0), "device_frees": stats.get("num_device_free", 0),
            "allocator_retries": stats.get("num_alloc_retries", 0)}


def _drive(engine, workload: Workload, pending: deque, finished: list, start: float,
           max_output_len: int | None = None, stops: tuple[int, ...] = ()) -> float:
    """Feed requests (closed loop: keep `concurrency` in flight; open loop: at their arrival times) and
    step until all are done; return the seconds taken. stops: the tokens a request ends at (text prompts)."""
    from graphbench.runner.request import SamplingParams

    def params(spec) -> SamplingParams:
        return SamplingParams(max_tokens=spec.capped_output_len(max_output_len), ignore_eos=not stops,
                              stop_token_ids=stops)

    names = list(getattr(engine, "lora_slots", {}) or {})
    adapters = [workload.adapter_for(i, names) for i in range(len(pending))]  # in request order
    added = 0

    def add(spec, prompt):
        nonlocal added
        request = engine.add_request(prompt, params(spec), adapters[added])
        added += 1
        return request

    in_flight = 0
    while pending or engine.has_unfinished():
        now = time.perf_counter()
        if workload.kind == "closed":
            while pending and in_flight < workload.concurrency:
                spec, prompt = pending.popleft()
                add(spec, prompt)
                in_flight += 1
        else:
            while pending and start + pending[0][0].arrival_s <= now:
                spec, prompt = pending.popleft()
                request = add(spec, prompt)
                request.arrival_time = start + spec.arrival_s  # latency counts from the scheduled arrival
            if not engine.has_unfinished() and pending:
                time.sleep(max(0.0, start + pending[0][0].arrival_s - time.perf_counter()))
                continue
        done = engine.step()
        finished += done
        in_flight -= len(done)
    return time.perf_counter() - start


def warm_up(engine, workload: Workload) -> None:
    """One whole pass of the workload (other prompts, the same prompt and output lengths and concurrency),
    outside the measurement: every step size the repeats meet has run once, with whatever its first run
    costs (new allocations, library heuristics, kernel variants). A pass with outputs capped at 16 tokens
    left the first repeat at concurrency 64 2-4x slower than the others in every point of an H200 sweep
    (2026-12-04): its long tail of decode batches of every size had not run."""
    run_engine_workload(engine, workload, seed_offset=999)
