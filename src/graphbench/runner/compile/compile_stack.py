"""torch's compile stack (Dynamo, Inductor, AOTAutograd): imported only by a start that compiles or loads
what Inductor compiled, and timed on its own so that compile and load times measure compilation.

A warm start whose pieces all run as traced (graphbench's ops only: pieces.runs_as_traced) imports none
of it. Importing it is seconds in a fresh process: about 3.5 s on the H200 machine with bytecode kept,
11 s without (benchmarks/RESULTS.md, 2026-12-01, "a warm start that does not import the compile stack").
"""

from __future__ import annotations

import importlib
import time

COMPILE_STACK_MODULES = (
    "torch._dynamo", "torch._inductor.compile_fx", "torch._inductor.output_code", "torch._inductor.codecache",
    "torch._functorch.aot_autograd", "torch._higher_order_ops.triton_kernel_wrap",
    "torch.fx.experimental.symbolic_shapes", "torch._inductor.standalone_compile",
)


def import_compile_stack() -> float:
    """Import torch's compiler modules now and turn on Inductor's and AOTAutograd's on-disk caches (which
    compiler.use_cache_dir points into the config's cache entry); returns the seconds it took (~0 when
    already imported)."""
    started = time.perf_counter()
    for name in COMPILE_STACK_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # a module this torch does not have (standalone_compile before 2.8)
            pass
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    inductor_config.fx_graph_cache = True
    if hasattr(functorch_config, "enable_autograd_cache"):
        functorch_config.enable_autograd_cache = True
    return time.perf_counter() - started
