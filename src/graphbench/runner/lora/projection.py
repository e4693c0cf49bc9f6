"""A projection with its LoRA delta added, in as few launches as the step's rows allow.

At 2..64 rows on CUDA (a decode batch) the skinny GEMM adds each row's x A^T B^T in its epilogue where it
stores the projection (kernels/skinny_gemm.py); gate/up's gated GEMM adds both deltas before the
activation, so no silu-mul launch either. The shrink x A^T before it, one row a program
(kernels/lora_row_shrink.py), is its own launch for o and down, and part of the residual add + RMSNorm's
launch for qkv and gate/up (that kernel holds the normed row). A layer with adapters then launches 9
kernels where the norms, the projections, the shrinks and the expand-adds apart took 16 (runner/model.py).
Elsewhere (one row, more than 64, the CPU, the torch path of use_lora_kernel) the projection runs as
without adapters and the delta is added after it (lora/weights.add_delta).

The epilogue runs the skinny GEMM with start-up's measured blocks for the shape and row class; where
start-up chose cuBLAS there (cuBLAS has no epilogue to add the delta in), with the skinny kernel's fastest
blocks in the same timing (the choice's epilogue_blocks; with the rule's blocks and the delta, llama-3.2-1b's
qkv at 16 rows took 9.1 us, cuBLAS without it 6.3: benchmarks/RESULTS.md, 2026-12-05), else with the skinny
rule's (a K tile of 128, or 64 where 128 does not divide K, split along K to fill the GPU). Given the same
shrink, the epilogue's result equals the projection + expand-add launches bit for bit (tests/test_lora_kernel.py);
rows without an adapter get the projection alone. The row shrinks sum in float32 without tensor cores, so
their deltas may differ from lora_shrink.lora_shrink's in the last bit of the rounded x A^T.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from graphbench.runner import kernel_choice
from graphbench.runner.linear import add_norm_kernel_applies, add_rmsnorm_torch, linear_impl, on_triton_device
from graphbench.runner.lora import weights
from graphbench.runner.op_registry import register_op


@functools.cache
def _kernels() -> SimpleNamespace:
    """The Triton modules, imported on first use (the CPU path never needs Triton)."""
    from graphbench.runner.kernels import gemv, lora_row_shrink, paged_attention, skinny_gemm

    return SimpleNamespace(gemv=gemv, skinny_gemm=skinny_gemm, paged_attention=paged_attention,
                           lora_row_shrink=lora_row_shrink)


def epilogue_blocks(op: str, x: torch.Tensor, weight: torch.Tensor, rank: int) -> tuple[int, ...] | None:
    """The skinny GEMM's blocks for op ("linear" or "gate_up", the gated kernel) over x's rows with a delta of
    `rank` columns a segment, or None where the delta cannot be added in an epilogue (not 2..64 rows of a
    16-bit CUDA tensor, no K tile fits). Timed blocks (timed without the delta) wider than 64 columns take the
    rule's above rank 16: BLOCK_N 128 with a rank-64 delta left a 120-byte stack frame on sm_90."""
    if not (x.is_cuda and on_triton_device(x) and weights.kernel_in_use()):
        return None
    if not _kernels().skinny_gemm.skinny_applies(x, weight):
        return None
    (n, k), rows = weight.shape, x.shape[0]
    choice = kernel_choice.choice_for(op, n, k, rows, True)
    # the chosen blocks where the epilogue's kernel won the timing, else that kernel's fastest (epilogue_blocks)
    timed = choice.blocks if choice.kernel == kernel_choice.EPILOGUE_KERNELS[op] else choice.epilogue_blocks
    if timed and (rank <= 16 or timed[0] <= 64):
        return timed
    block_k = next((b for b in (kernel_choice.SKINNY_BLOCK_K, 64) if k % b == 0), None)
    if block_k is None:
        return None
    if op == "gate_up":
        return 32, block_k, 4, 4
    sms = _kernels().paged_attention.sm_count(x.device.index or 0)
    return 64, block_k, kernel_choice.split_count(n, k, sms, 64, block_k), 4, 4


def lora_linear_impl(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, a: torch.Tensor,
                     b: torch.Tensor, index: torch.Tensor, segments: list[int], own_kernels: bool) -> torch.Tensor:
    """x @ weight.T (+ bias) + each row's x A[idx]^T B[idx]^T (rows with idx -1: none; nothing at all while
    adapters are inactive). own_kernels False (config.model.kernels = torch): the projection is F.linear."""
    project = linear_impl if own_kernels else F.linear
    if not weights.adapters_are_active():
        return project(x, weight, bias)
    blocks = epilogue_blocks("linear", x, weight, _rank(b, segments)) if own_kernels else None
    if blocks is not None:
        shrunk = _kernels().lora_row_shrink.row_shrink(x, a, b, index, segments)
        return _kernels().skinny_gemm.skinny_gemm(x, weight, bias, blocks, lora=shrunk)
    out = project(x, weight, bias)
    weights.add_delta(out, x, a, b, index, segments)
    return out


