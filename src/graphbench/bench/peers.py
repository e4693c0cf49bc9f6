"""Peers in the same sweep: transformers' model on the same architecture and seeded weights.

hf-eager: `generate` with its dynamic cache. hf-compile: `generate` with its static cache, which
makes transformers compile the forward on CUDA. transformers has no continuous batching, so a
closed-loop workload of concurrency C runs as successive batches of C requests (left-padded);
a streamer timestamps every generated step, giving TTFT, TPOT, ITL and E2E like the engine's.
Open-loop workloads do not apply to a static batcher and are skipped (recorded as such).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from graphbench.bench.peer_models import build_hf_model
from graphbench.bench.prompts import workload_prompts
from graphbench.bench.environment import environment, machine_name, utc_now
from graphbench.bench.host_load import HostProbe
from graphbench.bench.metrics import request_metrics
from graphbench.bench.repeats import measure_repeats, workload_record
from graphbench.bench.workloads import Workload
from graphbench.config import load_arch
from graphbench.reports.store import write_result

# A peer's warm-up wave caps outputs at this many tokens: static batching runs each wave to its longest
# output, so a whole pass would cost as much as a repeat, and the shapes a static cache compiles for are
# set by the batch and the prompt, which the cap keeps.
WARM_UP_OUTPUT_TOKENS = 16


@dataclass
class _Timed:
    arrival_time: float
    output_len: int
    prompt_len: int
    token_times: list[float] = field(default_factory=list)
    first_token_time: float = 0.0
    finish_time: float = 0.0


class _StepClock:
    """A generate() streamer that records when each step's tokens come out (the first put is the prompt)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._prompt_seen = False

    def put(self, value: Any) -> None:
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        self.times.append(time.perf_counter())

    def end(self) -> None:
        pass


def _run_wave(model, prompts: list[list[int]], output_lens: list[int], static: bool,
              shape: tuple[int, int] | None = None) -> list[_Timed]:
    """One static batch: every request runs max(output_lens) steps (static batching's cost).
    shape (width, steps): pad the prompts to this width and size the static cache for this many steps,
    stopping after max(output_lens), so that every wave of a workload has the compiled forward's
    shapes (a new cache length would make torch.compile compile again, inside the measurement)."""
    import torch

    device = next(model.parameters()).device
    steps = max(output_lens)
    width, cache_steps = shape or (max(map(len, prompts)), steps)
    ids = torch.zeros(len(prompts), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):  # left padding
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    clock = _StepClock()
    extra = {"cache_implementation": "static"} if static else {}
    if cache_steps > steps:
        extra["stopping_criteria"] = _stop_after(width + steps)
    start = time.perf_counter()
    with torch.inference_mode():
        model.generate(ids.to(device), attention_mask=mask.to(device), max_new_tokens=cache_steps,
                       min_new_tokens=steps, do_sample=False, pad_token_id=0, streamer=clock, **extra)
    if device.type == "cuda":
        torch.cuda.synchronize()
    timed = []
    for p, n in zip(prompts, output_lens):
        t = _Timed(start, n, len(p), token_times=clock.times[:n])
        t.first_token_time, t.finish_time = t.token_times[0], t.token_times[-1]
        timed.append(t)
    return timed


