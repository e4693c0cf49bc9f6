"""A Triton matrix-vector kernel for decode-sized linear layers (M <= 16 rows), not wired in yet.

On the H200 the small decode projections run well under the copy bandwidth in cuBLAS (o_proj
8.4 MB at 1.5 TB/s, qkv 12.6 MB at 2.1 TB/s: bench/RESULTS.md, session 2). This kernel streams
each weight row block once, BLOCK_N output features per program, K in BLOCK_K steps, the M <= 16
input rows padded to one tensor-core tile. `bench/gemv.py` measures it against torch's matmul for
the llama shapes; if it wins there, the model's projections can call it for decode steps.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

MAX_ROWS = 16


@triton.jit
def _gemv_step(acc, x_ptr, w_ptr, k0, offs_m, offs_n, offs_k, m_ok, n_ok, K, stride_xm, stride_wn):
    k = k0 + offs_k
    k_ok = k < K
    x = tl.load(x_ptr + offs_m[:, None] * stride_xm + k[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)
    w = tl.load(w_ptr + offs_n[:, None] * stride_wn + k[None, :], mask=n_ok[:, None] & k_ok[None, :], other=0.0)
    return acc + tl.sum(x[:, None, :].to(tl.float32) * w[None, :, :].to(tl.float32), axis=2)


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, y_ptr, M, N, K, stride_xm, stride_wn, stride_ym,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, INTERPRET: tl.constexpr):
    pid = tl.program_id(0)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    n_ok = offs_n < N
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    if INTERPRET:  # numpy >= 2.4 cannot turn the interpreter's 1-element scalars into range bounds
        k0 = 0
        while k0 < K:
            acc = _gemv_step(acc, x_ptr, w_ptr, k0, offs_m, offs_n, offs_k, m_ok, n_ok, K, stride_xm, stride_wn)
            k0 += BLOCK_K
    else:
        for k0 in range(0, K, BLOCK_K):
            acc = _gemv_step(acc, x_ptr, w_ptr, k0, offs_m, offs_n, offs_k, m_ok, n_ok, K, stride_xm, stride_wn)
    tl.store(y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=m_ok[:, None] & n_ok[None, :])


def gemv(x: torch.Tensor, weight: torch.Tensor, block_n: int = 16, block_k: int = 128,
         num_warps: int = 4, num_stages: int = 3) -> torch.Tensor:
    """x[M, K] @ weight[N, K].T -> [M, N] in x's dtype, for M <= 16 (decode steps)."""
    num_rows, k = x.shape
    n, k_w = weight.shape
    assert k == k_w and num_rows <= MAX_ROWS, "gemv: x[M <= 16, K] and weight[N, K]"
    assert x.stride(-1) == 1 and weight.stride(-1) == 1
    y = torch.empty((num_rows, n), dtype=x.dtype, device=x.device)
    block_m = max(1, triton.next_power_of_2(num_rows))
    _gemv_kernel[(triton.cdiv(n, block_n),)](
        x, weight, y, num_rows, n, k, x.stride(0), weight.stride(0), y.stride(0),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        INTERPRET=os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"), num_warps=num_warps, num_stages=num_stages)
    return y
