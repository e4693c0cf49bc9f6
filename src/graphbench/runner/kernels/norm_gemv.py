"""The one-row GEMVs with the layer's residual add + RMSNorm in front, in one launch: a decode step at batch 1
launches one kernel fewer per norm (two a decoder layer). Whether that pays is a property of the shape: every
program recomputes the row's norm (it reads x, the residual and the norm weight, K values each, from L2) before
its weight tiles, so a projection of many narrow programs pays that many times over (llama-3.2-1b's and
llama-3.1-8b's, benchmarks/RESULTS.md, 2026-11-29, 497f9e6) while a small model's few programs may not. The
engine times both at start-up (runner/kernel_timing.py) and runs the fused kernel only where it was faster.

The rounding is the unfused path's: h = x + residual rounded to the dtype, normed = (h * rstd) rounded, times
the norm weight, rounded (what kernels/add_rmsnorm.py stores and the GEMV loads), so the output is the
add-norm + GEMV's bit for bit. Program 0 stores h (the next residual).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.gemv import row_chunk, weight_tile
from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.row_pieces import load_row_pieces, piece_constexprs
from graphbench.runner.kernels.util import cdiv, next_power_of_2, tile_fits


@triton.jit
def _row_rstd(x_ptr, r_ptr, h_ptr, K, eps, ROW_BLOCK: tl.constexpr):
    """1 / rms(x + residual) of the row (h rounded to the dtype first); program 0 stores h. After the PDL wait."""
    dtype = x_ptr.dtype.element_ty
    offs = tl.arange(0, ROW_BLOCK)
    ok = offs < K
    h = tl.load(x_ptr + offs, mask=ok, other=0.0).to(tl.float32) + tl.load(r_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    h = h.to(dtype)
    tl.store(h_ptr + offs, h, mask=ok & (offs + tl.program_id(0) * K < K))  # (program 0's offsets only)
    hf = h.to(tl.float32)
    return 1.0 / tl.sqrt(tl.sum(hf * hf, axis=0) / K + eps)


@triton.jit
def _normed_chunk(x_ptr, r_ptr, nw_ptr, k0, offs_k, rstd, K, EVEN_K: tl.constexpr):
    """The normalised row's values k0 + offs_k, as the add-norm kernel stores them (float32 for the sums;
    zeros past K)."""
    dtype = x_ptr.dtype.element_ty
    h = (row_chunk(x_ptr, k0, offs_k, K, EVEN_K) + row_chunk(r_ptr, k0, offs_k, K, EVEN_K)).to(dtype)
    hn = (h.to(tl.float32) * rstd).to(dtype).to(tl.float32) * row_chunk(nw_ptr, k0, offs_k, K, EVEN_K)
    return hn.to(dtype).to(tl.float32)[None, :]


@triton.jit
def _norm_gemv_step(acc, up, x_ptr, r_ptr, nw_ptr, w, w_up, k0, offs_k, rstd, K, EVEN_K: tl.constexpr,
                    GATED: tl.constexpr):
    xn = _normed_chunk(x_ptr, r_ptr, nw_ptr, k0, offs_k, rstd, K, EVEN_K)
    acc += w.to(tl.float32) * xn
    if GATED:
        up += w_up.to(tl.float32) * xn
    return acc, up


@triton.jit
def _normed_piece_dot(x_ptr, r_ptr, nw_ptr, w, start, rstd, K, SIZE: tl.constexpr, EVEN: tl.constexpr):
    """[rows] float32: normed[start:start + SIZE] . w, summed as row_pieces.row_pieces_dot sums a piece (the
    GEMV's order, so the fold equals it bit for bit)."""
    xn = _normed_chunk(x_ptr, r_ptr, nw_ptr, start, tl.arange(0, SIZE), rstd, K, EVEN)
    return tl.sum(w.to(tl.float32) * xn, axis=1)


@triton.jit
def _normed_pieces_dot(x_ptr, r_ptr, nw_ptr, wa, wb, wc, rstd, K, A: tl.constexpr, B: tl.constexpr,
                       C: tl.constexpr):
    """normed . w for the pieces row_pieces.load_row_pieces gave."""
    y = _normed_piece_dot(x_ptr, r_ptr, nw_ptr, wa, 0, rstd, K, A, True)
    if B > 0:
        y += _normed_piece_dot(x_ptr, r_ptr, nw_ptr, wb, A, rstd, K, B, True)
    if C > 0:
        y += _normed_piece_dot(x_ptr, r_ptr, nw_ptr, wc, A + B, rstd, K, C, False)
    return y


@triton.jit
def _norm_gemv_loop(x_ptr, r_ptr, nw_ptr, h_ptr, w_ptr, offs_n, n_ok, N, K, stride_wn, eps, GATED: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr, ROW_BLOCK: tl.constexpr,
                    INTERPRET: tl.constexpr, PDL: tl.constexpr):
    """(gate or y, up) float32 sums over K in BLOCK_K tiles (up: gate again where not GATED)."""
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    up = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    w = weight_tile(w_ptr, 0, offs_n, offs_k, n_ok, stride_wn, K, EVEN_K)  # weights before the PDL wait (gemv.py)
    w_up = w
    if GATED:
        w_up = weight_tile(w_ptr, 0, offs_n + N, offs_k, n_ok, stride_wn, K, EVEN_K)
    pdl_enter(PDL)
    rstd = _row_rstd(x_ptr, r_ptr, h_ptr, K, eps, ROW_BLOCK)
    acc, up = _norm_gemv_step(acc, up, x_ptr, r_ptr, nw_ptr, w, w_up, 0, offs_k, rstd, K, EVEN_K, GATED)
    if INTERPRET:  # numpy >= 2.4 cannot turn the interpreter's 1-element scalars into range bounds (gemv.py)
        k0 = BLOCK_K
        while k0 < K:
            w = weight_tile(w_ptr, k0, offs_n, offs_k, n_ok, stride_wn, K, EVEN_K)
            w_up = w
            if GATED:
                w_up = weight_tile(w_ptr, k0, offs_n + N, offs_k, n_ok, stride_wn, K, EVEN_K)
            acc, up = _norm_gemv_step(acc, up, x_ptr, r_ptr, nw_ptr, w, w_up, k0, offs_k, rstd, K, EVEN_K, GATED)
            k0 += BLOCK_K
    else:
        for k0 in range(BLOCK_K, K, BLOCK_K):
            w = weight_tile(w_ptr, k0, offs_n, offs_k, n_ok, stride_wn, K, EVEN_K)
            w_up = w
            if GATED:
                w_up = weight_tile(w_ptr, k0, offs_n + N, offs_k, n_ok, stride_wn, K, EVEN_K)
            acc, up = _norm_gemv_step(acc, up, x_ptr, r_ptr, nw_ptr, w, w_up, k0, offs_k, rstd, K, EVEN_K, GATED)
    return tl.sum(acc, axis=1), tl.sum(up, axis=1)


@triton.jit
def _norm_gemv_kernel(x_ptr, r_ptr, nw_ptr, h_ptr, w_ptr, b_ptr, y_ptr, N, K, stride_wn, eps, HAS_BIAS: tl.constexpr,
                      GATED: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
                      ROW_BLOCK: tl.constexpr, INTERPRET: tl.constexpr, PIECE_A: tl.constexpr = 0,
                      PIECE_B: tl.constexpr = 0, PIECE_C: tl.constexpr = 0, PDL: tl.constexpr = False):
    """y[n] = normed . w[n] (+ b[n]); GATED: y[j] = silu(normed . w[j]) * (normed . w[N + j]) (w = [gate; up]).
    The whole row (PIECE_A > 0) in K's power-of-two pieces, as the GEMV loads it (kernels/row_pieces.py)."""
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < N
    if PIECE_A > 0:
        wa, wb, wc = load_row_pieces(w_ptr, offs_n, n_ok, stride_wn, K, PIECE_A, PIECE_B, PIECE_C)
        ua, ub, uc = wa, wb, wc
        if GATED:
            ua, ub, uc = load_row_pieces(w_ptr, offs_n + N, n_ok, stride_wn, K, PIECE_A, PIECE_B, PIECE_C)
        pdl_enter(PDL)
        rstd = _row_rstd(x_ptr, r_ptr, h_ptr, K, eps, ROW_BLOCK)
        y = _normed_pieces_dot(x_ptr, r_ptr, nw_ptr, wa, wb, wc, rstd, K, PIECE_A, PIECE_B, PIECE_C)
        u = y
        if GATED:
            u = _normed_pieces_dot(x_ptr, r_ptr, nw_ptr, ua, ub, uc, rstd, K, PIECE_A, PIECE_B, PIECE_C)
    else:
        y, u = _norm_gemv_loop(x_ptr, r_ptr, nw_ptr, h_ptr, w_ptr, offs_n, n_ok, N, K, stride_wn, eps, GATED,
                               BLOCK_N, BLOCK_K, EVEN_K, ROW_BLOCK, INTERPRET, PDL)
    dtype = y_ptr.dtype.element_ty
    if GATED:  # both products rounded first, as the projection's output is before the silu-mul launch
        g = y.to(dtype).to(tl.float32)
        u = u.to(dtype).to(tl.float32)
        y = g * tl.sigmoid(g) * u
    elif HAS_BIAS:
        y += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs_n, y.to(dtype), mask=n_ok)


