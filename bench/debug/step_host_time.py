"""Host time vs device time of every step of a closed-loop wave (issue 5's spread: which side is slow?).

    python bench/debug/step_host_time.py --model llama-3.2-1b --level 2 --concurrency 64 --waves 3

Each step runs synchronously after a device sync: the host's launch (schedule + inputs + forward +
sampling queued) is timed on the host clock, the queued work with CUDA events around it. A step whose
host launch is longer than its device time is host-bound: in the asynchronous engine its wall time
follows the CPU, not the GPU. One prefill step also runs under torch.cuda.set_sync_debug_mode("warn"):
any synchronising call inside a launch (which would make launch time include device time) is printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings


def run_wave(engine, concurrency: int, prompt_len: int, output_len: int, seed: int,
             busy_cycles: int = 0) -> list[dict]:
    """One wave of `concurrency` requests, each step timed on both clocks; a list of step records.

    busy_cycles > 0 queues a GPU spin of that many cycles before each launch: a launch that waits for
    the device anywhere inside then takes that long too on the host clock."""
    import torch

    from graphbench.bench.decode_timing import random_prompts
    from graphbench.runner.request import SamplingParams

    params = SamplingParams(max_tokens=output_len, ignore_eos=True)
    for prompt in random_prompts(concurrency, prompt_len, engine.arch.vocab_size, seed=seed):
        engine.add_request(prompt, params)
    runner, steps, cuda = engine.runner, [], torch.cuda.is_available()
    start, end = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) if cuda else (None, None)
    while engine.has_unfinished():
        if cuda:
            torch.cuda.synchronize()
        if busy_cycles:
            torch.cuda._sleep(busy_cycles)
        t0 = time.perf_counter()
        batch = engine.scheduler.schedule()
        if cuda:
            start.record()
        launched = runner.launch(batch)
        if cuda:
            end.record()
        t1 = time.perf_counter()
        take_in(engine, batch, launched)
        t2 = time.perf_counter()
        # on the CPU (smoke runs) the work is done inside the launch: "device" is launch + wait
        device_ms = start.elapsed_time(end) if cuda else (t2 - t0) * 1e3
        steps.append({"num_tokens": batch.num_tokens, "mode": launched.runtime_mode.value,
                      "host_ms": (t1 - t0) * 1e3, "device_ms": device_ms})
    return steps


def take_in(engine, batch, launched) -> None:
    """What Engine.step does after a launch, synchronously: placeholders, then the sampled tokens."""
    engine.scheduler.update(batch)
    for row, request in enumerate(batch.requests):
        if request.num_computed_tokens >= request.num_tokens:
            request.output_token_ids.append(-1)
            request.pending_row = row
            launched.fills.append((request, row, len(request.output_token_ids) - 1))
    launched.result()
    engine._take_tokens(launched)


def find_syncs(engine, concurrency: int, prompt_len: int) -> list[str]:
    """Warnings of synchronising calls during one prefill step's launch."""
    import torch

    from graphbench.bench.decode_timing import random_prompts
    from graphbench.runner.request import SamplingParams

    for prompt in random_prompts(concurrency, prompt_len, engine.arch.vocab_size, seed=99):
        engine.add_request(prompt, SamplingParams(max_tokens=2, ignore_eos=True))
    batch = engine.scheduler.schedule()
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if cuda:
            torch.cuda.set_sync_debug_mode("warn")
        try:
            launched = engine.runner.launch(batch)
        finally:
            if cuda:
                torch.cuda.set_sync_debug_mode(0)
    take_in(engine, batch, launched)
    while engine.has_unfinished():  # finish them so the next measurement starts clean
        engine.step()
    engine.drain()
    return [f"{w.filename}:{w.lineno}: {str(w.message)[:200]}" for w in caught]


