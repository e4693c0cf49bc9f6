"""A decoder layer's residual add + RMSNorm without a launch of its own, where the two projections around it
run graphbench's kernels.

Each layer has two: after o (in front of gate/up) and after down (in front of the next layer's qkv). At
batch 64 the add-norm launches were 2 of SmolLM2's 7 kernels a layer, each a few microseconds of latency
for a few kilobytes of work (benchmarks/RESULTS.md, 2026-12-05, SmolLM2's batch-64 roofline). Folding the norm
into the next projection alone lost three times: each of its column blocks recomputed the rows' norm
(RESULTS, 2026-12-03 and 2026-12-05). Here the work is split instead (kernels/fold_parts.py): the producer's
epilogue adds the residual, stores h and each row's 1 / rms (its last column block sums the blocks' squares),
and the consumer normalises its tiles of h as it loads them.

The producer (`linear_residual`: o, down) and its consumer (`norm_linear`: qkv, `norm_gate_up`: gate/up) each
get the other's weight and reach the same plan from the row count and the two projections' kernel choices
(runner/kernel_choice.py), so no row-count branch is traced:
- "rows" (2..64 rows, the producer on the skinny GEMM and the consumer on the skinny or gated GEMM): the
  split above; the layer launches 5 kernels, not 7.
- "one_row" (the producer on the GEMV, the consumer on the add-norm GEMV chosen at start-up): the GEMV's
  epilogue adds the residual and the add-norm GEMV reads h alone (the launches of the unfolded layer, the
  same rounding bit for bit).
- "apart" (anything else: cuBLAS, more than 64 rows, the CPU, the final norm): the producer's projection
  and the add-norm launch; the consumer projects the normed rows. The unfolded layer, launch for launch.
Tensor parallelism and LoRA keep the unfolded layer (model.py).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from graphbench.runner import kernel_choice, linear, norms
from graphbench.runner.kernels.util import triton_interpreting
from graphbench.runner.op_registry import register_op

ROWS, ONE_ROW, APART = "rows", "one_row", "apart"
PRODUCER_OP_NAME = "graphbench::linear_residual"
NORM_LINEAR_OP_NAME = "graphbench::norm_linear"
NORM_GATE_UP_OP_NAME = "graphbench::norm_gate_up"


@functools.cache
def _kernels():
    from graphbench.runner.kernels import gemv, norm_gemv, skinny_gemm

    return gemv, norm_gemv, skinny_gemm


def fold_plan(x: torch.Tensor, producer_weight: torch.Tensor | None, consumer_weight: torch.Tensor | None,
              gated: bool) -> str:
    """ROWS, ONE_ROW or APART for a projection on producer_weight whose output + the residual, normed, feeds
    consumer_weight's (gate/up where gated). x: either one's input (its rows, dtype and device decide)."""
    if producer_weight is None or consumer_weight is None or x.dim() != 2 or x.shape[0] < 1:
        return APART
    if (not linear.on_triton_device(x) or x.dtype not in (torch.bfloat16, torch.float16)
            or not x.dtype == producer_weight.dtype == consumer_weight.dtype
            or producer_weight.stride(-1) != 1 or consumer_weight.stride(-1) != 1
            or producer_weight.shape[0] != consumer_weight.shape[1]):
        return APART
    rows, op = x.shape[0], "gate_up" if gated else "linear"
    produced = kernel_choice.choice_for("linear", *producer_weight.shape, rows, x.is_cuda).kernel
    if rows == 1:
        fused = kernel_choice.choice_for(kernel_choice.NORM_OPS[op], *consumer_weight.shape, 1, x.is_cuda).kernel
        return ONE_ROW if produced == "gemv" and fused != "unfused" else APART
    consumed = kernel_choice.choice_for(op, *consumer_weight.shape, rows, x.is_cuda).kernel
    if produced == "skinny" and consumed in (("gated_skinny", "skinny") if gated else ("skinny",)):
        return ROWS
    return APART


def _blocks(op: str, weight: torch.Tensor, rows: int, on_gpu: bool) -> tuple[int, ...]:
    return kernel_choice.choice_for(op, *weight.shape, rows, on_gpu).blocks


def linear_residual_impl(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor,
                         eps: float, next_weight: torch.Tensor | None,
                         next_gated: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x [T, K] @ weight.T + residual [T, N] = h -> (h, rstd [T] float32, normed = rmsnorm(h) * norm_weight):
    what the next projection (next_weight; gate/up where next_gated; None: no projection, the final norm)
    reads. rstd holds values only where the plan is ROWS, normed only where it is APART."""
    plan = fold_plan(x, weight, next_weight, next_gated)
    no_rstd = x.new_empty((x.shape[0],), dtype=torch.float32)
    if plan == ROWS:
        h, rstd = _kernels()[2].skinny_gemm_residual(x.contiguous(), weight, residual.contiguous(), eps,
                                                      _blocks("linear", weight, x.shape[0], x.is_cuda))
        return h, rstd, torch.empty_like(h)
    if plan == ONE_ROW:
        h = torch.empty_like(residual)
        _kernels()[0].launch_gemv(x.contiguous(), weight, None, h, *_blocks("linear", weight, 1, x.is_cuda),
                                  interpret=triton_interpreting(), residual=residual.contiguous())
        return h, no_rstd, torch.empty_like(h)
    normed, h = norms.add_rmsnorm_impl(linear.linear_impl(x, weight), residual, norm_weight, eps)
    return h, no_rstd, normed


