"""The Triton kernels behind runner/linear.py: the one-row GEMV y[n] = sum_k x[k] * w[n, k] (+ b[n]),
and silu(gate) * up (the MLP's activation after its gate/up projection).

A program owns BLOCK_N output rows and streams them along K in BLOCK_K steps, keeping a
[BLOCK_N, BLOCK_K] float32 partial sum that is reduced once at the end (no reduction inside the
loop). Many small programs keep enough loads in flight for the weight stream to run near the copy
bandwidth; the caller picks the blocks per shape.

BLOCK_K is a power of two dividing K, or the whole row, BLOCK_K = next_pow2(K) > K: a program's weights are
then loaded in K's power-of-two pieces (kernels/row_pieces.py), all before the PDL wait, where K tiles dividing
a K such as SmolLM2's 576 (9 x 64) leave eight of nine loads after it.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.row_pieces import load_row_pieces, piece_constexprs, row_pieces_dot
from graphbench.runner.kernels.util import cdiv, tile_fits

MAX_STAGES = 3  # weight tiles a one-row program has in flight (kernel_choice.MAX_GEMV_STAGES)


@triton.jit
def weight_tile(w_ptr, k0, offs_n, offs_k, n_ok, stride_wn, K, EVEN_K: tl.constexpr):
    """The [BLOCK_N, BLOCK_K] weight tile at k0 (zeros past K)."""
    rows = offs_n[:, None].to(tl.int64) * stride_wn + (k0 + offs_k)[None, :]
    mask = n_ok[:, None]
    if not EVEN_K:
        mask = mask & (k0 + offs_k < K)[None, :]
    return tl.load(w_ptr + rows, mask=mask, other=0.0)


@triton.jit
def _tile_ahead(w_ptr, k0, offs_n, offs_k, n_ok, stride_wn, K):
    """weight_tile at k0, all zeros (nothing read) where k0 is past the row: a tile loaded ahead of the K loop's
    end."""
    rows = offs_n[:, None].to(tl.int64) * stride_wn + (k0 + offs_k)[None, :]
    return tl.load(w_ptr + rows, mask=n_ok[:, None] & (k0 + offs_k < K)[None, :], other=0.0)


@triton.jit
def _next_tiles(w, w1, w2, w_ptr, k0, offs_n, offs_k, n_ok, stride_wn, K, EVEN_K: tl.constexpr,
                STAGES: tl.constexpr, BLOCK_K: tl.constexpr):
    """The tiles in flight when the one at k0 is to be summed: each moves up one place and the tile STAGES - 1
    tiles past k0 is loaded (w1, w2 are unused below STAGES 2, 3)."""
    ahead = _tile_ahead(w_ptr, k0 + (STAGES - 1) * BLOCK_K, offs_n, offs_k, n_ok, stride_wn, K)
    if STAGES == 1:
        w = ahead
    elif STAGES == 2:
        w = w1
        w1 = ahead
    else:
        w = w1
        w1 = w2
        w2 = ahead
    return w, w1, w2


@triton.jit
def _first_tiles(w_ptr, offs_n, offs_k, n_ok, stride_wn, K, EVEN_K: tl.constexpr, STAGES: tl.constexpr,
                 BLOCK_K: tl.constexpr):
    """The first STAGES tiles of the rows, loaded before the PDL wait (no kernel writes weights)."""
    w = weight_tile(w_ptr, 0, offs_n, offs_k, n_ok, stride_wn, K, EVEN_K)
    w1 = w
    w2 = w
    if STAGES >= 2:
        w1 = _tile_ahead(w_ptr, BLOCK_K, offs_n, offs_k, n_ok, stride_wn, K)
    if STAGES >= 3:
        w2 = _tile_ahead(w_ptr, 2 * BLOCK_K, offs_n, offs_k, n_ok, stride_wn, K)
    return w, w1, w2


@triton.jit
def row_chunk(x_ptr, k0, offs_k, K, EVEN_K: tl.constexpr):
    """x[k0 + offs_k] as float32 (zeros past K)."""
    if EVEN_K:
        return tl.load(x_ptr + k0 + offs_k).to(tl.float32)
    return tl.load(x_ptr + k0 + offs_k, mask=k0 + offs_k < K, other=0.0).to(tl.float32)


@triton.jit
def _gemv_step(acc, x_ptr, w, k0, offs_k, K, EVEN_K: tl.constexpr):
    return acc + w.to(tl.float32) * row_chunk(x_ptr, k0, offs_k, K, EVEN_K)[None, :]


@triton.jit
def _next_step(acc, w, w1, w2, x_ptr, w_ptr, k0, offs_n, offs_k, n_ok, stride_wn, K, EVEN_K: tl.constexpr,
               STAGES: tl.constexpr, BLOCK_K: tl.constexpr):
    """One K-loop step at k0: the tiles in flight move up (_next_tiles), and the one at k0 is summed."""
    w, w1, w2 = _next_tiles(w, w1, w2, w_ptr, k0, offs_n, offs_k, n_ok, stride_wn, K, EVEN_K, STAGES, BLOCK_K)
    return _gemv_step(acc, x_ptr, w, k0, offs_k, K, EVEN_K), w, w1, w2


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, K, stride_wn, HAS_BIAS: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr, INTERPRET: tl.constexpr,
                 STAGES: tl.constexpr = 1, PIECE_A: tl.constexpr = 0, PIECE_B: tl.constexpr = 0,
                 PIECE_C: tl.constexpr = 0, PDL: tl.constexpr = False):
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < N
    # The first weights are loaded before waiting for the previous kernel (PDL): no kernel writes weights, so
    # under PDL the weight stream starts while that kernel finishes; x comes after the wait.
    if PIECE_A > 0:  # the whole row, in pieces
        wa, wb, wc = load_row_pieces(w_ptr, offs_n, n_ok, stride_wn, K, PIECE_A, PIECE_B, PIECE_C)
        pdl_enter(PDL)
        y = row_pieces_dot(x_ptr, wa, wb, wc, K, PIECE_A, PIECE_B, PIECE_C)
    else:
        offs_k = tl.arange(0, BLOCK_K)
        acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
        w, w1, w2 = _first_tiles(w_ptr, offs_n, offs_k, n_ok, stride_wn, K, EVEN_K, STAGES, BLOCK_K)
        pdl_enter(PDL)
        acc = _gemv_step(acc, x_ptr, w, 0, offs_k, K, EVEN_K)
        if INTERPRET:  # numpy >= 2.4 cannot turn the interpreter's 1-element scalars into range bounds
            k0 = BLOCK_K
            while k0 < K:
                acc, w, w1, w2 = _next_step(acc, w, w1, w2, x_ptr, w_ptr, k0, offs_n, offs_k, n_ok, stride_wn, K,
                                            EVEN_K, STAGES, BLOCK_K)
                k0 += BLOCK_K
        else:
            for k0 in range(BLOCK_K, K, BLOCK_K):
                acc, w, w1, w2 = _next_step(acc, w, w1, w2, x_ptr, w_ptr, k0, offs_n, offs_k, n_ok, stride_wn, K,
                                            EVEN_K, STAGES, BLOCK_K)
        y = tl.sum(acc, axis=1)
    if HAS_BIAS:
        y += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs_n, y.to(y_ptr.dtype.element_ty), mask=n_ok)


def _row_layout(k: int, block_k: int, stages: int) -> dict:
    """The launch's K constexprs: a tile dividing K (its stages capped at the loop's tiles), or the whole row
    in pieces."""
    even = k % block_k == 0
    return {"EVEN_K": even, "STAGES": min(stages, k // block_k) if even else 1, **piece_constexprs(k, block_k)}


def launch_gemv(x: torch.Tensor,  # [1, K] contiguous
                weight: torch.Tensor,  # [N, K], unit stride along K
                bias: torch.Tensor | None,  # [N] or None
                out: torch.Tensor,  # [1, N]
                block_n: int, block_k: int, num_warps: int, stages: int = 1, *, interpret: bool = False) -> None:
    """out = x @ weight.T (+ bias); block_k divides K or covers it (the whole row, in pieces). stages (1 to 3):
    the weight tiles a program has in flight, each loaded that many tiles ahead of its sum."""
    n, k = weight.shape
    assert tile_fits(k, block_k) and x.shape == (1, k) and out.shape == (1, n) and 1 <= stages <= MAX_STAGES
    _gemv_launch[(cdiv(n, block_n),)](
        x, weight, bias if bias is not None else out, out, n, k, weight.stride(0),
        HAS_BIAS=bias is not None, BLOCK_N=block_n, BLOCK_K=block_k, INTERPRET=interpret,
        **_row_layout(k, block_k, stages), num_warps=num_warps, num_stages=1, **pdl_arguments(out))


@triton.jit
def _next_gated_step(gate, up, g, g1, g2, u, u1, u2, x_ptr, w_ptr, k0, offs_n, up_rows, offs_k, n_ok, stride_wn, K,
                     EVEN_K: tl.constexpr, STAGES: tl.constexpr, BLOCK_K: tl.constexpr):
    """_next_step for gate's and up's rows, both tiles' loads before either sum."""
    g, g1, g2 = _next_tiles(g, g1, g2, w_ptr, k0, offs_n, offs_k, n_ok, stride_wn, K, EVEN_K, STAGES, BLOCK_K)
    u, u1, u2 = _next_tiles(u, u1, u2, w_ptr, k0, up_rows, offs_k, n_ok, stride_wn, K, EVEN_K, STAGES, BLOCK_K)
    gate = _gemv_step(gate, x_ptr, g, k0, offs_k, K, EVEN_K)
    up = _gemv_step(up, x_ptr, u, k0, offs_k, K, EVEN_K)
    return gate, up, g, g1, g2, u, u1, u2