def spin_cycles(ms: float) -> int:
    """GPU clock cycles that torch.cuda._sleep spins for about `ms` milliseconds (measured once)."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10**7)
    end.record()
    end.synchronize()
    return int(10**7 * ms / start.elapsed_time(end))


def summarise(steps: list[dict]) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for s in steps:
        size = "prefill >= 1024" if s["num_tokens"] >= 1024 else ("decode" if s["mode"] == "FULL" else "other")
        groups.setdefault((s["mode"], size), []).append(s)
    rows = []
    for (mode, size), group in sorted(groups.items()):
        host = [s["host_ms"] for s in group]
        dev = [s["device_ms"] for s in group]
        rows.append({"mode": mode, "steps": size, "n": len(group), "host_ms_p50": statistics.median(host),
                     "host_ms_max": max(host), "device_ms_p50": statistics.median(dev), "device_ms_max": max(dev),
                     "host_bound": sum(h > d for h, d in zip(host, dev))})
    return rows


def print_summary(steps: list[dict]) -> None:
    for row in summarise(steps):
        print("  " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-3.2-1b")
    p.add_argument("--level", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=32)
    p.add_argument("--waves", type=int, default=3)
    p.add_argument("--busy-ms", type=float, default=0.0,
                   help="also run a wave with the GPU kept busy this long before each launch (finds hidden syncs)")
    p.add_argument("--cprofile", action="store_true", help="also profile the host side of one more wave (cProfile)")
    p.add_argument("--sample", type=int, default=0, metavar="WAVES",
                   help="also sample the host's stack every 0.5 ms during the launches of this many waves")
    p.add_argument("--sample-mode", default="NONE", choices=("NONE", "PIECEWISE", "FULL"),
                   help="which steps' launches --sample samples (default NONE: the eager ones)")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    import torch

    from graphbench.config import load_engine_config
    from graphbench.runner.engine import Engine

    engine = Engine(load_engine_config(overrides={"model.model": args.model, "optimization_level": args.level}))
    run_wave(engine, args.concurrency, args.prompt_len, args.output_len, seed=0)  # warm-up
    syncs = find_syncs(engine, args.concurrency, args.prompt_len)
    waves = [run_wave(engine, args.concurrency, args.prompt_len, args.output_len, seed=w + 1) for w in range(args.waves)]
    print(f"synchronising calls in one prefill launch: {len(syncs)}")
    for line in syncs[:10]:
        print("  " + line)
    for w, steps in enumerate(waves):
        print(f"wave {w}: {len(steps)} steps, host total {sum(s['host_ms'] for s in steps):.1f} ms, "
              f"device total {sum(s['device_ms'] for s in steps):.1f} ms")
        print_summary(steps)
    if args.busy_ms and torch.cuda.is_available():
        cycles = spin_cycles(args.busy_ms)
        steps = run_wave(engine, args.concurrency, args.prompt_len, args.output_len, seed=500, busy_cycles=cycles)
        print(f"with the GPU busy {args.busy_ms:.0f} ms before each launch (a launch that syncs takes that long):")
        print_summary(steps)
        waves.append(steps)
    if args.cprofile:
        print_host_profile(engine, args)
    if args.sample:
        print_host_samples(engine, args)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"syncs": syncs, "waves": waves}, f, indent=1)


def print_host_profile(engine, args) -> None:
    """cProfile of the launches of one more wave, split by the kind of step (prefill, mixed, decode)."""
    import cProfile
    import io
    import pstats

    profiles = {"NONE": cProfile.Profile(), "PIECEWISE": cProfile.Profile(), "FULL": cProfile.Profile()}
    runner = engine.runner
    launch = runner.launch

    def profiled_launch(batch):
        mode, _ = runner.dispatcher.dispatch(batch.descriptor)
        prof = profiles[mode.value]
        prof.enable()
        try:
            return launch(batch)
        finally:
            prof.disable()

    runner.launch = profiled_launch
    try:
        run_wave(engine, args.concurrency, args.prompt_len, args.output_len, seed=1000)
    finally:
        runner.launch = launch
    for mode, prof in profiles.items():
        text = io.StringIO()
        stats = pstats.Stats(prof, stream=text)
        if not stats.total_calls:
            continue
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumulative").print_stats(30)
        print(f"==== host profile of {mode} launches (by own time, then cumulative) ====")
        print(text.getvalue())



def print_host_samples(engine, args) -> None:
    """Where the launches' host time goes in steps of mode args.sample_mode, by sampling the main
    thread's stack (its proportions hold where cProfile's do not: bench/debug/stack_sampler.py)."""
    import os
    import sys
    import threading

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from stack_sampler import StackSampler

    runner = engine.runner
    launch = runner.launch
    sampler = StackSampler(interval_s=0.0005, threads={threading.main_thread().ident})

    def sampled_launch(batch):
        mode, _ = runner.dispatcher.dispatch(batch.descriptor)
        if mode.value != args.sample_mode:
            return launch(batch)
        sampler.active.set()
        try:
            return launch(batch)
        finally:
            sampler.active.clear()

    runner.launch = sampled_launch
    sampler.start()
    try:
        for wave in range(args.sample):
            run_wave(engine, args.concurrency, args.prompt_len, args.output_len, seed=2000 + wave)
    finally:
        sampler.stop()
        runner.launch = launch
    print(f"==== host stack samples of the {args.sample_mode} launches of {args.sample} waves ====")
    print(sampler.report(top=30))


if __name__ == "__main__":
    main()