def lora_gate_up_impl(x: torch.Tensor, weight: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                      index: torch.Tensor, segments: list[int], own_kernels: bool) -> torch.Tensor:
    """weight = [gate; up] [2I, K] -> silu(gate') * up' [T, I], where gate' and up' hold each row's delta."""
    active = weights.adapters_are_active()
    blocks = epilogue_blocks("gate_up", x, weight, _rank(b, segments)) if active and own_kernels else None
    if blocks is not None:
        shrunk = _kernels().lora_row_shrink.row_shrink(x, a, b, index, segments)
        return _kernels().skinny_gemm.skinny_gate_up(x, weight, blocks, lora=shrunk)
    gate_up = (linear_impl if own_kernels else F.linear)(x, weight, None)
    if active:
        weights.add_delta(gate_up, x, a, b, index, segments)
    if not (own_kernels and on_triton_device(gate_up)):
        gate, up = gate_up.chunk(2, dim=-1)
        return F.silu(gate) * up
    hidden = gate_up.new_empty((gate_up.shape[0], weight.shape[0] // 2))
    _kernels().gemv.launch_silu_mul(gate_up, hidden)
    return hidden


def lora_add_rmsnorm_linear_impl(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                                 weight: torch.Tensor, bias: torch.Tensor | None, a: torch.Tensor, b: torch.Tensor,
                                 index: torch.Tensor, segments: list[int],
                                 own_kernels: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """h = x + residual; (lora_linear(rmsnorm(h) * norm_weight, ...), h): the add-norm and the shrink in one
    launch, then the projection with the expand in its epilogue, where both kernels apply."""
    shrunk = _norm_and_shrink(x, residual, norm_weight, eps, weight, a, b, index, segments, own_kernels, "linear")
    if shrunk is not None:
        normed, h, lora, blocks = shrunk
        return _kernels().skinny_gemm.skinny_gemm(normed, weight, bias, blocks, lora=lora), h
    normed, h = _add_norm(x, residual, norm_weight, eps, own_kernels)
    return lora_linear_impl(normed, weight, bias, a, b, index, segments, own_kernels), h


def lora_add_rmsnorm_gate_up_impl(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                                  weight: torch.Tensor, a: torch.Tensor, b: torch.Tensor, index: torch.Tensor,
                                  segments: list[int], own_kernels: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """h = x + residual; (lora_gate_up(rmsnorm(h) * norm_weight, ...), h), as lora_add_rmsnorm_linear."""
    shrunk = _norm_and_shrink(x, residual, norm_weight, eps, weight, a, b, index, segments, own_kernels, "gate_up")
    if shrunk is not None:
        normed, h, lora, blocks = shrunk
        return _kernels().skinny_gemm.skinny_gate_up(normed, weight, blocks, lora=lora), h
    normed, h = _add_norm(x, residual, norm_weight, eps, own_kernels)
    return lora_gate_up_impl(normed, weight, a, b, index, segments, own_kernels), h


def _norm_and_shrink(x, residual, norm_weight, eps, weight, a, b, index, segments, own_kernels, op):
    """(normed, h, the shrunk input, the GEMM's blocks) from one add-norm + shrink launch, or None where that
    path does not apply (adapters inactive, not graphbench's kernels, no epilogue for these rows)."""
    if not (own_kernels and weights.adapters_are_active() and add_norm_kernel_applies(x, residual, norm_weight)):
        return None
    blocks = epilogue_blocks(op, x, weight, _rank(b, segments))
    if blocks is None:
        return None
    normed, h = torch.empty_like(x), torch.empty_like(x)
    lora = _kernels().lora_row_shrink.add_rmsnorm_shrink(x, residual, norm_weight, eps, normed, h, a, b, index,
                                                          segments)
    return normed, h, lora, blocks


def _rank(b: torch.Tensor, segments: list[int]) -> int:
    """The delta's rank columns a segment (B [L, N, R'], block-diagonal over the segments)."""
    return b.shape[2] // len(segments)


def _add_norm(x, residual, norm_weight, eps, own_kernels):
    if own_kernels:
        from graphbench.runner.norms import add_rmsnorm_impl  # (norms imports linear, as this module does)

        return add_rmsnorm_impl(x, residual, norm_weight, eps)
    return add_rmsnorm_torch(x, residual, norm_weight, eps)


def _lora_linear_fake(x, weight, bias, a, b, index, segments, own_kernels):
    return x.new_empty((x.shape[0], weight.shape[0]))


def _lora_add_rmsnorm_linear_fake(x, residual, norm_weight, eps, weight, bias, a, b, index, segments, own_kernels):
    return x.new_empty((x.shape[0], weight.shape[0])), torch.empty_like(x)


def _lora_add_rmsnorm_gate_up_fake(x, residual, norm_weight, eps, weight, a, b, index, segments, own_kernels):
    return x.new_empty((x.shape[0], weight.shape[0] // 2)), torch.empty_like(x)


# opaque to the compiler: the kernels are picked when the op runs (and so when each size is recorded)
lora_linear = register_op("graphbench::lora_linear", lora_linear_impl, _lora_linear_fake)
lora_add_rmsnorm_linear = register_op("graphbench::lora_add_rmsnorm_linear", lora_add_rmsnorm_linear_impl,
                                      _lora_add_rmsnorm_linear_fake)
lora_add_rmsnorm_gate_up = register_op("graphbench::lora_add_rmsnorm_gate_up", lora_add_rmsnorm_gate_up_impl,
                                       _lora_add_rmsnorm_gate_up_fake)
