"""Triton kernel: scatter this step's new K/V rows into the paged KV cache.

CUDA-graph safe: one program per flat-batch row (grid = T, a shape), no host sync, no allocation.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.util import next_power_of_2


@triton.jit
def _write_kv_kernel(
    k_ptr, v_ptr, k_cache_ptr, v_cache_ptr, slot_ptr,
    stride_kt, stride_kh, stride_vt, stride_vh,
    stride_kcb, stride_kco, stride_kch, stride_vcb, stride_vco, stride_vch,
    NUM_KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0)
    slot = tl.load(slot_ptr + row).to(tl.int64)
    if slot < 0:  # padding row: write nothing
        return
    block = slot // BLOCK_SIZE
    offset = slot % BLOCK_SIZE
    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_h[:, None] < NUM_KV_HEADS) & (offs_d[None, :] < HEAD_DIM)
    row64 = row.to(tl.int64)

    k = tl.load(k_ptr + row64 * stride_kt + offs_h[:, None] * stride_kh + offs_d[None, :], mask=mask)
    dst = block * stride_kcb + offset * stride_kco + offs_h[:, None] * stride_kch + offs_d[None, :]
    tl.store(k_cache_ptr + dst, k.to(k_cache_ptr.dtype.element_ty), mask=mask)

    v = tl.load(v_ptr + row64 * stride_vt + offs_h[:, None] * stride_vh + offs_d[None, :], mask=mask)
    dst = block * stride_vcb + offset * stride_vco + offs_h[:, None] * stride_vch + offs_d[None, :]
    tl.store(v_cache_ptr + dst, v.to(v_cache_ptr.dtype.element_ty), mask=mask)


def write_kv_cache(
    k: torch.Tensor,  # [T, num_kv_heads, head_dim]
    v: torch.Tensor,  # [T, num_kv_heads, head_dim]
    k_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,  # [T] int64 (int32 also works); < 0 = padding row
) -> None:
    """k_cache.view(-1, kvh, hd)[slot_mapping[i]] = k[i] (same for v) for every row with slot >= 0."""
    num_tokens, num_kv_heads, head_dim = k.shape
    block_size = k_cache.shape[1]
    assert v.shape == k.shape and slot_mapping.shape[0] == num_tokens
    assert k_cache.shape[2:] == (num_kv_heads, head_dim) and v_cache.shape == k_cache.shape
    assert block_size & (block_size - 1) == 0, "block_size must be a power of two"
    for t in (k, v, k_cache, v_cache):
        assert t.stride(-1) == 1, "the head_dim axis must be contiguous"
    if num_tokens == 0:
        return
    block_d = next_power_of_2(head_dim)
    block_h = next_power_of_2(num_kv_heads)
    _write_kv_launch[(num_tokens,)](
        k, v, k_cache, v_cache, slot_mapping,
        k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        NUM_KV_HEADS=num_kv_heads, HEAD_DIM=head_dim,
        BLOCK_H=block_h, BLOCK_D=block_d, BLOCK_SIZE=block_size,
        num_warps=4 if block_h * block_d >= 1024 else 1,
    )


# launched through kernels/launch.py (a cached direct launch)
_write_kv_launch = DirectLauncher(_write_kv_kernel)
