"""cuBLAS's first call at each (rows, weight shape) the capture will make, made early in a second thread.

Under cProfile, a warm -O2 start's capture made 8192 F.linear calls with 0.81 s of their own time
(llama-3.2-1b, 256 sequences, H200). Most of that was the first call at each (rows, shape) of the
piecewise sizes above 64 rows: 3.0-5.4 ms for the first call, 15-46 us after (bench/RESULTS.md,
2026-12-02). That first call is cuBLAS's host work for a new problem size, and torch's bindings release
the GIL around it. So a thread can make these calls, smallest size first, while the main thread runs
the capture's eager warm-up (largest first) in Python. GRAPHBENCH_BLAS_PREWARM=1 turns it on; it is off
until it is measured on the GPU (bench/gpu_checks.sh starts, docs/DEVELOPING.md).
"""

from __future__ import annotations

import logging
import threading
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import nn

from graphbench.switches import switch_value

log = logging.getLogger("graphbench.capture")

BLAS_PREWARM = switch_value("GRAPHBENCH_BLAS_PREWARM") == "1"


def cublas_calls(layer: nn.Module, sizes: list[int]) -> list[tuple[int, torch.Tensor]]:
    """(rows, weight) of each first torch-linear call the capture's forwards make at these row counts: one
    weight per distinct (shape, dtype) among the layer's projections, wherever graphbench's own kernels
    would not run it (linear.runs_own_kernel). Ascending rows."""
    from graphbench.runner.linear import Linear, runs_own_kernel

    weights: dict[tuple, torch.Tensor] = {}
    for module in layer.modules():
        if isinstance(module, Linear):
            weights.setdefault((tuple(module.weight.shape), module.weight.dtype), module.weight)
    return [(rows, w) for rows in sorted(set(sizes)) for w in weights.values() if not runs_own_kernel(rows, w)]


class BlasPrewarm:
    """Runs `calls` (rows, weight) as F.linear on zero inputs, in a thread of its own (on a stream of its
    own on CUDA), started at once; join() waits for it. A failure is logged, never raised: the capture's
    own warm-up makes the same calls."""

    def __init__(self, calls: list[tuple[int, torch.Tensor]], device: torch.device):
        self.calls, self.device = calls, device
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="graphbench-blas-prewarm", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
            with torch.inference_mode(), (torch.cuda.stream(stream) if stream is not None else nullcontext()):
                inputs: dict[tuple, torch.Tensor] = {}  # (K, dtype) -> zeros [max rows, K]
                max_rows = max((rows for rows, _ in self.calls), default=0)
                for rows, weight in self.calls:
                    key = (weight.shape[1], weight.dtype)
                    if key not in inputs:
                        inputs[key] = torch.zeros(max_rows, weight.shape[1], dtype=weight.dtype, device=self.device)
                    F.linear(inputs[key][:rows], weight)
            if stream is not None:
                stream.synchronize()
        except BaseException as exc:  # noqa: BLE001 - reported by join(); the warm-up does the same calls
            self.error = exc

    def join(self) -> None:
        """Wait for the thread; on CUDA give back what its stream's allocations left cached (another
        stream's blocks, which the main stream would not reuse)."""
        self.thread.join()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        if self.error is not None:
            log.warning("cuBLAS pre-warm failed (%s: %s); the capture's warm-up makes those calls itself",
                        type(self.error).__name__, self.error)

