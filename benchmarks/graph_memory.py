"""Graph memory predicted from the first captures (vLLM's way and graphbench's) against the whole ladder.

    python benchmarks/graph_memory.py --model llama-3.2-1b --modes FULL,PIECEWISE,FULL_AND_PIECEWISE --out gm.json

Each mode starts its own engine in its own process (a fresh CUDA context: the first capture's one-off
costs are in every measurement alike) with the default ladder, captures it whole and reads the
capture log (each key's free-memory delta). ladders/graph_memory.py predicts the total from the first
graphs of each mode: vLLM's estimate (two samples per mode, linear in the count) and graphbench's
(a fixed pool plus a fitted line per mode). Prints prediction against measurement per mode.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys


def worker(args: argparse.Namespace) -> None:
    from graphbench.config import load_engine_config
    from graphbench.runner.engine import Engine

    engine = Engine(load_engine_config(overrides={
        "model.model": args.model, "optimization_level": args.level, "scheduler.max_num_seqs": args.max_num_seqs,
        "compilation.cudagraph_mode": args.worker}))
    r = engine.report
    out = {"mode": args.worker, "graph_memory_bytes": r.graph_memory_bytes, "graph_pool_bytes": r.graph_pool_bytes,
           "capture_s": r.capture_seconds, "num_graphs": r.num_graphs, "capture_log": r.capture_log,
           "graph_setup_bytes": r.graph_setup_bytes,
           "capture_sizes": list(engine.dispatcher.capture_sizes)}
    engine.close()
    print("RESULT " + json.dumps(out), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-3.2-1b")
    p.add_argument("--level", type=int, default=2)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--modes", default="FULL,PIECEWISE,FULL_AND_PIECEWISE")
    p.add_argument("--out", default=None)
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    from preflight import check_model

    check_model(args.model, "auto")
    from graphbench.ladders.graph_memory import predict_from_log

    rows = []
    for mode in args.modes.split(","):
        cmd = [sys.executable, __file__, "--worker", mode, "--model", args.model, "--level", str(args.level),
               "--max-num-seqs", str(args.max_num_seqs)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode or not lines:
            print(f"{mode}: failed (exit {proc.returncode})\n{proc.stderr[-2000:]}", flush=True)
            continue
        result = json.loads(lines[-1][len("RESULT "):])
        prediction = predict_from_log(result["capture_log"], result["graph_memory_bytes"],
                                      setup_bytes=result["graph_setup_bytes"])
        result.update(vllm_bytes=prediction.vllm_bytes, graphbench_bytes=prediction.graphbench_bytes,
                      vllm_error_pct=prediction.error_pct(prediction.vllm_bytes),
                      graphbench_error_pct=prediction.error_pct(prediction.graphbench_bytes), counts=prediction.counts)
        rows.append(result)
        print(f"{mode}: done", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"model": args.model, "level": args.level, "max_num_seqs": args.max_num_seqs, "rows": rows}, f, indent=1)
    mib = 1 << 20
    print(f"\n{'mode':<20}{'graphs':>14}{'measured MiB':>14}{'vLLM MiB':>10}{'error':>9}{'graphbench MiB':>16}{'error':>9}")
    for r in rows:
        graphs = "+".join(f"{n}{m[0]}" for m, n in r["counts"].items())
        print(f"{r['mode']:<20}{graphs:>14}{r['graph_memory_bytes'] / mib:>14.1f}{r['vllm_bytes'] / mib:>10.1f}"
              f"{r['vllm_error_pct']:>+8.1f}%{r['graphbench_bytes'] / mib:>16.1f}{r['graphbench_error_pct']:>+8.1f}%")


if __name__ == "__main__":
    from preflight import one_line_errors

    with one_line_errors():
        main()
