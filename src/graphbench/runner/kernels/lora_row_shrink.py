"""LoRA's shrink one row a program: program (row, j) computes BLOCK_R rank columns of x[row] . A[idx[row]]^T
over the whole K, in float32 without tensor cores. No split of K, so no partials to sum and no count to
take; the row's A tile loads before the PDL wait (the adapters were written before the graph started, the
step's inputs by its first kernel, never the one just before this: kernels/pdl.py), so under PDL only x's
row is loaded after the previous kernel ends. A row's cost does not depend on which adapter it uses: four
adapters in a batch cost what one does.

Two launches: the shrink alone (o's and down's inputs, at the 2..64 rows whose projection adds the delta in
its epilogue: runner/lora/projection.py), and the residual add + RMSNorm with the shrink of its output (qkv's
and gate/up's: the normed row is in the program's registers, so that shrink needs no launch of its own)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.lora_blocks import ShrunkInput
from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.util import cdiv, next_power_of_2


@triton.jit
def _adapter_tile(a_ptr, idx_ptr, row, K, R, stride_al, stride_ar, BLOCK: tl.constexpr, BLOCK_R: tl.constexpr):
    """(A[idx[row], j's BLOCK_R rank rows, :K] [BLOCK_R, BLOCK], zeros past K and without an adapter; the rank
    rows' offsets; which of them are < R)."""
    offs = tl.arange(0, BLOCK)
    offs_r = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
    r_ok = offs_r < R
    idx = tl.load(idx_ptr + row + tl.zeros([BLOCK_R], dtype=tl.int64))  # [BLOCK_R], all the row's adapter
    a_ok = r_ok & (idx >= 0)
    a_rows = a_ptr + tl.maximum(idx, 0).to(tl.int64)[:, None] * stride_al + offs_r[:, None] * stride_ar
    return tl.load(a_rows + offs[None, :], mask=a_ok[:, None] & (offs < K)[None, :], other=0.0), offs_r, r_ok


@triton.jit
def _row_shrink_kernel(x_ptr, a_ptr, idx_ptr, v_ptr, K, R, stride_x, stride_al, stride_ar, BLOCK: tl.constexpr,
                       BLOCK_R: tl.constexpr, PDL: tl.constexpr = False):
    row = tl.program_id(0).to(tl.int64)
    a, offs_r, r_ok = _adapter_tile(a_ptr, idx_ptr, row, K, R, stride_al, stride_ar, BLOCK, BLOCK_R)
    pdl_enter(PDL)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride_x + offs, mask=offs < K, other=0.0).to(tl.float32)
    v = tl.sum(a.to(tl.float32) * x[None, :], axis=1)  # [BLOCK_R]; 0 without an adapter
    tl.store(v_ptr + row * R + offs_r, v, mask=r_ok)


@triton.jit
def _add_rmsnorm_shrink_kernel(x_ptr, r_ptr, nw_ptr, out_ptr, h_ptr, a_ptr, idx_ptr, v_ptr, T, K, R, stride_x,
                               stride_r, stride_al, stride_ar, eps, BLOCK: tl.constexpr, BLOCK_R: tl.constexpr,
                               PDL: tl.constexpr = False):
    """Program (row, j): the row's residual add + RMSNorm as kernels/add_rmsnorm.py computes it (program j = 0
    stores h and the normalised row), then the row shrink's BLOCK_R columns j of normed . A[idx]."""
    row = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1)
    dtype = x_ptr.dtype.element_ty
    offs = tl.arange(0, BLOCK)
    ok = offs < K
    nw = tl.load(nw_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    res = tl.load(r_ptr + row * stride_r + offs, mask=ok, other=0.0).to(tl.float32)
    a, offs_r, r_ok = _adapter_tile(a_ptr, idx_ptr, row, K, R, stride_al, stride_ar, BLOCK, BLOCK_R)
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


def row_blocks(k: int, r: int) -> dict:
    """BLOCK (the whole row), BLOCK_R (at most 16384 values of A a program) and the warps: 8 where a program
    holds 16384 values (4 spilled nothing below)."""
    block = next_power_of_2(k)
    block_r = max(1, min(16, 16384 // block, next_power_of_2(r)))
    return {"BLOCK": block, "BLOCK_R": block_r, "num_warps": 8 if block * block_r >= 16384 else 4}


def row_shrink(x: torch.Tensor,  # [T, K], unit stride along K
               a: torch.Tensor, b: torch.Tensor, index: torch.Tensor, segments: list[int]) -> ShrunkInput:
    """v = x A[idx]^T in one launch of T x R' / BLOCK_R programs: lora_shrink.lora_shrink's result, summed in
    another order (float32 without tensor cores)."""
    t, k = x.shape
    r = b.shape[2]
    assert a.shape[1:] == (r, k) and a.shape[0] == b.shape[0] and index.shape == (t,) and t > 0
    assert x.stride(1) == 1 and a.is_contiguous() and b.is_contiguous()
    cfg = row_blocks(k, r)
    v = torch.empty((t, r), dtype=torch.float32, device=x.device)
    _row_shrink_launch[(t, cdiv(r, cfg["BLOCK_R"]))](x, a, index, v, k, r, x.stride(0), a.stride(0), a.stride(1),
                                                     **cfg, **pdl_arguments(x))
    return ShrunkInput(v, b, index, segments, x.dtype)


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
    cfg = row_blocks(k, r)
    v = torch.empty((t, r), dtype=torch.float32, device=x.device)
    _norm_shrink_launch[(t, cdiv(r, cfg["BLOCK_R"]))](
        x, residual, norm_weight, out, h_out, a, index, v, t, k, r, x.stride(0), residual.stride(0), a.stride(0),
        a.stride(1), eps, **cfg, **pdl_arguments(out))
    return ShrunkInput(v, b, index, segments, x.dtype)


# launched through kernels/launch.py (a cached direct launch)
_row_shrink_launch = DirectLauncher(_row_shrink_kernel)
_norm_shrink_launch = DirectLauncher(_add_rmsnorm_shrink_kernel)