@triton.jit
def _gated_gemv_kernel(x_ptr, w_ptr, y_ptr, N, K, stride_wn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       EVEN_K: tl.constexpr, INTERPRET: tl.constexpr, STAGES: tl.constexpr = 1,
                       PIECE_A: tl.constexpr = 0, PIECE_B: tl.constexpr = 0, PIECE_C: tl.constexpr = 0,
                       PDL: tl.constexpr = False):
    """y[j] = silu(x . w[j]) * (x . w[N + j]) for BLOCK_N columns j (w = [gate; up], [2N, K]): the one-row
    gate/up projection with the activation in its epilogue. Both products are rounded to y's dtype first, as
    the projection's output is before the silu-mul launch."""
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < N
    up_rows = offs_n + N  # the matching up rows of w
    # (the weights before the PDL wait, as the GEMV's)
    if PIECE_A > 0:
        ga, gb, gc = load_row_pieces(w_ptr, offs_n, n_ok, stride_wn, K, PIECE_A, PIECE_B, PIECE_C)
        ua, ub, uc = load_row_pieces(w_ptr, up_rows, n_ok, stride_wn, K, PIECE_A, PIECE_B, PIECE_C)
        pdl_enter(PDL)
        g_sum = row_pieces_dot(x_ptr, ga, gb, gc, K, PIECE_A, PIECE_B, PIECE_C)
        u_sum = row_pieces_dot(x_ptr, ua, ub, uc, K, PIECE_A, PIECE_B, PIECE_C)
    else:
        offs_k = tl.arange(0, BLOCK_K)
        gate = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
        up = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
        g, g1, g2 = _first_tiles(w_ptr, offs_n, offs_k, n_ok, stride_wn, K, EVEN_K, STAGES, BLOCK_K)
        u, u1, u2 = _first_tiles(w_ptr, up_rows, offs_k, n_ok, stride_wn, K, EVEN_K, STAGES, BLOCK_K)
        pdl_enter(PDL)
        gate = _gemv_step(gate, x_ptr, g, 0, offs_k, K, EVEN_K)
        up = _gemv_step(up, x_ptr, u, 0, offs_k, K, EVEN_K)
        if INTERPRET:  # as in _gemv_kernel
            k0 = BLOCK_K
            while k0 < K:
                gate, up, g, g1, g2, u, u1, u2 = _next_gated_step(gate, up, g, g1, g2, u, u1, u2, x_ptr, w_ptr, k0,
                                                                  offs_n, up_rows, offs_k, n_ok, stride_wn, K,
                                                                  EVEN_K, STAGES, BLOCK_K)
                k0 += BLOCK_K
        else:
            for k0 in range(BLOCK_K, K, BLOCK_K):
                gate, up, g, g1, g2, u, u1, u2 = _next_gated_step(gate, up, g, g1, g2, u, u1, u2, x_ptr, w_ptr, k0,
                                                                  offs_n, up_rows, offs_k, n_ok, stride_wn, K,
                                                                  EVEN_K, STAGES, BLOCK_K)
        g_sum = tl.sum(gate, axis=1)
        u_sum = tl.sum(up, axis=1)
    dtype = y_ptr.dtype.element_ty
    g = g_sum.to(dtype).to(tl.float32)
    u = u_sum.to(dtype).to(tl.float32)
    tl.store(y_ptr + offs_n, (g * tl.sigmoid(g) * u).to(dtype), mask=n_ok)


