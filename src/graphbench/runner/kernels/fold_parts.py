"""The residual add + RMSNorm between two projections, split across their kernels (runner/residual_fold.py):
the first projection's epilogue adds the residual, stores h and leaves each row's 1 / rms of h; the second
normalises its input tiles of h as it loads them. The layer then launches no add-norm kernel.

The rounding is the add-norm kernel's (kernels/add_rmsnorm.py): h = the projection's output rounded, plus the
residual, rounded; normed = (h * rstd) rounded, times the norm weight, rounded. Only rstd's float32 sum runs in
another order: per column block of the first projection, then the blocks in order (fixed, so a replay equals
its eager run bit for bit).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def add_residual(acc, res_ptr, offs, mask, dtype):
    """h = acc rounded to dtype + the residual at offs, rounded."""
    r = tl.load(res_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    return (acc.to(dtype).to(tl.float32) + r).to(dtype)


@triton.jit
def publish_rstd(h, ssq_ptr, count_ptr, rstd_ptr, block, offs_m, m_ok, N, eps, NUM_BLOCKS: tl.constexpr,
                 ROWS_STRIDE: tl.constexpr):
    """Each column block stores its rows' sums of squares of h ([BLOCK_M, BLOCK_N], zeros past N), and the last
    block to finish (an atomic count, as the skinny GEMM's splits count) sums them in block order and stores
    rstd = 1 / sqrt(mean + eps) per row, then zeroes the count for the next launch."""
    hf = h.to(tl.float32)
    tl.store(ssq_ptr + block * ROWS_STRIDE + offs_m, tl.sum(hf * hf, axis=1), mask=m_ok)
    tl.debug_barrier()  # every thread's stores come before the release of the count
    done = tl.atomic_add(count_ptr, 1, sem="acq_rel", scope="gpu")
    tl.debug_barrier()
    if done == NUM_BLOCKS - 1:
        total = tl.zeros(offs_m.shape, dtype=tl.float32)
        for b in range(NUM_BLOCKS):
            # .cg: from L2, where the other programs' stores are
            total += tl.load(ssq_ptr + b * ROWS_STRIDE + offs_m, mask=m_ok, other=0.0, cache_modifier=".cg")
        tl.store(rstd_ptr + offs_m, 1.0 / tl.sqrt(total / N + eps), mask=m_ok)
        tl.atomic_xchg(count_ptr, 0, sem="relaxed", scope="gpu")


@triton.jit
def normed_tile(x, rstd, nw_ptr, k0, offs_k):
    """x: [BLOCK_M, BLOCK_K] of h at columns k0 + offs_k; rstd [BLOCK_M] -> the add-norm kernel's normed tile."""
    nw = tl.load(nw_ptr + k0 + offs_k).to(tl.float32)
    return ((x.to(tl.float32) * rstd[:, None]).to(x.dtype).to(tl.float32) * nw[None, :]).to(x.dtype)
