# probe: what a start holds beyond weights and KV cache, graphs against none; the payment's own figures.
# Fresh machine, one cache root: for m in graphs graphs NONE NONE graphs; do python3 benchmarks/probes/engine_overhead.py $m; done
import json, sys, torch
torch.cuda.init(); torch.ones(1, device="cuda"); torch.cuda.synchronize()
free0 = torch.cuda.mem_get_info()[0]
import graphbench.runner.engine_startup as es
from graphbench.config import load_engine_config
from graphbench.runner.engine import Engine
orig = es.pay_first_capture
def wrapped(stream, dtype, size):
    torch.cuda.synchronize(); torch.cuda.empty_cache(); f0 = torch.cuda.mem_get_info()[0]
    kept = orig(stream, dtype, size)
    torch.cuda.synchronize(); torch.cuda.empty_cache(); f1 = torch.cuda.mem_get_info()[0]
    print(f"PAY total {(f0 - f1) / 2**20:.0f} MiB, counted {kept / 2**20:.0f}, held before it {(free0 - f0) / 2**20:.0f}", flush=True)
    return kept
es.pay_first_capture = wrapped
o = {"model.model": "llama-3.2-1b", "optimization_level": 2, "scheduler.max_num_seqs": 256,
     "scheduler.max_num_batched_tokens": 8192, "scheduler.max_model_len": 4096, "cache.gpu_memory_utilization": 0.5}
if sys.argv[1] != "graphs":
    o["compilation.cudagraph_mode"] = sys.argv[1]
e = Engine(load_engine_config(overrides=o)); r = e.report
torch.cuda.synchronize(); torch.cuda.empty_cache(); free1 = torch.cuda.mem_get_info()[0]
held = free0 - free1
print(f"{sys.argv[1]:>6} cold={not r.compile_from_cache} held {held / 2**20:.0f} MiB = weights {r.weights_bytes / 2**20:.0f} + kv "
      f"{r.kv_cache_bytes / 2**20:.0f} + rest {(held - r.weights_bytes - r.kv_cache_bytes) / 2**20:.0f}; graph memory "
      f"{r.graph_memory_bytes / 2**20:.0f} (setup {r.graph_setup_bytes / 2**20:.0f}); reserved {torch.cuda.memory_reserved() / 2**20:.0f}", flush=True)