def launch_gated_gemv(x: torch.Tensor,  # [1, K] contiguous
                      weight: torch.Tensor,  # [2N, K] = [gate; up], unit stride along K
                      out: torch.Tensor,  # [1, N]
                      block_n: int, block_k: int, num_warps: int, stages: int = 1, *,
                      interpret: bool = False) -> None:
    """out = silu(x @ gate.T) * (x @ up.T) in one launch; block_k divides K or covers it; stages as the
    GEMV's."""
    n, k = weight.shape[0] // 2, weight.shape[1]
    assert tile_fits(k, block_k) and x.shape == (1, k) and out.shape == (1, n) and weight.shape[0] == 2 * n
    assert 1 <= stages <= MAX_STAGES
    _gated_gemv_launch[(cdiv(n, block_n),)](x, weight, out, n, k, weight.stride(0), BLOCK_N=block_n, BLOCK_K=block_k,
                                            INTERPRET=interpret, **_row_layout(k, block_k, stages),
                                            num_warps=num_warps, num_stages=1, **pdl_arguments(out))


@triton.jit
def _silu_mul_kernel(x_ptr, y_ptr, K, stride_x, stride_y, BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    pdl_enter(PDL)
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < K
    gate = tl.load(x_ptr + row * stride_x + offs, mask=ok, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_x + K + offs, mask=ok, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + offs, (gate * tl.sigmoid(gate) * up).to(y_ptr.dtype.element_ty), mask=ok)


def launch_silu_mul(x: torch.Tensor, out: torch.Tensor) -> None:  # x [T, 2K] (unit stride) -> out [T, K]
    """out = silu(x[:, :K]) * x[:, K:] in one launch (what Inductor fuses when it sees the ops)."""
    rows, k = out.shape
    block = 1024
    if rows:
        _silu_mul_launch[(rows, cdiv(k, block))](x, out, k, x.stride(0), out.stride(0), BLOCK=block, num_warps=4,
                                                 **pdl_arguments(out))


# launched through kernels/launch.py (a cached direct launch)
_gemv_launch = DirectLauncher(_gemv_kernel)
_silu_mul_launch = DirectLauncher(_silu_mul_kernel)
_gated_gemv_launch = DirectLauncher(_gated_gemv_kernel)
