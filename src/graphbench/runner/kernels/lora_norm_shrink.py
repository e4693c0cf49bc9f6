"""The residual add + RMSNorm and LoRA's shrink of its output in one launch: the normed row is in the program's
registers, so qkv's and gate/up's shrink needs no launch of its own (runner/lora/projection.py); the projection
after it adds the delta in its epilogue (kernels/skinny_gemm.py) from the ShrunkInput this returns."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.lora_bgmv import ShrunkInput
from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.util import cdiv, next_power_of_2


@triton.jit
def _add_rmsnorm_shrink_kernel(x_ptr, r_ptr, nw_ptr, out_ptr, h_ptr, a_ptr, idx_ptr, v_ptr, T, K, R, stride_x,
                               stride_r, stride_al, stride_ar, eps, BLOCK: tl.constexpr, BLOCK_R: tl.constexpr,
                               PDL: tl.constexpr = False):
    """Program (row, j): the row's residual add + RMSNorm as kernels/add_rmsnorm.py computes it (program j = 0
    stores h and the normalised row), then BLOCK_R columns j of the row's shrink, normed . A[idx, r]. The
    adapter index and its A tile load before the PDL wait: the adapters were written before the graph started,
    the step's inputs by its first kernel, never the one just before this (kernels/pdl.py)."""
    row = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1)
    dtype = x_ptr.dtype.element_ty
    offs = tl.arange(0, BLOCK)
    ok = offs < K
    offs_r = j * BLOCK_R + tl.arange(0, BLOCK_R)
    r_ok = offs_r < R
    nw = tl.load(nw_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    res = tl.load(r_ptr + row * stride_r + offs, mask=ok, other=0.0).to(tl.float32)
    idx = tl.load(idx_ptr + row + tl.zeros([BLOCK_R], dtype=tl.int64))  # [BLOCK_R], all the row's adapter
    a_ok = r_ok & (idx >= 0)
    a_rows = a_ptr + tl.maximum(idx, 0).to(tl.int64)[:, None] * stride_al + offs_r[:, None] * stride_ar
    a = tl.load(a_rows + offs[None, :], mask=a_ok[:, None] & ok[None, :], other=0.0)  # [BLOCK_R, BLOCK]
    pdl_enter(PDL)
    h = tl.load(x_ptr + row * stride_x + offs, mask=ok, other=0.0).to(tl.float32) + res
    h = h.to(dtype).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / K + eps)
    hn = ((h * rstd).to(dtype).to(tl.float32) * nw).to(dtype)
    if j == 0:
        tl.store(h_ptr + row * K + offs, h.to(dtype), mask=ok)
        tl.store(out_ptr + row * K + offs, hn, mask=ok)
    v = tl.sum(a.to(tl.float32) * hn.to(tl.float32)[None, :], axis=1)  # [BLOCK_R]; 0 without an adapter
    tl.store(v_ptr + row * R + offs_r, v, mask=r_ok)


def add_rmsnorm_shrink(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                       out: torch.Tensor, h_out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, index: torch.Tensor,
                       segments: list[int]) -> ShrunkInput:
    """The residual add + RMSNorm (out, h_out as kernels/add_rmsnorm.launch_add_rmsnorm writes them) and the
    shrink of its output, normed A[idx]^T, in one launch: what the projection after it expands in its
    epilogue (lora_shrink's result). x, residual, out, h_out [T, K] contiguous."""
    t, k = x.shape
    r = a.shape[1]
    assert a.shape[2] == k and a.shape[0] == b.shape[0] and b.shape[2] == r and index.shape == (t,) and t > 0
    assert a.is_contiguous() and b.is_contiguous() and out.shape == h_out.shape == x.shape == residual.shape
    assert x.is_contiguous() and residual.is_contiguous() and out.is_contiguous() and h_out.is_contiguous()
    block = next_power_of_2(k)
    block_r = max(1, min(16, 16384 // block, next_power_of_2(r)))  # at most 16384 values of A a program
    v = torch.empty((t, r), dtype=torch.float32, device=x.device)
    _norm_shrink_launch[(t, cdiv(r, block_r))](
        x, residual, norm_weight, out, h_out, a, index, v, t, k, r, x.stride(0), residual.stride(0), a.stride(0),
        a.stride(1), eps, BLOCK=block, BLOCK_R=block_r, num_warps=8 if block * block_r >= 16384 else 4,
        **pdl_arguments(out))
    return ShrunkInput(v, b, index, segments, x.dtype)


# launched through kernels/launch.py (a cached direct launch)
_norm_shrink_launch = DirectLauncher(_add_rmsnorm_shrink_kernel)
