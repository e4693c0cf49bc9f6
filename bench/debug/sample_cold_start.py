"""Debug aid: where a cold start's seconds go in EVERY thread (cProfile sees only the main one).

    OUT=/tmp/x python bench/debug/sample_cold_start.py --level 3 --max-num-seqs 256   # ~3 min at -O3

A sampler thread records every thread's Python stack every 20 ms during one cold start (a fresh
compile cache), and a timeline of the engine's phases. Writes $OUT/samples-O<level>.txt: per thread,
the functions holding the most samples (inclusive, so a phase and its callees both show), and the
most frequent innermost frames. Meant for -O3's compile_sizes (150 s on the H200 in session 4,
whose autotune candidates did compile in 16 threads): is the time in Inductor's lowering, Triton
codegen, ptxas, benchmarking, or waiting?
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stack_sampler import StackSampler  # noqa: E402

INTERVAL_S = 0.02


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-3.2-1b")
    p.add_argument("--level", type=int, default=3)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--top", type=int, default=40)
    args = p.parse_args()
    out = os.environ.get("OUT", ".")
    os.environ.setdefault("GRAPHBENCH_CACHE_ROOT", tempfile.mkdtemp())  # a fresh root: a cold start
    sampler = StackSampler(INTERVAL_S)  # every thread: the compile workers' threads too
    sampler.active.set()
    path = os.path.join(out, f"samples-O{args.level}.txt")

    def write(status: str) -> None:
        sampler.stop()
        with open(path, "w") as f:
            f.write(f"{status}\n{sampler.report(top=args.top)}\n")
        print("wrote", path, flush=True)

    signal.signal(signal.SIGTERM, lambda *a: (write("stopped by SIGTERM"), sys.exit(1)))
    from graphbench.config import load_engine_config
    from graphbench.runner.engine import Engine

    config = load_engine_config(overrides={"model.model": args.model, "optimization_level": args.level,
                                           "scheduler.max_num_seqs": args.max_num_seqs})
    sampler.start()
    started = time.perf_counter()
    engine = Engine(config, fresh_compile=True)
    elapsed = time.perf_counter() - started
    write(f"cold start {elapsed:.1f} s (compile_sizes {engine.report.compile_sizes_seconds:.1f} s)")
    print(engine.report, flush=True)


if __name__ == "__main__":
    main()
