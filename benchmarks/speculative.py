"""Speculative decoding on a GPU: tokens/s and TPOT per k and drafter, acceptance, and the graphs
the uniform 1 + k steps ran.

    python benchmarks/speculative.py --model llama-3.2-1b --batches 1,16 --ks 0,2,4 --methods replay,ngram \
        --out speculative.json

One engine per (k, drafter) at -O2 (FULL_AND_PIECEWISE), each in this process one after the other
(closed between). Each batch size C is a closed loop of C requests, 128-token prompts and 128-token
outputs, greedy, run through graphbench's own driver (bench/driver.py): a warm-up pass, then
--repeats measured passes; medians are printed. replay proposes the tokens an unmeasured greedy
pass of the same prompts produced (100% acceptance unless --replay-acceptance); ngram runs on
prompts of a repeated 16-token span (the prompt kind "repeated"), and k = 0 runs both prompt kinds
as the baselines. The engine compiles with torch.compile's fail_on_recompile stance: a run that
completes did not recompile.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def measure(engine, batch: int, prompt_kind: str, repeats: int) -> dict:
    from graphbench.bench.driver import run_engine_workload, warm_up
    from graphbench.bench.workloads import LengthDist, Workload

    workload = Workload(kind="closed", concurrency=batch, num_requests=batch, prompt_len=LengthDist("fixed", 128),
                        output_len=LengthDist("fixed", 128), prompt_kind=prompt_kind)
    warm_up(engine, workload)
    runs = [run_engine_workload(engine, workload, seed_offset=i) for i in range(repeats)]

    def med(key: str) -> float | None:
        head, _, tail = key.partition(".")
        values = [r.get(head, {}).get(tail) if tail else r.get(head) for r in runs]
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    modes: dict[str, int] = {}
    for r in runs:
        for mode, count in r.get("uniform_runtime_modes", {}).items():
            modes[mode] = modes.get(mode, 0) + count
    return {"batch": batch, "prompt_kind": prompt_kind, "output_tokens_per_s": med("output_tokens_per_s"),
            "tpot_p50_ms": med("tpot_ms.p50"), "step_p50_ms": med("step_ms.p50"),
            "acceptance_rate": med("spec_acceptance_rate"), "mean_accepted_tokens": med("spec_mean_accepted_tokens"),
            "drafted_tokens": med("spec_drafted_tokens"), "wasted_tokens": med("spec_wasted_tokens"),
            "filled_tokens": med("spec_filled_tokens"), "uniform_runtime_modes": modes,
            "runtime_modes": runs[-1].get("runtime_modes"), "repeats": len(runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="llama-3.2-1b")
    parser.add_argument("--batches", default="1,16")
    parser.add_argument("--ks", default="0,2,4")
    parser.add_argument("--methods", default="replay,ngram")
    parser.add_argument("--replay-acceptance", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--level", type=int, default=2, help="-O level (2: FULL_AND_PIECEWISE on a GPU).")
    parser.add_argument("--out", default="speculative.json")
    args = parser.parse_args()
    from preflight import check_model, context_for

    check_model(args.model, "auto")
    from graphbench.config import load_engine_config
    from graphbench.runner.engine import Engine

    batches = [int(b) for b in args.batches.split(",")]
    rows = []
    for k in [int(x) for x in args.ks.split(",")]:
        for method in (["none"] if k == 0 else args.methods.split(",")):
            overrides = {"model.model": args.model, "optimization_level": args.level, "scheduler.max_num_seqs": max(batches),
                         "scheduler.max_model_len": context_for(args.model, 1024), "speculative.num_speculative_tokens": k}
            if k:
                overrides.update({"speculative.method": method, "speculative.replay_acceptance": args.replay_acceptance})
            started = time.perf_counter()
            engine = Engine(load_engine_config(overrides=overrides))
            startup = {"seconds": time.perf_counter() - started, "num_graphs": engine.report.num_graphs,
                       "capture_sizes": engine.config.compilation.cudagraph_capture_sizes[:12],
                       "cudagraph_mode": engine.report.cudagraph_mode}
            kinds = ["random", "repeated"] if k == 0 else ["repeated" if method == "ngram" else "random"]
            for kind in kinds:
                for batch in batches:
                    row = {"k": k, "method": method, **measure(engine, batch, kind, args.repeats), "startup": startup}
                    rows.append(row)
                    print(f"k={k} {method:6s} {kind:8s} C={batch:3d}: {row['output_tokens_per_s']:8.1f} tok/s "
                          f"({row['output_tokens_per_s'] / batch:7.1f} per request), TPOT p50 {row['tpot_p50_ms']:.3f} ms, "
                          f"acceptance {row['acceptance_rate'] if row['acceptance_rate'] is not None else float('nan'):.2f}, "
                          f"accepted/step {row['mean_accepted_tokens'] or 0:.2f}, uniform steps {row['uniform_runtime_modes']}",
                          flush=True)
            engine.close()
    with open(args.out, "w") as f:
        json.dump({"model": args.model, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    from preflight import one_line_errors

    with one_line_errors():
        main()
