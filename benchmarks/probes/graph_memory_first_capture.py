"""Probe: why a start that timed its kernel choices reads ~100 MiB less graph memory than a warm start.
Each mode runs in its own process: `cold` (empty cache root: kernel timing), `warm`, `prewarm` (a throwaway
capture of one cuBLAS matmul on a new stream, then the warm start). Prints the graph memory, the pool and
the first recordings' free-memory deltas."""
import json
import sys

import torch
import torch.nn.functional as F

from graphbench.config import load_engine_config
from graphbench.runner.engine import Engine

mode = sys.argv[1]
MiB = 2**20
if mode == "prewarm":
    free0, res0 = torch.cuda.mem_get_info()[0], torch.cuda.memory_reserved()
    x = torch.randn(64, 2048, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    F.linear(x, w)
    torch.cuda.synchronize()
    free1 = torch.cuda.mem_get_info()[0]
    s = torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        y = F.linear(x, w)
    g.replay()
    torch.cuda.synchronize()
    free2, res2 = torch.cuda.mem_get_info()[0], torch.cuda.memory_reserved()
    print(f"prewarm: eager matmul {(free0 - free1) / MiB:.1f} MiB, first capture {(free1 - free2) / MiB:.1f} MiB "
          f"(reserved +{(res2 - res0) / MiB:.1f})", flush=True)
    del g, y
    torch.cuda.empty_cache()
engine = Engine(load_engine_config(overrides={"model.model": "llama-3.2-1b", "model.device": "cuda",
                                              "optimization_level": 2, "scheduler.max_num_seqs": 256}))
r = engine.report
print(json.dumps({"mode": mode, "from_cache": r.compile_from_cache, "graph_mib": r.graph_memory_bytes / MiB,
                  "pool_mib": r.graph_pool_bytes / MiB, "setup_mib": r.graph_setup_bytes / MiB,
                  "first_keys": [[k[0], k[1], round(k[3] / MiB, 1)] for k in r.capture_log[:4]]}), flush=True)
engine.close()