def _stop_after(length: int):
    """A generate() stopping criterion: stop every row once the sequences are `length` tokens long."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    class StopAtLength(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            return torch.full((input_ids.shape[0],), input_ids.shape[1] >= length, dtype=torch.bool,
                              device=input_ids.device)

    return StoppingCriteriaList([StopAtLength()])


def run_peer_workload(model, workload: Workload, static: bool, vocab_size: int, seed_offset: int,
                      max_output_len: int | None = None, source: str = "") -> dict[str, Any]:
    """Run the workload in waves of `concurrency` (static batching); this repeat's metrics.
    max_output_len caps each request's output (the warm-up's shorter pass)."""
    import torch

    specs = workload.requests()
    prompts = workload_prompts(workload, vocab_size, seed_offset, source)  # source: the checkpoint (text prompts)
    cuda = next(model.parameters()).device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    probe = HostProbe()
    start = time.perf_counter()
    finished: list[_Timed] = []
    outputs = [s.capped_output_len(max_output_len) for s in specs]
    # static cache: one compiled shape for the workload's first call, warm-up and repeats alike
    shape = (max(workload.prompt_len.max(), *map(len, prompts)), max(workload.output_len.max(), *outputs)) \
        if static else None
    for i in range(0, len(specs), workload.concurrency):
        wave = slice(i, i + workload.concurrency)
        finished += _run_wave(model, prompts[wave], outputs[wave], static, shape)
    duration = time.perf_counter() - start
    out = sum(t.output_len for t in finished)
    result = {"output_tokens_per_s": out / duration, "total_tokens_per_s": (out + sum(t.prompt_len for t in finished)) / duration,
              "requests_per_s": len(finished) / duration, "duration_s": duration, "num_requests": len(finished),
              "num_steps": 0, "peak_memory_bytes": torch.cuda.max_memory_allocated() if cuda else None,
              **probe.record(duration)}
    result.update(request_metrics(finished))
    return result


def run_peer_point(system: str, model_name: str, dtype_name: str, device: str, workloads: list[Workload], repeats: int,
                   label: str, results_dir, seed: int = 0, progress=lambda message: None, target_repeat_s: float = 0.0,
                   sweep: dict | None = None):
    """Measure a transformers peer on the workloads and write its result file."""
    import torch

    from graphbench.runner.device import DTYPES, resolve_device, resolve_dtype

    device_obj = resolve_device(device)
    dtype = resolve_dtype(dtype_name, device_obj, model_name) if dtype_name == "auto" else DTYPES[dtype_name]
    arch = load_arch(model_name)
    progress("loading model")
    started = time.perf_counter()
    model, weights = build_hf_model(arch, dtype, device_obj.type, seed, checkpoint=model_name)
    load_s = time.perf_counter() - started
    static = system == "hf-compile"
    measured, first_call_s = [], 0.0
    for workload in workloads:
        if workload.kind != "closed":
            progress(f"{workload.name}: skipped (static batching has no open loop)")
            continue
        progress(f"{workload.name}: warm-up")
        t0 = time.perf_counter()
        first = Workload(kind="closed", concurrency=workload.concurrency, num_requests=workload.concurrency,
                         prompt_len=workload.prompt_len, output_len=workload.output_len, seed=workload.seed + 1,
                         prompt_kind=workload.prompt_kind)
        run_peer_workload(model, first, static, arch.vocab_size, 999, source=model_name)  # the first call (compiles)
        first_call_s = max(first_call_s, time.perf_counter() - t0)
        # then one pass with capped outputs, as the engine warms up
        run_peer_workload(model, workload, static, arch.vocab_size, 998, max_output_len=WARM_UP_OUTPUT_TOKENS,
                          source=model_name)
        as_measured, repeats_out, calibration = measure_repeats(
            lambda w, i, hf=model: run_peer_workload(hf, w, static, arch.vocab_size, i, source=model_name), workload, repeats,
            target_repeat_s, progress)
        measured.append(workload_record(as_measured, repeats_out, calibration))
    env = environment(device_obj.type)
    # Only what was measured: a peer's compile happens inside its first call, and it captures no graphs of
    # graphbench's kind, so capture time and graph memory are absent (a report shows "-"), not 0.
    startup = {"cold": True, "total_s": load_s, "load_s": load_s, "first_call_s": first_call_s,
               "num_graphs": {}, "cudagraph_mode": {}, "capture_sizes": []}
    result = {"label": label, "system": system, "status": "ok", "failure": None, "created_utc": utc_now(),
              "environment": env, "model": model_name,
              "config": {"model": {"model": model_name, "dtype": str(dtype).removeprefix("torch."), "device": device_obj.type,
                                   "load_format": weights}},
              "config_hash": None, "sweep": sweep or {}, "startup": startup, "startups": [startup], "workloads": measured}
    del model
    if device_obj.type == "cuda":
        torch.cuda.empty_cache()
    return write_result(results_dir, machine_name(env), label, result)
