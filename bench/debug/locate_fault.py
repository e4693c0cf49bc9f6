"""Debug aid: replay test_no_recompilation's loop with a sync after every forward; print the first failure.

    CUDA_LAUNCH_BLOCKING=1 python bench/debug/locate_fault.py [float32|bfloat16]
"""

import sys
import traceback

import torch

from graphbench.config import CUDAGraphMode
from graphbench.runner.scheduler import BatchDescriptor
from tests.gpu.test_graphs_gpu import _random_dummy, make_engine

dtype = sys.argv[1] if len(sys.argv) > 1 else "float32"
for mode_name in ("FULL_AND_PIECEWISE", "NONE"):
    engine = make_engine(2, mode_name, **{"model.dtype": dtype})
    top = max(engine.dispatcher.max_capture_size, 32)
    for n in range(1, top + 51):
        for num_reqs in sorted({min(n, 16), 1}):
            desc = BatchDescriptor(n, num_reqs, num_reqs == n)
            mode, padded = engine.dispatcher.dispatch(desc)
            size = padded.num_tokens
            reqs = num_reqs if mode == CUDAGraphMode.NONE else (padded.num_reqs or num_reqs)
            try:
                with torch.inference_mode():
                    meta = _random_dummy(engine, size, reqs, seed=n)
                    meta.uniform_decode = engine.runner._uniform_decode(padded if mode == CUDAGraphMode.FULL else desc)
                    engine.runner.forward(size, meta, mode, padded)
                torch.cuda.synchronize()
            except Exception:
                print(f"FAILED engine {mode_name} {dtype}: n={n} num_reqs={num_reqs} -> {mode.value} {padded} "
                      f"size={size} reqs={reqs} uniform_decode={meta.uniform_decode}", flush=True)
                traceback.print_exc()
                sys.exit(1)
    print(f"engine {mode_name} {dtype}: all sizes ok", flush=True)
