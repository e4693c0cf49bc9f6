"""Host time of a decode step's bookkeeping, without a GPU: the scheduler, the step inputs, taking the tokens.

    python benchmarks/host_step.py --batches 1,64,256 --steps 300

An engine (tiny-llama on the CPU) whose runner's launch does only what the host does around the forward:
the step inputs (`StepInputs.prepare`: by default the GPU's packed upload, its packet copied on the CPU and
its kernel left out; `--copies`: a copy per buffer) and an in-flight step with placeholder tokens. Each
engine.step() is then the scheduler, that, the engine's update of every request and taking the tokens:
the Python a decode step costs the host whatever the GPU does (at batch 64 on an H200 the host's step is
about the GPU's: benchmarks/RESULTS.md, 2026-12-02). Medians per phase, in microseconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def measure(batch: int, steps: int, packed: bool) -> dict:
    import os

    import torch

    from graphbench.config import load_engine_config
    from graphbench.runner.engine import Engine
    from graphbench.runner.in_flight import InFlightStep
    from graphbench.runner.request import SamplingParams

    config = load_engine_config(overrides={
        "model.model": "tiny-llama", "model.device": "cpu", "optimization_level": 0, "scheduler.max_num_seqs": batch,
        "scheduler.max_num_batched_tokens": max(2048, 128 * batch), "scheduler.max_model_len": 2048,
        "cache.num_blocks": batch * 300})
    if packed:  # the GPU's packed upload: its host side (the packet), a CPU copy, and no kernel
        import graphbench.runner.kernels.step_inputs as unpack_module

        unpack_module.unpack_step_inputs = lambda *args: None  # (the step inputs take it when they are made)
        os.environ["TRITON_INTERPRET"] = "1"  # (read when the step inputs are made: they then pack)
        try:
            engine = Engine(config)
        finally:
            del os.environ["TRITON_INTERPRET"]
        assert engine.inputs.packed
    else:
        engine = Engine(config)
    spent: dict[str, float] = {}

    def timed(name, fn):
        def call(*args):
            started = time.perf_counter()
            try:
                return fn(*args)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - started
        return call

    runner, scheduler = engine.runner, engine.scheduler
    prepare = timed("prepare", runner.inputs.prepare)

    host_ids = torch.zeros(batch, dtype=torch.int64)  # (the runner's pinned buffers are made once too)

    def launch(batch_):  # the host's side of ModelRunner.launch, without the forward and sampling
        prepare(batch_, batch_.num_tokens)
        return InFlightStep(batch_, host_ids[:len(batch_.requests)], None, runner.dispatcher.mode, batch_.num_tokens)

    runner.launch = launch
    scheduler.schedule = timed("schedule", scheduler.schedule)
    scheduler.update = timed("update", scheduler.update)
    engine._take_tokens = timed("take_tokens", engine._take_tokens)
    prompts = [[(7 * i + j) % 200 + 1 for j in range(128)] for i in range(batch)]
    for p in prompts:
        engine.add_request(p, SamplingParams(max_tokens=steps + 40))
    while any(r.num_computed_tokens < 128 for r in scheduler.running + list(scheduler.waiting)):
        engine.step()  # the prompts (one step each, as prefill chunks)
    for _ in range(10):
        engine.step()
    samples: dict[str, list[float]] = {k: [] for k in ("step", "schedule", "prepare", "update", "take_tokens")}
    for _ in range(steps):
        spent.clear()
        started = time.perf_counter()
        engine.step()
        samples["step"].append(time.perf_counter() - started)
        for name in ("schedule", "prepare", "update", "take_tokens"):
            samples[name].append(spent.get(name, 0.0))
    engine.drain()
    result = {name: statistics.median(v) * 1e6 for name, v in samples.items()}
    result["other"] = result["step"] - sum(result[k] for k in ("schedule", "prepare", "update", "take_tokens"))
    engine.close()
    return {"batch": batch, "packed": packed, "us": result}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", default="1,64,256")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--copies", action="store_true", help="the step inputs as a copy per buffer (the CPU's path), "
                   "not the GPU's packed upload")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    results = []
    for b in (int(x) for x in args.batches.split(",")):
        r = measure(b, args.steps, packed=not args.copies)
        results.append(r)
        print(f"batch {b:4d}: " + ", ".join(f"{k} {v:7.1f} us" for k, v in r["us"].items()), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
