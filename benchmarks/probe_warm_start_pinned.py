"""Warm starts in fresh processes, alternately pinned to one core and unpinned: does pinning steady them?"""
import os, statistics, sys, time
from graphbench.config import load_engine_config
from graphbench.bench.cold_start import start_in_child

cfg = load_engine_config(None, {"model.model": sys.argv[1], "optimization_level": 2, "scheduler.max_num_seqs": 256})
every = os.sched_getaffinity(0)
print("cores", sorted(every))
rec = start_in_child(cfg, cold=True); print(f"cold total {rec['total_s']:.2f}", flush=True)
rows = {"pinned": [], "free": []}
for i in range(int(sys.argv[2])):
    for kind in ("pinned", "free"):
        os.sched_setaffinity(0, {sorted(every)[3]} if kind == "pinned" else every)
        rec = start_in_child(cfg, cold=False)
        os.sched_setaffinity(0, every)
        rest = rec["total_s"] - rec["capture_s"] - rec["load_s"]
        rows[kind].append((rec["total_s"], rec["capture_s"], rec["load_s"], rest))
        print(f"{i} {kind:6s} total {rec['total_s']:.2f} capture {rec['capture_s']:.2f} load {rec['load_s']:.2f} rest {rest:.2f}", flush=True)
for kind, r in rows.items():
    tot = [x[0] for x in r]; cap = [x[1] for x in r]
    print(f"{kind}: total median {statistics.median(tot):.2f} range {min(tot):.2f}-{max(tot):.2f} "
          f"({(max(tot)-min(tot))/statistics.median(tot):.0%}); capture {min(cap):.2f}-{max(cap):.2f}")
