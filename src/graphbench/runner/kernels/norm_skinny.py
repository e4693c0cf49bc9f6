"""The skinny GEMMs (2..64 rows) with the layer's residual add + RMSNorm in front, in one launch: a decode step
of a small model launches one kernel fewer per norm (two a decoder layer), for hidden sizes up to
MAX_K (SmolLM2's 576, qwen2.5-0.5b's 896), whose whole rows a program holds.

A program owns BLOCK_M rows and BLOCK_N output columns. Its weights, the whole of K in K's power-of-two pieces
(kernels/row_pieces.py), and the norm weight load before the PDL wait; after it, the rows' x and residual: h = x + residual,
rounded as the add-norm kernel rounds it, the row's 1 / rms, the normalised row (rounded as kernels/add_rmsnorm.py
stores it), then one tensor-core dot a piece. Every column block recomputes its rows' norm (from L2): what the
fold costs against the add-norm launch it saves. The K-loop form of this fold (the norm weight staged with the
weights) was 2-5x slower than the two launches at llama's K of 2048 and 4096 (benchmarks/RESULTS.md,
2026-12-03): hence whole rows only, and start-up times it against the two launches per shape and row class
(runner/norm_fold_timing.py), which run where it is not faster. Column block 0 of each row block stores its
rows' h (the next residual). The row's sum of squares is summed piece by piece, so its 1 / rms may differ from
the add-norm kernel's in the last bit (the dot's sums are in another order anyway)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.row_pieces import row_pieces
from graphbench.runner.kernels.util import cdiv, triton_interpreting

MAX_K = 896  # the widest row a program holds (K = 1024 spilled on sm_90 at every block size)


def norm_skinny_fits(m: int, k: int) -> bool:
    """2..64 rows of K <= MAX_K whose pieces are tensor-core tiles (at least 16 wide: K a multiple of 16)."""
    return 2 <= m <= 64 and 16 <= k <= MAX_K and k % 16 == 0


@triton.jit
def _w_piece(w_ptr, cols, n_ok, stride_wn, start, K, SIZE: tl.constexpr, MASKED: tl.constexpr):
    """w.T's rows start..start + SIZE of these columns: [SIZE, BLOCK_N] (zeros past K where MASKED). Not
    row_pieces.load_row_pieces: its [BLOCK_N, SIZE] tiles, transposed for the dot, spilled 200-1520 bytes on
    sm_90 at every K the candidates cover, where these spill none."""
    offs = start + tl.arange(0, SIZE)
    mask = n_ok[None, :]
    if MASKED:
        mask = mask & (offs < K)[:, None]
    return tl.load(w_ptr + cols[None, :].to(tl.int64) * stride_wn + offs[:, None], mask=mask, other=0.0)


@triton.jit
def _h_piece(x_ptr, r_ptr, h_ptr, offs_m, m_ok, store_m, stride_xm, stride_rm, stride_hm, start, K,
             SIZE: tl.constexpr, MASKED: tl.constexpr):
    """h = x + residual [BLOCK_M, SIZE] in float32 after rounding to the dtype (zeros past K and M); the rows
    store_m marks written to h."""
    dtype = x_ptr.dtype.element_ty
    offs = start + tl.arange(0, SIZE)
    mask = m_ok[:, None]
    if MASKED:
        mask = mask & (offs < K)[None, :]
    rows = offs_m[:, None].to(tl.int64)
    h = (tl.load(x_ptr + rows * stride_xm + offs[None, :], mask=mask, other=0.0).to(tl.float32)
         + tl.load(r_ptr + rows * stride_rm + offs[None, :], mask=mask, other=0.0).to(tl.float32)).to(dtype)
    if MASKED:
        store = store_m[:, None] & (offs < K)[None, :]
    else:
        store = store_m[:, None] & (offs >= 0)[None, :]
    tl.store(h_ptr + rows * stride_hm + offs[None, :], h, mask=store)
    return h.to(tl.float32)


@triton.jit
def _nw_piece(nw_ptr, start, K, SIZE: tl.constexpr, MASKED: tl.constexpr):
    """The norm weight's piece in float32 (zeros past K where MASKED)."""
    offs = start + tl.arange(0, SIZE)
    if MASKED:
        return tl.load(nw_ptr + offs, mask=offs < K, other=0.0).to(tl.float32)
    return tl.load(nw_ptr + offs).to(tl.float32)


@triton.jit
def _normed_dot(acc, h, rstd, nw, w, INTERPRET: tl.constexpr):
    """acc + the normalised piece (rounded as the add-norm kernel stores it; nw: _nw_piece's) . w."""
    dtype = w.dtype
    hn = ((h * rstd[:, None]).to(dtype).to(tl.float32) * nw[None, :]).to(dtype)
    if INTERPRET:  # the interpreter's tl.dot multiplies 16-bit floats' raw bits: do it in float32
        return tl.dot(hn.to(tl.float32), w.to(tl.float32), acc, input_precision="ieee")
    return tl.dot(hn, w, acc)


