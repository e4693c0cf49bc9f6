"""The Triton kernels that put a decoder layer's residual add + RMSNorm in front of a projection.

`add_rmsnorm`: one program per row, writing h = x + residual (the next residual) and the normalised row
for the matmul that follows (what Inductor would fuse); its rounding follows the eager model exactly.
`embed_rmsnorm`: the same for the first layer, whose row is a token's embedding (no residual yet).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.util import next_power_of_2


@triton.jit
def _add_rmsnorm_kernel(x_ptr, r_ptr, nw_ptr, out_ptr, h_ptr, K, stride_x, stride_r, eps, BLOCK: tl.constexpr,
                        PDL: tl.constexpr = False):
    row = tl.program_id(0).to(tl.int64)
    dtype = x_ptr.dtype.element_ty
    offs = tl.arange(0, BLOCK)
    ok = offs < K
    # the norm weight and the residual load before the PDL wait (see launch_add_rmsnorm)
    nw = tl.load(nw_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * stride_r + offs, mask=ok, other=0.0).to(tl.float32)
    pdl_enter(PDL)
    h = tl.load(x_ptr + row * stride_x + offs, mask=ok, other=0.0).to(tl.float32)
    h += r
    h = h.to(dtype).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / K + eps)
    hn = (h * rstd).to(dtype).to(tl.float32) * nw
    tl.store(h_ptr + row * K + offs, h.to(dtype), mask=ok)
    tl.store(out_ptr + row * K + offs, hn.to(dtype), mask=ok)


def launch_add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                       out: torch.Tensor, h_out: torch.Tensor) -> None:
    """h_out = x + residual, out = rmsnorm(h_out) * norm_weight, row by row ([T, K], unit stride in K).
    x is the previous kernel's output; residual must not be. Under PDL the norm weight and the residual
    load before the kernel waits for the one before it (as decode attention loads its metadata). No
    kernel writes a norm weight; the residual comes from a kernel at least two back (the layer's previous
    add-norm, or the embedding): the one in between passed its own wait, so that kernel had completed,
    before it let this one start (pdl.py's chain). -O2 decode step, llama-3.2-1b, H200, batch 1 / 64:
    0.900 / 1.168 ms against 0.911 / 1.194 loading after the wait (benchmarks/RESULTS.md, 2026-12-02, 75f66f9)."""
    rows, k = x.shape
    if rows:
        block = next_power_of_2(k)
        _add_rmsnorm_launch[(rows,)](x, residual, norm_weight, out, h_out, k, x.stride(0), residual.stride(0), eps,
                                     BLOCK=block, num_warps=8 if block >= 4096 else 4,
                                     **pdl_arguments(out))


@triton.jit
def _embed_rmsnorm_kernel(ids_ptr, table_ptr, nw_ptr, out_ptr, x_ptr, K, stride_t, eps, BLOCK: tl.constexpr,
                          PDL: tl.constexpr = False):
    pdl_enter(PDL)
    row = tl.program_id(0).to(tl.int64)
    dtype = table_ptr.dtype.element_ty
    offs = tl.arange(0, BLOCK)
    ok = offs < K
    token = tl.load(ids_ptr + row).to(tl.int64)
    x = tl.load(table_ptr + token * stride_t + offs, mask=ok, other=0.0)
    xf = x.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(xf * xf, axis=0) / K + eps)
    xn = (xf * rstd).to(dtype).to(tl.float32) * tl.load(nw_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    tl.store(x_ptr + row * K + offs, x, mask=ok)
    tl.store(out_ptr + row * K + offs, xn.to(dtype), mask=ok)


def launch_embed_rmsnorm(input_ids: torch.Tensor, table: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                         out: torch.Tensor, x_out: torch.Tensor) -> None:
    """x_out = table[input_ids], out = rmsnorm(x_out) * norm_weight, row by row (ids [T]; table [V, K],
    unit stride in K; out, x_out [T, K] contiguous)."""
    rows, k = input_ids.shape[0], table.shape[1]
    if rows:
        block = next_power_of_2(k)
        _embed_rmsnorm_launch[(rows,)](input_ids, table, norm_weight, out, x_out, k, table.stride(0), eps,
                                       BLOCK=block, num_warps=8 if block >= 4096 else 4, **pdl_arguments(out))


# launched through kernels/launch.py (a cached direct launch)
_add_rmsnorm_launch = DirectLauncher(_add_rmsnorm_kernel)
_embed_rmsnorm_launch = DirectLauncher(_embed_rmsnorm_kernel)
