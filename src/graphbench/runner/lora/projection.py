"""A projection with its LoRA delta added, in as few launches as the step's rows allow.

At 2..64 rows on CUDA (a decode batch) the delta takes one launch beyond the projection's: the shrink x A^T
(runner/kernels/lora_bgmv.lora_shrink), then the skinny GEMM adds each row's x A^T B^T in its epilogue where
it stores the projection (kernels/skinny_gemm.py); gate/up's gated GEMM adds both deltas before the
activation, so no silu-mul launch either. A layer with adapters then launches 11 kernels where the
projection, the shrink and the expand-add apart took 16 (runner/model.py: norms, attention and the four
projections). Elsewhere (one row, more than 64, the CPU, the torch path of use_lora_kernel) the projection
runs as without adapters and the delta is added after it (lora/weights.lora_add's implementation).

The epilogue runs the skinny GEMM with start-up's measured blocks for the shape and row class; where
start-up chose cuBLAS there, with the skinny rule's blocks (a K tile of 128, or 64 where 128 does not divide
K), since cuBLAS has no epilogue to add the delta in. The result equals the projection + expand-add launches
bit for bit (tests/test_lora_kernel.py), and rows without an adapter get the projection alone.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from graphbench.runner import kernel_choice
from graphbench.runner.linear import linear_impl, on_triton_device
from graphbench.runner.lora import weights
from graphbench.runner.op_registry import register_op


@functools.cache
def _kernels():
    """The Triton modules, imported on first use (the CPU path never needs Triton)."""
    from graphbench.runner.kernels import gemv, lora_bgmv, skinny_gemm

    return gemv, lora_bgmv, skinny_gemm


def epilogue_blocks(op: str, x: torch.Tensor, weight: torch.Tensor) -> tuple[int, ...] | None:
    """The skinny GEMM's blocks for op ("linear" or "gate_up", the gated kernel) over x's rows, or None where
    the delta cannot be added in an epilogue (not 2..64 rows of a 16-bit CUDA tensor, no K tile fits)."""
    if not (x.is_cuda and on_triton_device(x) and weights.kernel_in_use()):
        return None
    if not _kernels()[2].skinny_applies(x, weight):
        return None
    (n, k), rows = weight.shape, x.shape[0]
    kind = "skinny" if op == "linear" else "gated_skinny"
    choice = kernel_choice.choice_for(op, n, k, rows, True)
    if choice.kernel == kind:
        return choice.blocks
    block_k = next((b for b in (kernel_choice.SKINNY_BLOCK_K, 64) if k % b == 0), None)
    if block_k is None:
        return None
    return (64, block_k, 1, 4, 4) if op == "linear" else (32, block_k, 4, 4)


def lora_linear_impl(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, a: torch.Tensor,
                     b: torch.Tensor, index: torch.Tensor, segments: list[int], own_kernels: bool) -> torch.Tensor:
    """x @ weight.T (+ bias) + each row's x A[idx]^T B[idx]^T (rows with idx -1: none; nothing at all while
    adapters are inactive). own_kernels False (config.model.kernels = torch): the projection is F.linear."""
    project = linear_impl if own_kernels else F.linear
    if not weights.adapters_are_active():
        return project(x, weight, bias)
    blocks = epilogue_blocks("linear", x, weight) if own_kernels else None
    if blocks is not None:
        shrunk = _kernels()[1].lora_shrink(x, a, b, index, segments)
        return _kernels()[2].skinny_gemm(x, weight, bias, blocks, lora=shrunk)
    out = project(x, weight, bias)
    weights.add_delta(out, x, a, b, index, segments)
    return out


def lora_gate_up_impl(x: torch.Tensor, weight: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                      index: torch.Tensor, segments: list[int], own_kernels: bool) -> torch.Tensor:
    """weight = [gate; up] [2I, K] -> silu(gate') * up' [T, I], where gate' and up' hold each row's delta."""
    active = weights.adapters_are_active()
    blocks = epilogue_blocks("gate_up", x, weight) if active and own_kernels else None
    if blocks is not None:
        shrunk = _kernels()[1].lora_shrink(x, a, b, index, segments)
        return _kernels()[2].skinny_gate_up(x, weight, blocks, lora=shrunk)
    gate_up = (linear_impl if own_kernels else F.linear)(x, weight, None)
    if active:
        weights.add_delta(gate_up, x, a, b, index, segments)
    if not (own_kernels and on_triton_device(gate_up)):
        gate, up = gate_up.chunk(2, dim=-1)
        return F.silu(gate) * up
    hidden = gate_up.new_empty((gate_up.shape[0], weight.shape[0] // 2))
    _kernels()[0].launch_silu_mul(gate_up, hidden)
    return hidden


def _lora_linear_fake(x, weight, bias, a, b, index, segments, own_kernels):
    return x.new_empty((x.shape[0], weight.shape[0]))


def _lora_gate_up_fake(x, weight, a, b, index, segments, own_kernels):
    return x.new_empty((x.shape[0], weight.shape[0] // 2))


# opaque to the compiler: the kernels are picked when the op runs (and so when each size is recorded)
lora_linear = register_op("graphbench::lora_linear", lora_linear_impl, _lora_linear_fake)
lora_gate_up = register_op("graphbench::lora_gate_up", lora_gate_up_impl, _lora_gate_up_fake)