def linear_residual_torch(x, weight, residual, norm_weight, eps, next_weight, next_gated):
    """The same as torch ops (APART's values): for variants compiled for a fixed multi-row size
    (compile/pieces.linears_as_matmuls)."""
    normed, h = linear.add_rmsnorm_torch(F.linear(x, weight), residual, norm_weight, eps)
    return h, x.new_empty((x.shape[0],), dtype=torch.float32), normed


def _linear_residual_fake(x, weight, residual, norm_weight, eps, next_weight, next_gated):
    return torch.empty_like(residual), x.new_empty((x.shape[0],), dtype=torch.float32), torch.empty_like(residual)


linear_residual_op = register_op(PRODUCER_OP_NAME, linear_residual_impl, _linear_residual_fake)


def linear_residual(x, weight, residual, norm_weight, eps, next_weight, next_gated):
    """(h, rstd, normed) of linear_residual_impl, as an op when traced."""
    return linear.pick_implementation(linear_residual_impl, linear_residual_op)(
        x, weight, residual, norm_weight, eps, next_weight, next_gated)


def norm_linear_impl(h: torch.Tensor, rstd: torch.Tensor, normed: torch.Tensor, norm_weight: torch.Tensor,
                     eps: float, weight: torch.Tensor, bias: torch.Tensor | None,
                     prev_weight: torch.Tensor) -> torch.Tensor:
    """rmsnorm(h) * norm_weight @ weight.T (+ bias), from what linear_residual on prev_weight returned."""
    plan = fold_plan(h, prev_weight, weight, False)
    if plan == ROWS:
        return _kernels()[2].skinny_gemm(h, weight, bias, _blocks("linear", weight, h.shape[0], h.is_cuda),
                                         norm=(rstd, norm_weight))
    if plan == ONE_ROW:
        return _norm_gemv(h, norm_weight, eps, weight, bias, gated=False)
    return linear.linear_impl(normed, weight, bias)


def norm_linear_torch(h, rstd, normed, norm_weight, eps, weight, bias, prev_weight):
    return F.linear(normed, weight, bias)


def _norm_linear_fake(h, rstd, normed, norm_weight, eps, weight, bias, prev_weight):
    return h.new_empty((h.shape[0], weight.shape[0]))


norm_linear_op = register_op(NORM_LINEAR_OP_NAME, norm_linear_impl, _norm_linear_fake)


def norm_linear(h, rstd, normed, norm_weight, eps, weight, bias, prev_weight):
    return linear.pick_implementation(norm_linear_impl, norm_linear_op)(
        h, rstd, normed, norm_weight, eps, weight, bias, prev_weight)


def norm_gate_up_impl(h: torch.Tensor, rstd: torch.Tensor, normed: torch.Tensor, norm_weight: torch.Tensor,
                      eps: float, weight: torch.Tensor, prev_weight: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up of rmsnorm(h) * norm_weight @ weight.T (weight = [gate; up]), from what linear_residual
    on prev_weight returned."""
    plan = fold_plan(h, prev_weight, weight, True)
    if plan == ROWS:
        choice = kernel_choice.choice_for("gate_up", *weight.shape, h.shape[0], h.is_cuda)
        skinny = _kernels()[2]
        if choice.kernel == "gated_skinny":
            return skinny.skinny_gate_up(h, weight, choice.blocks, norm=(rstd, norm_weight))
        return linear.silu_mul(skinny.skinny_gemm(h, weight, None, choice.blocks, norm=(rstd, norm_weight)))
    if plan == ONE_ROW:
        return _norm_gemv(h, norm_weight, eps, weight, None, gated=True)
    return linear.gate_up_rows(normed, weight)


def norm_gate_up_torch(h, rstd, normed, norm_weight, eps, weight, prev_weight):
    gate_up = F.linear(normed, weight)
    inter = weight.shape[0] // 2
    return F.silu(gate_up[..., :inter]) * gate_up[..., inter:]


def _norm_gate_up_fake(h, rstd, normed, norm_weight, eps, weight, prev_weight):
    return h.new_empty((h.shape[0], weight.shape[0] // 2))


norm_gate_up_op = register_op(NORM_GATE_UP_OP_NAME, norm_gate_up_impl, _norm_gate_up_fake)


def norm_gate_up(h, rstd, normed, norm_weight, eps, weight, prev_weight):
    return linear.pick_implementation(norm_gate_up_impl, norm_gate_up_op)(
        h, rstd, normed, norm_weight, eps, weight, prev_weight)


def _norm_gemv(h: torch.Tensor, norm_weight: torch.Tensor, eps: float, weight: torch.Tensor,
               bias: torch.Tensor | None, gated: bool) -> torch.Tensor:
    """The add-norm GEMV on h alone (the GEMV before added the residual), with its chosen blocks."""
    op = kernel_choice.NORM_OPS["gate_up" if gated else "linear"]
    out = h.new_empty((1, weight.shape[0] // 2 if gated else weight.shape[0]))
    _kernels()[1].launch_norm_gemv(h.contiguous(), None, norm_weight, eps, weight, bias, out, None,
                                   *_blocks(op, weight, 1, h.is_cuda), gated=gated, interpret=triton_interpreting())
    return out


# op -> (the index of its weight among its arguments, the op whose kernel choice runs it, its torch form)
TRACED_OPS = {linear_residual_op: (1, "linear", linear_residual_torch),
              norm_linear_op: (5, "linear", norm_linear_torch),
              norm_gate_up_op: (5, "gate_up", norm_gate_up_torch)}
