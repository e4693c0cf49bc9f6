"""The layer's residual add + RMSNorm folded into the projection after it (qkv, gate/up) or not: both timed at a
cold start (runner/kernel_bench.py) per row class, the faster kept as a "norm_linear" / "norm_gate_up" choice
(runner/kernel_choice.py; the kernels: runner/kernels/norm_gemv.py at one row, norm_skinny.py at 2..64 rows
where K is small enough for whole rows)."""

from __future__ import annotations

import logging
from typing import Callable

import torch

from graphbench.runner import kernel_choice as kc
from graphbench.runner.kernel_bench import ProjectionTimer, compile_all, launcher, search
from graphbench.runner.kernel_choice import KernelChoice

log = logging.getLogger("graphbench.engine")


def norm_projections(model) -> list[tuple[str, torch.Tensor, torch.Tensor | None]]:
    """(op, weight, bias) of the projections after a residual add + RMSNorm: qkv and gate/up."""
    attn, mlp = model.layers[0].self_attn, model.layers[0].mlp
    return [("linear", attn.qkv_proj.weight, attn.qkv_proj.bias), ("gate_up", mlp.gate_up_proj.weight, None)]


def norm_runner(timer: ProjectionTimer, op: str, kernel: str, blocks: tuple,
                plain: KernelChoice) -> Callable[[torch.Tensor], object]:
    """weight -> the residual add + RMSNorm and the projection at plain's row class: the add-norm launch then
    the op's chosen kernel (kernel "unfused"), or one folded launch with these blocks."""
    from graphbench.runner.kernels import add_rmsnorm, norm_gemv, norm_skinny

    device = timer.copies[0].device
    rows = plain.rows
    x, residual = (torch.randn(rows, timer.k, dtype=timer.dtype, device=device) for _ in range(2))
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
        out = x.new_empty((rows, w.shape[0] // 2 if gated else w.shape[0]))
        if rows == 1:
            norm_gemv.launch_norm_gemv(x, residual, norm_weight, 1e-6, w, timer.bias, out, h, *blocks, gated=gated)
        else:
            norm_skinny.launch_norm_skinny(x, residual, norm_weight, 1e-6, w, timer.bias, out, h, *blocks,
                                           gated=gated)
        return out
    return fused


def time_norm(timer: ProjectionTimer, op: str, kernel: str, blocks: tuple, plain: KernelChoice) -> float | None:
    """Microseconds of norm_runner's launches, or None where the candidate does not run."""
    return timer.time_run(norm_runner(timer, op, kernel, blocks, plain), f"{kernel} {blocks} after the add-norm")


def fold_timed(op: str, k: int, rows: int, dtype: torch.dtype) -> bool:
    """Whether start-up times the fold for op at this row class: one row always; 2..64 rows where the folded
    skinny GEMM has blocks that hold whole rows of K, in its 16-bit dtypes."""
    return rows == 1 or (kc.norm_skinny_fits(k) and dtype in (torch.bfloat16, torch.float16)
                         and bool(kc.norm_skinny_candidates(k, rows, op == "gate_up")))


def _fold_search(op: str, n: int, k: int, rows: int) -> tuple[str, list[tuple], Callable]:
    """(the folded kernel, its coarse blocks, their neighbours) at this row class."""
    if rows == 1:
        coarse = kc.gated_gemv_candidates(n, k) if op == "gate_up" else kc.gemv_candidates(n, k)
        return ("norm_gated_gemv" if op == "gate_up" else "norm_gemv"), coarse, kc.gemv_neighbours
    kernel = "norm_gated_skinny" if op == "gate_up" else "norm_skinny"
    return kernel, kc.norm_skinny_candidates(k, rows, op == "gate_up"), lambda best: []


def choose_fold(op: str, timer: ProjectionTimer, plain: KernelChoice) -> KernelChoice:
    """At plain's row class, the residual add + RMSNorm in front of op: its own launch before the op's chosen
    kernel (plain), or folded into one launch (kernels/norm_gemv.py, norm_skinny.py), whichever is faster;
    torch_us holds the unfused path's time."""
    n, k, rows = timer.n, timer.k, plain.rows
    norm_op = kc.NORM_OPS[op]
    unfused_us = time_norm(timer, op, "unfused", (), plain)
    found = None
    kernel, coarse, neighbours = _fold_search(op, n, k, rows)
    if unfused_us is not None:
        found = search(lambda b: time_norm(timer, op, kernel, b, plain), coarse, neighbours,
                       lambda blocks: compile_all([lambda b=b: norm_runner(timer, op, kernel, b, plain)(timer.copies[0])
                                                   for b in blocks]))
    timed = 1 + (found[2] if found else 0)
    log.info("%s %dx%d at %d rows: add-norm + %s %s, folded %s", norm_op, n, k, rows, plain.kernel,
             "failed" if unfused_us is None else f"{unfused_us:.2f} us", f"{found[1]:.2f} us {found[0]}" if found else "not run")
    if found is None or found[1] >= unfused_us:
        return KernelChoice(norm_op, n, k, rows, "unfused", (), unfused_us, unfused_us, timed)
    return KernelChoice(norm_op, n, k, rows, kernel, found[0], found[1], unfused_us, timed)
