"""A one-row kernel's whole row in up to three power-of-two pieces, where K is no power of two: qwen2.5-0.5b's
down (K 4864 = 4096 + 512 + 256), SmolLM2's projections (576 = 512 + 64). One tile of next_pow2(K) lanes
masked past K held 40% dead lanes for 4864 (8192 lanes): registers that capped the programs an SM holds (the
[2, 8192] tile, 130 a thread: one program an SM at a time on the H200, 2026-12-05), so a program's loads
came in several waves. The pieces hold K lanes, or a few more where K needs 4 or more powers of two (the last piece is
rounded up and masked past K), every weight loaded before the PDL wait as the one tile's were."""

from __future__ import annotations

import triton
import triton.language as tl

from graphbench.runner.kernels.util import next_power_of_2


def row_pieces(k: int) -> tuple[int, int, int]:
    """(A, B, C): A the largest power of two <= K, B the largest <= K - A (0: none), C the power of two
    covering the rest (0: none; masked past K)."""
    a = 1 << (k.bit_length() - 1)
    rest = k - a
    b = 1 << (rest.bit_length() - 1) if rest else 0
    rest -= b
    return a, b, next_power_of_2(rest) if rest else 0


def piece_constexprs(k: int, block_k: int) -> dict:
    """A one-row kernel's PIECE_A/B/C: K's pieces where the tile covers the whole row and K is no power of two
    (block_k = next_pow2(K) > K), else none (zeros: the K loop)."""
    if k % block_k == 0:
        return {"PIECE_A": 0, "PIECE_B": 0, "PIECE_C": 0}
    a, b, c = row_pieces(k)
    return {"PIECE_A": a, "PIECE_B": b, "PIECE_C": c}


@triton.jit
def _piece(w_ptr, rows, n_ok, stride_wn, start, K, SIZE: tl.constexpr, MASKED: tl.constexpr):
    offs = start + tl.arange(0, SIZE)
    mask = n_ok[:, None]
    if MASKED:
        mask = mask & (offs < K)[None, :]
    return tl.load(w_ptr + rows[:, None].to(tl.int64) * stride_wn + offs[None, :], mask=mask, other=0.0)


@triton.jit
def load_row_pieces(w_ptr, rows, n_ok, stride_wn, K, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    """The rows' weights [len(rows), A], [.., B], [.., C] (an absent piece: the first again, never read)."""
    wa = _piece(w_ptr, rows, n_ok, stride_wn, 0, K, A, False)
    wb = wa
    wc = wa
    if B > 0:
        wb = _piece(w_ptr, rows, n_ok, stride_wn, A, K, B, False)
    if C > 0:
        wc = _piece(w_ptr, rows, n_ok, stride_wn, A + B, K, C, True)
    return wa, wb, wc


@triton.jit
def _piece_dot(x_ptr, w, start, K, SIZE: tl.constexpr, MASKED: tl.constexpr):
    offs = start + tl.arange(0, SIZE)
    if MASKED:
        x = tl.load(x_ptr + offs, mask=offs < K, other=0.0)
    else:
        x = tl.load(x_ptr + offs)
    return tl.sum(w.to(tl.float32) * x.to(tl.float32)[None, :], axis=1)


@triton.jit
def row_pieces_dot(x_ptr, wa, wb, wc, K, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    """[rows] float32: x . w for the pieces load_row_pieces gave (x read after the PDL wait, by the caller's
    order)."""
    y = _piece_dot(x_ptr, wa, 0, K, A, False)
    if B > 0:
        y += _piece_dot(x_ptr, wb, A, K, B, False)
    if C > 0:
        y += _piece_dot(x_ptr, wc, A + B, K, C, True)
    return y
