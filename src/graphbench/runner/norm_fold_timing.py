"""At one row, the layer's residual add + RMSNorm folded into the projection after it (qkv, gate/up) or not:
both timed at a cold start (runner/kernel_bench.py), the fold kept only where it is clearly faster, as a
"norm_linear" / "norm_gate_up" choice (runner/kernel_choice.py; the kernel: runner/kernels/norm_gemv.py)."""

from __future__ import annotations

import logging
from typing import Callable

import torch

from graphbench.runner import kernel_choice as kc
from graphbench.runner.kernel_bench import ProjectionTimer, compile_all, launcher, search
from graphbench.runner.kernel_choice import KernelChoice

log = logging.getLogger("graphbench.engine")

# The fold is kept only where it times at least this much faster than the add-norm launch + the projection
# alone. Timed alone, folds that won by 1.4-4.6% (qwen2.5-0.5b's gate/up) made the step slower on both GPUs
# measured: 0.556-0.559 against 0.529-0.533 ms on an H200 (trees that kept it apart), 0.617 against 0.613 ms on
# an H100 with the one choice flipped (benchmarks/RESULTS.md, 2026-12-06 and 2026-12-07); with PDL the separate
# add-norm overlaps the kernel before it in the step, which timing alone does not see. The folds that pay win
# by 12-40% alone (every qkv fold, SmolLM2's gate/up). A margin also makes cold searches agree: near-tie folds,
# chosen either way by two searches, were the widest gap seen between two cold starts of one commit.
FOLD_MIN_GAIN = 0.08


def norm_projections(model) -> list[tuple[str, torch.Tensor, torch.Tensor | None]]:
    """(op, weight, bias) of the projections after a residual add + RMSNorm: qkv and gate/up."""
    attn, mlp = model.layers[0].self_attn, model.layers[0].mlp
    return [("linear", attn.qkv_proj.weight, attn.qkv_proj.bias), ("gate_up", mlp.gate_up_proj.weight, None)]


def norm_runner(timer: ProjectionTimer, op: str, kernel: str, blocks: tuple,
                plain: KernelChoice) -> Callable[[torch.Tensor], object]:
    """weight -> the residual add + RMSNorm and the projection at one row: the add-norm launch then the op's
    chosen kernel (kernel "unfused"), or one norm_gemv launch with these blocks."""
    from graphbench.runner.kernels import add_rmsnorm, norm_gemv

    device = timer.copies[0].device
    x, residual = (torch.randn(1, timer.k, dtype=timer.dtype, device=device) for _ in range(2))
    norm_weight = 1 + 0.1 * torch.randn(timer.k, dtype=timer.dtype, device=device)
    normed, h = torch.empty_like(x), torch.empty_like(x)
    gated = op == "gate_up"
    if kernel == "unfused":
        project = launcher(op, plain.kernel, plain.blocks, normed, timer.bias)

        def unfused(w):
            add_rmsnorm.launch_add_rmsnorm(x, residual, norm_weight, 1e-6, normed, h)
            return project(w)
        return unfused

    def fused(w):
        out = x.new_empty((1, w.shape[0] // 2 if gated else w.shape[0]))
        norm_gemv.launch_norm_gemv(x, residual, norm_weight, 1e-6, w, timer.bias, out, h, *blocks, gated=gated)
        return out
    return fused


def time_norm(timer: ProjectionTimer, op: str, kernel: str, blocks: tuple, plain: KernelChoice) -> float | None:
    """Microseconds of norm_runner's launches, or None where the candidate does not run."""
    return timer.time_run(norm_runner(timer, op, kernel, blocks, plain), f"{kernel} {blocks} after the add-norm")


def choose_fold(op: str, timer: ProjectionTimer, plain: KernelChoice) -> KernelChoice:
    """At one row, the residual add + RMSNorm in front of op: its own launch before the op's chosen kernel
    (plain), or folded into a one-row GEMV (kernels/norm_gemv.py) where that times at least FOLD_MIN_GAIN
    faster; torch_us holds the unfused path's time."""
    n, k = timer.n, timer.k
    norm_op = kc.NORM_OPS[op]
    unfused_us = time_norm(timer, op, "unfused", (), plain)
    found = None
    if unfused_us is not None:
        kernel = "norm_gated_gemv" if op == "gate_up" else "norm_gemv"
        coarse = kc.gated_gemv_candidates(n, k) if op == "gate_up" else kc.gemv_candidates(n, k)
        found = search(lambda b: time_norm(timer, op, kernel, b, plain), coarse, kc.gemv_neighbours,
                       lambda blocks: compile_all([lambda b=b: norm_runner(timer, op, kernel, b, plain)(timer.copies[0])
                                                   for b in blocks]))
    timed = 1 + (found[2] if found else 0)
    log.info("%s %dx%d at one row: add-norm + %s %s, folded %s", norm_op, n, k, plain.kernel,
             "failed" if unfused_us is None else f"{unfused_us:.2f} us", f"{found[1]:.2f} us {found[0]}" if found else "not run")
    if found is None or found[1] > unfused_us * (1.0 - FOLD_MIN_GAIN):
        return KernelChoice(norm_op, n, k, 1, "unfused", (), unfused_us, unfused_us, timed)
    return KernelChoice(norm_op, n, k, 1, kernel, found[0], found[1], unfused_us, timed)
