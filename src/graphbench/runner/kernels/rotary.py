"""Rotary position embedding (neox / rotate-half layout) of a step's q and k heads in one Triton launch.

The uniform-decode attention kernel rotates q and the new k itself as it loads them
(paged_decode.py, `rotary=`); every other batch (prefill, mixed, speculative verification) goes
through this kernel first. Both compute in float32 from the model-dtype cos/sin table and round once,
as Inductor's fused kernel for `RotaryEmbedding.forward` did when rotary ran inside the compiled piece.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.util import next_power_of_2


@triton.jit
def rotary_cos_sin(cs_row_ptr, offs_d, d_ok, HEAD_DIM: tl.constexpr):
    """(cos, signed sin) [BLOCK_D] in float32 for one position's table row (cos of each half, then sin of
    each half): rotated = x * cos + x[partner] * signed sin (partner_offsets)."""
    HALF: tl.constexpr = HEAD_DIM // 2
    first = offs_d < HALF
    j = tl.where(first, offs_d, offs_d - HALF)
    cos = tl.load(cs_row_ptr + j, mask=d_ok, other=0.0).to(tl.float32)
    sin = tl.load(cs_row_ptr + HALF + j, mask=d_ok, other=0.0).to(tl.float32)
    # first half: x1 * cos - x2 * sin; second half: x2 * cos + x1 * sin
    return cos, tl.where(first, -sin, sin)


@triton.jit
def partner_offsets(offs_d, HEAD_DIM: tl.constexpr):
    """Each element's index in the other half of its head (the rotate-half partner)."""
    HALF: tl.constexpr = HEAD_DIM // 2
    return tl.where(offs_d < HALF, offs_d + HALF, offs_d - HALF)


@triton.jit
def _rotary_qk_kernel(q_ptr, k_ptr, q_out_ptr, k_out_ptr, pos_ptr, cs_ptr, num_heads, num_kv_heads,
                      stride_qt, stride_qh, stride_kt, stride_kh, stride_cs,
                      HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, PDL: tl.constexpr = False):
    token = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)  # q heads first, then k heads
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    partner = partner_offsets(offs_d, HEAD_DIM)
    pdl_enter(PDL)
    cs_row = cs_ptr + tl.maximum(tl.load(pos_ptr + token), 0).to(tl.int64) * stride_cs  # (never before the table)
    cos, sin = rotary_cos_sin(cs_row, offs_d, d_ok, HEAD_DIM)
    if head < num_heads:
        row = q_ptr + token * stride_qt + head * stride_qh
        rot = rotated_row(row, offs_d, partner, d_ok, cos, sin)
        tl.store(q_out_ptr + (token * num_heads + head) * HEAD_DIM + offs_d,
                 rot.to(q_out_ptr.dtype.element_ty), mask=d_ok)
    else:
        kv_head = head - num_heads
        row = k_ptr + token * stride_kt + kv_head * stride_kh
        rot = rotated_row(row, offs_d, partner, d_ok, cos, sin)
        tl.store(k_out_ptr + (token * num_kv_heads + kv_head) * HEAD_DIM + offs_d,
                 rot.to(k_out_ptr.dtype.element_ty), mask=d_ok)


def rotary_qk(q: torch.Tensor,  # [T, heads, hd], unit stride along hd (a view of the qkv output)
              k: torch.Tensor,  # [T, kv heads, hd], the same
              positions: torch.Tensor,  # [T] integer
              cos_sin: torch.Tensor,  # [max_positions, 1, hd]: cos of each half, then sin of each half
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """(rotated q, rotated k), new contiguous tensors in q's dtype."""
    num_tokens, num_heads, head_dim = q.shape
    num_kv_heads = k.shape[1]
    assert head_dim % 2 == 0 and q.stride(-1) == 1 and k.stride(-1) == 1 and cos_sin.shape[-1] == head_dim
    q_out = torch.empty((num_tokens, num_heads, head_dim), dtype=q.dtype, device=q.device)
    k_out = torch.empty((num_tokens, num_kv_heads, head_dim), dtype=k.dtype, device=k.device)
    if num_tokens:
        _rotary_launch[(num_tokens, num_heads + num_kv_heads)](
            q, k, q_out, k_out, positions, cos_sin, num_heads, num_kv_heads,
            q.stride(0), q.stride(1), k.stride(0), k.stride(1), cos_sin.stride(0),
            HEAD_DIM=head_dim, BLOCK_D=max(16, next_power_of_2(head_dim)), num_warps=1, **pdl_arguments(q))
    return q_out, k_out


@triton.jit
def rotated_row(row_ptr, offs_d, partner, mask, cos, sin):
    """The rows at row_ptr + offs_d rotated, in float32 (cos, sin: rotary_cos_sin's, broadcast like offs_d)."""
    x = tl.load(row_ptr + offs_d, mask=mask, other=0.0).to(tl.float32)
    return x * cos + tl.load(row_ptr + partner, mask=mask, other=0.0).to(tl.float32) * sin


# launched through kernels/launch.py (a cached direct launch)
_rotary_launch = DirectLauncher(_rotary_qk_kernel)
