"""Debug aid: does Inductor's GEMM autotuning precompile its Triton choices in parallel on this machine?

    python bench/debug/autotune_precompile.py            # ~1 min on an H200

-O3's cold start spent 141 s in compile_sizes (session 3): Inductor printed "AUTOTUNE benchmarking takes
5.8 seconds and 0.0005 seconds precompiling for 19 choices", i.e. the choices compiled one by one in the
main process. This compiles two decode-sized GEMMs with max-autotune in a fresh Inductor cache, with
select_algorithm's log on, and prints compile_threads, the relevant environment and the wall time, with
Inductor's worker pool started early or not (GRAPHBENCH_EARLY_COMPILE_WORKERS=0|1).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp())
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp())

import torch  # noqa: E402
import torch._inductor.config as inductor_config  # noqa: E402

logging.basicConfig(stream=sys.stdout, level=logging.WARNING)
logging.getLogger("torch._inductor.select_algorithm").setLevel(logging.INFO)
print("compile_threads", inductor_config.compile_threads, "cpu_count", os.cpu_count(),
      {k: v for k, v in os.environ.items() if k.startswith(("TORCHINDUCTOR", "TRITON", "OMP"))}, flush=True)
if os.environ.get("GRAPHBENCH_EARLY_COMPILE_WORKERS", "1") != "0":
    from graphbench.runner.compile.compiler import start_compile_workers

    print("early workers:", start_compile_workers(), flush=True)
    time.sleep(float(os.environ.get("WAIT_FOR_WORKERS_S", "0")))
for m in (1, 2):
    x = torch.randn(m, 2048, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(8192, 2048, device="cuda", dtype=torch.bfloat16)
    torch._dynamo.reset()
    fn = torch.compile(lambda a, b: a @ b.T, dynamic=False, options={"max_autotune_gemm": True})
    started = time.perf_counter()
    fn(x, w)
    torch.cuda.synchronize()
    print(f"M={m}: compile + autotune {time.perf_counter() - started:.1f} s", flush=True)