@triton.jit
def _norm_skinny_kernel(x_ptr, r_ptr, nw_ptr, h_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_rm, stride_hm,
                        stride_wn, stride_ym, eps, HAS_BIAS: tl.constexpr, GATED: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
                        INTERPRET: tl.constexpr, PDL: tl.constexpr = False):
    """y = normed @ w.T (+ b); GATED: y[:, j] = silu(normed . w[j]) * (normed . w[N + j]) (w = [gate; up]),
    both products rounded to y's dtype first, as the projection's store rounds them."""
    offs_m = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = offs_m < M
    n_ok = offs_n < N
    wa = _w_piece(w_ptr, offs_n, n_ok, stride_wn, 0, K, A, False)
    wb, wc, ua, ub, uc = wa, wa, wa, wa, wa  # (an absent piece: never read)
    if B > 0:
        wb = _w_piece(w_ptr, offs_n, n_ok, stride_wn, A, K, B, False)
    if C > 0:
        wc = _w_piece(w_ptr, offs_n, n_ok, stride_wn, A + B, K, C, True)
    if GATED:
        ua = _w_piece(w_ptr, offs_n + N, n_ok, stride_wn, 0, K, A, False)
        if B > 0:
            ub = _w_piece(w_ptr, offs_n + N, n_ok, stride_wn, A, K, B, False)
        if C > 0:
            uc = _w_piece(w_ptr, offs_n + N, n_ok, stride_wn, A + B, K, C, True)
    # the norm weight too: no kernel writes it (kernels/add_rmsnorm.py loads it before its wait as well)
    na = _nw_piece(nw_ptr, 0, K, A, False)
    nb, nc = na, na
    if B > 0:
        nb = _nw_piece(nw_ptr, A, K, B, False)
    if C > 0:
        nc = _nw_piece(nw_ptr, A + B, K, C, True)
    pdl_enter(PDL)
    store = m_ok & (offs_m * 0 + tl.program_id(0) == 0)  # [BLOCK_M]: column block 0 writes its rows' h
    ha = _h_piece(x_ptr, r_ptr, h_ptr, offs_m, m_ok, store, stride_xm, stride_rm, stride_hm, 0, K, A, False)
    squares = tl.sum(ha * ha, axis=1)
    hb, hc = ha, ha
    if B > 0:
        hb = _h_piece(x_ptr, r_ptr, h_ptr, offs_m, m_ok, store, stride_xm, stride_rm, stride_hm, A, K, B, False)
        squares += tl.sum(hb * hb, axis=1)
    if C > 0:
        hc = _h_piece(x_ptr, r_ptr, h_ptr, offs_m, m_ok, store, stride_xm, stride_rm, stride_hm, A + B, K, C, True)
        squares += tl.sum(hc * hc, axis=1)
    rstd = 1.0 / tl.sqrt(squares / K + eps)
    y = _normed_dot(tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32), ha, rstd, na, wa, INTERPRET)
    if B > 0:
        y = _normed_dot(y, hb, rstd, nb, wb, INTERPRET)
    if C > 0:
        y = _normed_dot(y, hc, rstd, nc, wc, INTERPRET)
    dtype = y_ptr.dtype.element_ty
    if GATED:
        u = _normed_dot(tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32), ha, rstd, na, ua, INTERPRET)
        if B > 0:
            u = _normed_dot(u, hb, rstd, nb, ub, INTERPRET)
        if C > 0:
            u = _normed_dot(u, hc, rstd, nc, uc, INTERPRET)
        g = y.to(dtype).to(tl.float32)
        y = g * tl.sigmoid(g) * u.to(dtype).to(tl.float32)
    elif HAS_BIAS:
        y += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    y_offs = offs_m[:, None].to(tl.int64) * stride_ym + offs_n[None, :]
    tl.store(y_ptr + y_offs, y.to(dtype), mask=m_ok[:, None] & n_ok[None, :])


def launch_norm_skinny(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                       weight: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor, h_out: torch.Tensor,
                       block_n: int, block_m: int, num_warps: int, *, gated: bool = False) -> None:
    """h_out = x + residual; out = rmsnorm(h_out) * norm_weight @ weight.T (+ bias), or with gated
    silu(gate) * up of weight = [gate; up]. x, residual, h_out, out [M, *] with unit stride along their rows;
    norm_skinny_fits(M, K); block_m rows and block_n columns a program."""
    m, k = x.shape
    rows = weight.shape[0]
    n = rows // 2 if gated else rows
    assert norm_skinny_fits(m, k) and weight.shape[1] == k and weight.stride(1) == 1 and out.shape == (m, n)
    assert residual.shape == h_out.shape == (m, k) and not (gated and bias is not None)
    assert x.stride(1) == residual.stride(1) == h_out.stride(1) == out.stride(1) == 1
    a, b, c = row_pieces(k)
    _norm_skinny_launch[(cdiv(n, block_n), cdiv(m, block_m))](
        x, residual, norm_weight, h_out, weight, bias if bias is not None else out, out, m, n, k, x.stride(0),
        residual.stride(0), h_out.stride(0), weight.stride(0), out.stride(0), eps, HAS_BIAS=bias is not None,
        GATED=gated, BLOCK_M=block_m, BLOCK_N=block_n, A=a, B=b, C=c, INTERPRET=triton_interpreting(),
        num_warps=num_warps, num_stages=1, **pdl_arguments(out))


# launched through kernels/launch.py (a cached direct launch)
_norm_skinny_launch = DirectLauncher(_norm_skinny_kernel)
