"""What LoRA adapters cost in graphs and in steps, on a GPU.

    python bench/lora.py --model llama-3.2-1b --rank 16 --out lora.json

Engines at -O2 (FULL_AND_PIECEWISE) one after the other: no adapters; 1 and 4 seeded dummy adapters
of rank --rank on all seven target modules with cudagraph_specialize_lora on; 4 with it off. Per
engine: graph keys, capture seconds, graph memory, then a closed loop of --concurrency requests
(128-token prompts and outputs, greedy) at LoRA shares 0, 0.5 and 1 (requests with an adapter take
the loaded ones in turn): output tokens/s and TPOT p50, medians of 3 repeats after a warm-up.
Then the check that a recording replays what the un-captured run computes: the same -O2 config with
4 adapters and cudagraph_mode NONE must give the same greedy tokens for a mixed batch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def _mixed_tokens(engine, names: list[str]) -> list[list[int]]:
    from graphbench.runner.request import SamplingParams

    prompts = [[(7 * i + j) % 1000 + 1 for j in range(24)] for i in range(6)]
    loras = [names[i % len(names)] if i % 2 == 0 else None for i in range(6)]
    return engine.generate(prompts, SamplingParams(max_tokens=32), loras)


def measure(engine, names: list[str], share: float, concurrency: int, repeats: int) -> dict:
    from graphbench.bench.decode_timing import random_prompts
    from graphbench.runner.request import SamplingParams

    vocab = engine.arch.vocab_size
    with_adapter = round(share * concurrency)
    loras = [names[i % len(names)] if names and i < with_adapter else None for i in range(concurrency)]
    runs = []
    for repeat in range(repeats + 1):  # the first pass warms up
        prompts = random_prompts(concurrency, 128, vocab, 1000 + repeat)
        first = len(engine.records)
        started = time.perf_counter()
        requests = [engine.add_request(p, SamplingParams(max_tokens=128), lora) for p, lora in zip(prompts, loras)]
        while engine.has_unfinished():
            engine.step()
        seconds = time.perf_counter() - started
        tpot = [(r.finish_time - r.first_token_time) / (len(r.output_token_ids) - 1) * 1e3 for r in requests]
        modes: dict[str, int] = {}
        for record in engine.records[first:]:
            key = f"{record.runtime_mode}{'+lora' if record.descriptor.has_lora else ''}"
            modes[key] = modes.get(key, 0) + 1
        del engine.records[first:]
        if repeat:
            runs.append((128 * concurrency / seconds, statistics.median(tpot), modes))
    return {"share": share, "concurrency": concurrency, "output_tokens_per_s": statistics.median(r[0] for r in runs),
            "tpot_p50_ms": statistics.median(r[1] for r in runs), "step_modes": runs[-1][2]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="llama-3.2-1b")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="lora.json")
    args = parser.parse_args()

    from graphbench.config import load_engine_config
    from graphbench.runner.engine import Engine

    base = {"model.model": args.model, "optimization_level": 2, "scheduler.max_num_seqs": 64,
            "scheduler.max_model_len": 1024, "lora.max_lora_rank": args.rank}
    setups = [("no adapters", {}), ("1 adapter", {"lora.modules": [f"dummy:r={args.rank}"]}),
              ("4 adapters", {"lora.modules": [f"dummy:r={args.rank},n=4"]}),
              ("4 adapters, not specialised", {"lora.modules": [f"dummy:r={args.rank},n=4"],
                                               "lora.cudagraph_specialize_lora": False})]
    rows, tokens = [], {}
    for label, extra in setups:
        engine = Engine(load_engine_config(overrides={**base, **extra}))
        names = list(engine.lora_slots)
        report = engine.report
        row = {"setup": label, "num_graphs": report.num_graphs, "capture_s": report.capture_seconds,
               "graph_memory_mib": report.graph_memory_bytes / 2**20, "startup_s": report.total_seconds,
               "workloads": [measure(engine, names, share, args.concurrency, args.repeats)
                             for share in ((0.0, 0.5, 1.0) if names else (0.0,))]}
        if label == "4 adapters":
            tokens["graphs"] = _mixed_tokens(engine, names)
        rows.append(row)
        print(f"{label:28s} graphs {report.num_graphs} capture {report.capture_seconds:.2f} s "
              f"graph memory {row['graph_memory_mib']:.0f} MiB start {report.total_seconds:.1f} s", flush=True)
        for w in row["workloads"]:
            print(f"    LoRA share {w['share']:.1f}: {w['output_tokens_per_s']:8.1f} tok/s, TPOT p50 "
                  f"{w['tpot_p50_ms']:.3f} ms, steps {w['step_modes']}", flush=True)
        engine.close()
    eager = Engine(load_engine_config(overrides={**base, **setups[2][1], "compilation.cudagraph_mode": "NONE"}))
    tokens["uncaptured"] = _mixed_tokens(eager, list(eager.lora_slots))
    eager.close()
    same = tokens["graphs"] == tokens["uncaptured"]
    print(f"recordings replay the un-captured run's greedy tokens (mixed batch, 4 adapters): {same}", flush=True)
    with open(args.out, "w") as f:
        json.dump({"model": args.model, "rank": args.rank, "rows": rows, "replay_equals_uncaptured": same,
                   "tokens": tokens}, f, indent=1)


if __name__ == "__main__":
    main()
