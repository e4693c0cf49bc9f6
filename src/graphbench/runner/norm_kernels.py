"""Triton kernels that fold a decoder layer's residual add + RMSNorm into the projection after it.

`norm_gemv`: one row. h = x + residual, then (rmsnorm(h) * norm_weight) @ W.T in one pass: every
program streams its BLOCK_N rows of W against h * norm_weight while summing h^2 (the row is a few KB
and stays in L2), and scales its dot products by rstd at the end; program 0 also writes h, the next
residual. (The first version summed h^2 in a first pass, which holds every program's weight loads
behind a reduction; with it llama-3.1-8b's batch-1 step measured 5.01 ms, against 4.28 ms before the
fusion: session 5, bench/RESULTS.md.) The add rounds to the model's dtype as in the
eager model; the normalised row is not rounded (the product stays in float32).
`add_rmsnorm`: several rows, one program per row, writing h and the normalised row for the matmul
that follows (what Inductor would fuse); its rounding follows the eager model exactly.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.device import cdiv, next_power_of_2
from graphbench.runner.launch import DirectLauncher
from graphbench.runner.pdl import pdl_arguments, pdl_enter


@triton.jit
def _residual_chunk(x_ptr, r_ptr, k0, offs_k):
    h = tl.load(x_ptr + k0 + offs_k).to(tl.float32) + tl.load(r_ptr + k0 + offs_k).to(tl.float32)
    return h.to(x_ptr.dtype.element_ty).to(tl.float32)  # the model adds in its dtype


@triton.jit
def _norm_gemv_step(acc, squares, x_ptr, r_ptr, nw_ptr, w_ptr, h_ptr, k0, offs_n, offs_k, n_ok, stride_wn, pid):
    """One K chunk: h = x + residual; squares += h^2; acc += W * (h * norm_weight) (rstd comes at the end)."""
    h = _residual_chunk(x_ptr, r_ptr, k0, offs_k)
    if pid == 0:  # one program writes the next residual
        tl.store(h_ptr + k0 + offs_k, h.to(x_ptr.dtype.element_ty))
    w = tl.load(w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + (k0 + offs_k)[None, :], mask=n_ok[:, None],
                other=0.0)
    hw = h * tl.load(nw_ptr + k0 + offs_k).to(tl.float32)
    return acc + w.to(tl.float32) * hw[None, :], squares + h * h


@triton.jit
def _norm_gemv_kernel(x_ptr, r_ptr, nw_ptr, w_ptr, b_ptr, y_ptr, h_ptr, N, K, stride_wn, eps,
                      HAS_BIAS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      INTERPRET: tl.constexpr):
    pid = tl.program_id(0)
    offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < N
    offs_k = tl.arange(0, BLOCK_K)  # K % BLOCK_K == 0
    squares = tl.zeros([BLOCK_K], dtype=tl.float32)
    acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    if INTERPRET:  # numpy >= 2.4 cannot turn the interpreter's 1-element scalars into range bounds
        k0 = 0
        while k0 < K:
            acc, squares = _norm_gemv_step(acc, squares, x_ptr, r_ptr, nw_ptr, w_ptr, h_ptr, k0, offs_n, offs_k,
                                           n_ok, stride_wn, pid)
            k0 += BLOCK_K
    else:
        for k0 in range(0, K, BLOCK_K):
            acc, squares = _norm_gemv_step(acc, squares, x_ptr, r_ptr, nw_ptr, w_ptr, h_ptr, k0, offs_n, offs_k,
                                           n_ok, stride_wn, pid)
    # rmsnorm scales the whole row by one number: applied to the dot products, not to each element
    rstd = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / K + eps)
    y = tl.sum(acc, axis=1) * rstd
    if HAS_BIAS:
        y += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs_n, y.to(x_ptr.dtype.element_ty), mask=n_ok)


def launch_norm_gemv(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                     weight: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor, h_out: torch.Tensor,
                     block_n: int, block_k: int, num_warps: int, *, interpret: bool = False) -> None:
    """out[1, N] = (rmsnorm(x + residual) * norm_weight) @ weight.T (+ bias); h_out[1, K] = x + residual."""
    n, k = weight.shape
    assert k % block_k == 0 and x.shape == residual.shape == h_out.shape == (1, k) and out.shape == (1, n)
    _norm_gemv_launch[(cdiv(n, block_n),)](
        x, residual, norm_weight, weight, bias if bias is not None else out, out, h_out, n, k, weight.stride(0), eps,
        HAS_BIAS=bias is not None, BLOCK_N=block_n, BLOCK_K=block_k, INTERPRET=interpret,
        num_warps=num_warps, num_stages=1)


@triton.jit
def _add_rmsnorm_kernel(x_ptr, r_ptr, nw_ptr, out_ptr, h_ptr, K, stride_x, stride_r, eps, BLOCK: tl.constexpr,
                        PDL: tl.constexpr = False):
    pdl_enter(PDL)
    row = tl.program_id(0).to(tl.int64)
    dtype = x_ptr.dtype.element_ty
    offs = tl.arange(0, BLOCK)
    ok = offs < K
    h = tl.load(x_ptr + row * stride_x + offs, mask=ok, other=0.0).to(tl.float32)
    h += tl.load(r_ptr + row * stride_r + offs, mask=ok, other=0.0).to(tl.float32)
    h = h.to(dtype).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / K + eps)
    hn = (h * rstd).to(dtype).to(tl.float32) * tl.load(nw_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    tl.store(h_ptr + row * K + offs, h.to(dtype), mask=ok)
    tl.store(out_ptr + row * K + offs, hn.to(dtype), mask=ok)


def launch_add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                       out: torch.Tensor, h_out: torch.Tensor) -> None:
    """h_out = x + residual, out = rmsnorm(h_out) * norm_weight, row by row ([T, K], unit stride in K)."""
    rows, k = x.shape
    if rows:
        block = next_power_of_2(k)
        _add_rmsnorm_launch[(rows,)](x, residual, norm_weight, out, h_out, k, x.stride(0), residual.stride(0), eps,
                                     BLOCK=block, num_warps=8 if block >= 4096 else 4, **pdl_arguments(out))


# launched through runner/launch.py (a cached direct launch unless GRAPHBENCH_DIRECT_LAUNCH=0)
_norm_gemv_launch = DirectLauncher(_norm_gemv_kernel)
_add_rmsnorm_launch = DirectLauncher(_add_rmsnorm_kernel)