def launch_norm_gemv(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                     weight: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor, h_out: torch.Tensor,
                     block_n: int, block_k: int, num_warps: int, *, gated: bool = False, interpret: bool = False) -> None:
    """h_out = x + residual; out = rmsnorm(h_out) * norm_weight @ weight.T (+ bias), or with gated the
    activation silu(gate) * up of weight = [gate; up]; x, residual, h_out [1, K] contiguous; block_k divides K
    or covers it (gemv.tile_fits: the whole row, in pieces). Under PDL the first weight tiles load before the
    wait; x and the residual after it (the residual may be the previous kernel's output here, unlike in the
    add-norm kernel)."""
    rows, k = weight.shape
    n = rows // 2 if gated else rows
    assert tile_fits(k, block_k) and x.shape == residual.shape == h_out.shape == (1, k) and out.shape == (1, n)
    assert not (gated and bias is not None)
    _norm_gemv_launch[(cdiv(n, block_n),)](
        x, residual, norm_weight, h_out, weight, bias if bias is not None else out, out, n, k, weight.stride(0), eps,
        HAS_BIAS=bias is not None, GATED=gated, BLOCK_N=block_n, BLOCK_K=block_k, EVEN_K=k % block_k == 0,
        ROW_BLOCK=next_power_of_2(k), INTERPRET=interpret, **piece_constexprs(k, block_k), num_warps=num_warps,
        num_stages=1, **pdl_arguments(out))


# launched through kernels/launch.py (a cached direct launch)
_norm_gemv_launch = DirectLauncher(_norm_gemv_kernel)
