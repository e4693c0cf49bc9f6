"""Where a decode step's time goes: host phases vs GPU time of the forward, and the top kernels.

    python benchmarks/profile_step.py --model llama-3.2-1b --level 2 --batches 1,64 --out profile.json

For each batch size, after prefill and warm-up, times (host wall, median of N synchronous steps):
schedule, launch (static buffers + uploads, forward, sampling, all queued), the wait for the
tokens, taking them in; the GPU time of the forward alone and of lm_head + greedy sampling
(CUDA events around back-to-back runs); whole engine steps, asynchronous and synchronous. Then one step under torch.profiler: the kernels
with the most CUDA time. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def device_ms(fn, repeats: int) -> float:
    """Mean device time of back-to-back calls (CUDA events; wall time on the CPU)."""
    import torch

    if not torch.cuda.is_available():
        t0 = time.perf_counter()
        for _ in range(repeats):
            fn()
        return (time.perf_counter() - t0) * 1e3 / repeats
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / repeats


def profile_batch(engine, batch: int, prompt_len: int, num_steps: int, host_profile: str | None = None) -> dict:
    import torch

    from graphbench.bench.peer_models import random_prompts
    from graphbench.runner.request import SamplingParams

    prompts = random_prompts(batch, prompt_len, engine.arch.vocab_size, seed=batch)
    params = SamplingParams(max_tokens=5 * num_steps + 30)
    requests = [engine.add_request(p, params) for p in prompts]
    while any(not r.output_token_ids for r in requests):
        engine.step()
    for _ in range(8):
        engine.step()
    runner = engine.runner
    engine.drain()
    # host phases of synchronous steps: schedule, launch (inputs + forward + sampling queued), wait
    phases = {k: [] for k in ("schedule", "launch", "wait", "take_tokens", "step")}

    def synchronous_step(record: bool):
        t0 = time.perf_counter()
        sched = engine.scheduler.schedule()
        t1 = time.perf_counter()
        launched = runner.launch(sched)
        t2 = time.perf_counter()
        engine.scheduler.update(sched)
        for row, request in enumerate(sched.requests):
            request.output_token_ids.append(-1)
            request.pending_row = row
            launched.fills.append((request, row, len(request.output_token_ids) - 1))
        launched.result()
        t3 = time.perf_counter()
        engine._take_tokens(launched)
        t4 = time.perf_counter()
        if record:
            for key, (a, b) in zip(phases, [(t0, t1), (t1, t2), (t2, t3), (t3, t4), (t0, t4)]):
                phases[key].append((b - a) * 1e3)
        return sched

    for _ in range(num_steps):
        sched = synchronous_step(record=True)
    launch_parts = time_launch_parts(runner, lambda: synchronous_step(record=False), num_steps)
    if host_profile:  # more synchronous steps, their host side under cProfile (not in the phases above)
        import cProfile

        from cprofile_report import write_cprofile

        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(num_steps):
            synchronous_step(record=False)
        profiler.disable()
        write_cprofile(profiler, f"{host_profile}-batch{batch}")
    # the next batch, scheduled (its blocks allocated) and not run: the last one's tokens are computed now
    sched = engine.scheduler.schedule()
    mode, padded = runner.dispatcher.dispatch(sched.descriptor)
    num_padded = padded.num_tokens if mode.value != "NONE" else sched.num_tokens
    # GPU time of the forward alone (a uniform decode recording with lm_head and the greedy pick: runner's
    # _call_forward): back-to-back forwards of that batch, CUDA events
    with torch.inference_mode():
        meta = runner.inputs.prepare(sched, num_padded)
        meta.uniform_decode = runner._uniform_decode(padded if mode.value == "FULL" else sched.descriptor)
        for _ in range(5):
            hidden = runner.forward(num_padded, meta, mode, padded)
        forward_gpu_ms = device_ms(lambda: runner.forward(num_padded, meta, mode, padded), num_steps)
        from graphbench.runner.sampler import greedy

        logits_gpu_ms = device_ms(
            lambda: greedy(engine.model.lm_head(hidden[runner.inputs.logits_indices[:batch]])), num_steps)
    sync_steps = []
    engine.config.scheduler.async_scheduling = False
    for _ in range(num_steps):
        t0 = time.perf_counter()
        engine.step()
        sync_steps.append((time.perf_counter() - t0) * 1e3)
    engine.config.scheduler.async_scheduling = True
    # full engine steps, timed as benchmarks/decode.py does
    steps = []
    for _ in range(num_steps):
        t0 = time.perf_counter()
        engine.step()
        steps.append((time.perf_counter() - t0) * 1e3)
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        for _ in range(3):
            engine.step()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    table = prof.key_averages().table(sort_by="cuda_time_total" if torch.cuda.is_available() else "cpu_time_total", row_limit=25)
    timeline = device_timeline(prof, num_steps=3)
    engine.drain()
    for r in requests:
        if not r.is_finished:
            engine.scheduler.finish(r)
    return {
        "batch": batch, "runtime_mode": mode.value, "padded": num_padded,
        "phases_ms": {k: statistics.median(v) for k, v in phases.items()}, "launch_parts_ms": launch_parts,
        "forward_gpu_ms": forward_gpu_ms, "logits_sample_gpu_ms": logits_gpu_ms,
        "engine_step_ms": statistics.median(steps), "engine_step_sync_ms": statistics.median(sync_steps),
        "profile_table": table, "timeline": timeline,
    }


def time_launch_parts(runner, step, num_steps: int) -> dict[str, float]:
    """Host time of the parts of ModelRunner.launch in synchronous steps (median ms a step): each part's
    method wrapped in a timer on this runner only; "other" is the rest of launch (dispatch, sampling's
    bookkeeping, the ids' copies and event)."""
    import graphbench.runner.model_runner as model_runner_module

    spent: dict[str, float] = {}

    def timed(name, fn):
        def call(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - started
        return call

    originals = {"prepare": (runner.inputs, "prepare"), "gather_pending": (runner.inputs, "gather_pending"),
                 "forward": (runner, "forward"), "compute_logits": (runner.model, "compute_logits"),
                 "greedy": (model_runner_module, "greedy"), "launch": (runner, "launch")}
    saved = {name: getattr(owner, attr) for name, (owner, attr) in originals.items()}
    samples: dict[str, list[float]] = {name: [] for name in originals}
    try:
        for name, (owner, attr) in originals.items():
            setattr(owner, attr, timed(name, saved[name]))
        for _ in range(num_steps):
            spent.clear()
            step()
            for name in samples:
                samples[name].append(spent.get(name, 0.0) * 1e3)
    finally:  # the module's function back; the instances' wrappers removed (their class's method shows again)
        for name, (owner, attr) in originals.items():
            if owner is model_runner_module:
                setattr(owner, attr, saved[name])
            else:
                delattr(owner, attr)
    parts = {name: statistics.median(v) for name, v in samples.items()}
    parts["other"] = parts["launch"] - sum(v for k, v in parts.items() if k != "launch")
    return parts


def device_timeline(prof, num_steps: int) -> dict | None:
    """The device's side of the profiled engine steps: span from the first to the last kernel or copy,
    busy time (the union of their intervals), idle time, the copies, and the largest idle gaps with the
    operations either side (where a step waits on something other than the recorded forward)."""
    import torch

    ops = sorted(((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                  if e.device_type == torch.autograd.DeviceType.CUDA), key=lambda op: op[0])
    if not ops:
        return None
    busy, gaps, covered_to, last = 0.0, [], ops[0][0], ""
    for start, end, name in ops:
        if start > covered_to:
            gaps.append((start - covered_to, last, name))
        busy += max(0.0, end - max(start, covered_to))
        if end > covered_to:
            covered_to, last = end, name
    span = covered_to - ops[0][0]
    copies = [op for op in ops if "memcpy" in op[2].lower() or "memset" in op[2].lower()]
    gaps.sort(reverse=True)
    return {"steps": num_steps, "span_us": span, "busy_us": busy, "idle_us": span - busy, "num_ops": len(ops),
            "num_copies": len(copies), "copies_us": sum(end - start for start, end, _ in copies),
            "largest_gaps": [{"us": round(g, 1), "after": a[:70], "before": b[:70]} for g, a, b in gaps[:12]]}


def _override(text: str) -> tuple[str, object]:
    """--set key=value: the value as JSON where it parses, else the string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise SystemExit(f"--set {text!r}: expected key=value")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-3.2-1b")
    p.add_argument("--level", type=int, default=2)
    p.add_argument("--batches", default="1,64")
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--out", default=None)
    p.add_argument("--host-profile", default=None, metavar="PREFIX",
                   help="cProfile the synchronous steps' host side: PREFIX-batchN (pstats) and PREFIX-batchN.txt")
    p.add_argument("--set", action="append", default=[],
                   help="extra config override key=value (the value as JSON where it parses: 2048, true, [1, 2]; else a string)")
    args = p.parse_args()
    from preflight import check_model, context_for

    check_model(args.model, "auto")
    from graphbench.config import load_engine_config
    from graphbench.runner.engine import Engine

    batches = [int(b) for b in args.batches.split(",")]
    max_len = context_for(args.model, 4096)
    engine = Engine(load_engine_config(overrides={
        "model.model": args.model, "optimization_level": args.level, "scheduler.max_num_seqs": max(batches),
        "scheduler.max_num_batched_tokens": 8192, "scheduler.max_model_len": max_len,
        **dict(_override(o) for o in args.set)}))
    results = [profile_batch(engine, b, args.prompt_len, args.steps, args.host_profile) for b in batches]
    for r in results:
        ph = r["phases_ms"]
        print(f"\nbatch {r['batch']} ({r['runtime_mode']}, padded {r['padded']}): engine step {r['engine_step_ms']:.3f} ms"
              f" (synchronous {r['engine_step_sync_ms']:.3f} ms);"
              f" forward GPU {r['forward_gpu_ms']:.3f} ms (a uniform FULL recording: with the inputs' unpack, lm_head"
              f" and the greedy pick), eager lm_head + argmax {r['logits_sample_gpu_ms']:.3f} ms")
        print("  host phases (ms): " + ", ".join(f"{k} {v:.3f}" for k, v in ph.items()))
        print("  launch's parts (ms): " + ", ".join(f"{k} {v:.3f}" for k, v in r["launch_parts_ms"].items()))
        tl = r["timeline"]
        if tl:
            n = tl["steps"]
            print(f"  device timeline over {n} asynchronous steps, per step: span {tl['span_us'] / n:.1f} us, busy "
                  f"{tl['busy_us'] / n:.1f}, idle {tl['idle_us'] / n:.1f}; {tl['num_ops'] / n:.0f} operations, of which "
                  f"{tl['num_copies'] / n:.0f} copies/memsets ({tl['copies_us'] / n:.1f} us)")
            for g in tl["largest_gaps"]:
                print(f"    idle {g['us']:7.1f} us  after {g['after']}  before {g['before']}")
        print(r["profile_table"])
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    from preflight import one_line_errors

    with one_line_errors():
        main()
