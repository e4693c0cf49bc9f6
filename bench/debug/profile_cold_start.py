"""Debug aid: where a cold start's seconds go (e.g. -O3's compile_sizes autotuning), under cProfile.

    OUT=/tmp/x python bench/debug/profile_cold_start.py --level 3 --max-num-seqs 256

Writes $OUT/cold-O<level>.prof and a text summary (cumulative and own time); the profile is dumped
even when a time limit stops the start (SIGTERM), so a partial start still says where it was.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import signal
import sys
import tempfile
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-3.2-1b")
    p.add_argument("--level", type=int, default=3)
    p.add_argument("--max-num-seqs", type=int, default=256)
    args = p.parse_args()
    out = os.environ.get("OUT", ".")
    os.environ.setdefault("GRAPHBENCH_CACHE_ROOT", tempfile.mkdtemp())  # a fresh root: a cold start
    prof_path = os.path.join(out, f"cold-O{args.level}.prof")
    profiler = cProfile.Profile()

    def dump(*_unused) -> None:
        profiler.disable()
        profiler.dump_stats(prof_path)
        with open(os.path.join(out, f"cold-O{args.level}.txt"), "w") as f:
            stats = pstats.Stats(prof_path, stream=f)
            stats.sort_stats("cumulative").print_stats(80)
            stats.sort_stats("tottime").print_stats(40)

    signal.signal(signal.SIGTERM, lambda *a: (dump(), sys.exit(1)))
    from graphbench.config import load_engine_config
    from graphbench.runner.engine import Engine

    overrides = {"model.model": args.model, "optimization_level": args.level,
                 "scheduler.max_num_seqs": args.max_num_seqs, "scheduler.max_num_batched_tokens": 8192,
                 "scheduler.max_model_len": 4096, "cache.gpu_memory_utilization": 0.5}
    started = time.perf_counter()
    profiler.enable()
    engine = Engine(load_engine_config(overrides=overrides))
    profiler.disable()
    print(f"start {time.perf_counter() - started:.1f} s; report {vars(engine.report)}", flush=True)
    dump()


if __name__ == "__main__":
    main()
