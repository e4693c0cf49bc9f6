"""The Triton kernel behind runner/linear.py's one-row GEMV: y[n] = sum_k x[k] * w[n, k] (+ b[n]).

A program owns BLOCK_N output rows and streams them along K in BLOCK_K steps, keeping a
[BLOCK_N, BLOCK_K] float32 partial sum that is reduced once at the end (no reduction inside the
loop). Many small programs keep enough loads in flight for the weight stream to run near the copy
bandwidth; the caller picks the blocks per shape.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _gemv_step(acc, x_ptr, w_ptr, k0, offs_n, offs_k, n_ok, stride_wn):
    w = tl.load(w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + (k0 + offs_k)[None, :], mask=n_ok[:, None],
                other=0.0)
    x = tl.load(x_ptr + k0 + offs_k)
    return acc + w.to(tl.float32) * x.to(tl.float32)[None, :]


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, K, stride_wn,
                 HAS_BIAS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, INTERPRET: tl.constexpr):
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < N
    offs_k = tl.arange(0, BLOCK_K)  # K % BLOCK_K == 0: no mask along K
    acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    if INTERPRET:  # numpy >= 2.4 cannot turn the interpreter's 1-element scalars into range bounds
        k0 = 0
        while k0 < K:
            acc = _gemv_step(acc, x_ptr, w_ptr, k0, offs_n, offs_k, n_ok, stride_wn)
            k0 += BLOCK_K
    else:
        for k0 in range(0, K, BLOCK_K):
            acc = _gemv_step(acc, x_ptr, w_ptr, k0, offs_n, offs_k, n_ok, stride_wn)
    y = tl.sum(acc, axis=1)
    if HAS_BIAS:
        y += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs_n, y.to(y_ptr.dtype.element_ty), mask=n_ok)


def launch_gemv(x: torch.Tensor,  # [1, K], contiguous
                weight: torch.Tensor,  # [N, K], unit stride along K
                bias: torch.Tensor | None,  # [N] or None
                out: torch.Tensor,  # [1, N]
                block_n: int, block_k: int, num_warps: int, *, interpret: bool = False) -> None:
    """out = x @ weight.T (+ bias); K must be a multiple of block_k."""
    n, k = weight.shape
    assert k % block_k == 0 and x.shape == (1, k) and out.shape == (1, n)
    _gemv_kernel[(triton.cdiv(n, block_n),)](
        x, weight, bias if bias is not None else out, out, n, k, weight.stride(0),
        HAS_BIAS=bias is not None, BLOCK_N=block_n, BLOCK_K=block_k, INTERPRET=interpret,
        num_warps=num_warps, num_stages=1)
