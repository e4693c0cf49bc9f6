"""Weights asked of L2 before a kernel's PDL wait (kernels/pdl.py): a skinny GEMM's program streams its
weight slab through a pipelined K loop that starts after the wait, since its tiles feed tl.dot from shared
memory and cannot be loaded into registers ahead of it as the one-row GEMV's are. Prefetching the slab's first
columns into L2 while the previous kernel finishes makes the loop's first loads L2 hits, not HBM round trips.
What is prefetched is capped (PREFETCH_BYTES over the whole weight) so that the programs resident at once do not
evict each other's lines before they are read."""

from __future__ import annotations

import triton
import triton.language as tl

from graphbench.runner.kernels.util import next_power_of_2

PREFETCH_BYTES = 16 << 20  # a third of the H100's and H200's 50 MB L2
LINE_BYTES = 128
MAX_LINES = 32  # a row's lines a program prefetches (4 KB: 2048 16-bit columns)


@triton.jit
def prefetch_l2(ptrs, INTERPRET: tl.constexpr):
    """prefetch.global.L2 of each pointer's line (nothing in the interpreter)."""
    if not INTERPRET:
        tl.inline_asm_elementwise("prefetch.global.L2 [$1];\n\tmov.u32 $0, 0;", "=r,l", [ptrs], dtype=tl.int32,
                                  is_pure=False, pack=1)


@triton.jit
def prefetch_rows(w_ptr, offs_n, N, stride_wn, k_lo, COLS: tl.constexpr, LINES: tl.constexpr, LINE: tl.constexpr,
                  INTERPRET: tl.constexpr):
    """Prefetch rows offs_n (clamped to N) of w, columns k_lo .. k_lo + COLS, LINE elements a line."""
    if LINES > 0:
        rows = tl.minimum(offs_n, N - 1).to(tl.int64) * stride_wn
        cols = k_lo + tl.minimum(tl.arange(0, LINES) * LINE, COLS - 1)
        prefetch_l2(w_ptr + rows[:, None] + cols[None, :], INTERPRET)


@triton.jit
def prefetch_slot_rows(b_ptr, slots, n0, N, stride_bl, stride_bn, BLOCK_N: tl.constexpr, LINES: tl.constexpr,
                       LINE: tl.constexpr, INTERPRET: tl.constexpr):
    """Prefetch B[slot, n0 : n0 + BLOCK_N (< N), :] for each token's adapter slot (slots [BLOCK_M]; -1, no
    adapter: slot 0's, never read), the rows contiguous: a LoRA epilogue's B tiles, loaded after the K loop."""
    if LINES > 0:
        extent = tl.minimum(N - n0, BLOCK_N) * stride_bn
        offs = tl.minimum(tl.arange(0, LINES) * LINE, extent - 1)
        base = tl.maximum(slots, 0).to(tl.int64) * stride_bl + n0.to(tl.int64) * stride_bn
        prefetch_l2(b_ptr + base[:, None] + offs[None, :], INTERPRET)


def slot_rows_lines(block_n: int, rank_total: int, element_bytes: int) -> int:
    """prefetch_slot_rows' LINES: BLOCK_N rows of rank_total values, in whole lines (a power of two)."""
    return next_power_of_2(-(-block_n * rank_total * element_bytes // LINE_BYTES))


def prefetch_constexprs(weight_rows: int, k_per_program: int, splits: int, element_bytes: int, block_k: int) -> dict:
    """PREFETCH_COLS / PREFETCH_LINES / PREFETCH_LINE: the first columns of a program's K span to prefetch
    (whole K tiles; the span itself where the whole weight fits PREFETCH_BYTES)."""
    per_column = weight_rows * splits * element_bytes
    line = LINE_BYTES // element_bytes
    cols = min(k_per_program, MAX_LINES * line, PREFETCH_BYTES // per_column // block_k * block_k)
    lines = next_power_of_2(-(-cols // line)) if cols > 0 else 0
    return {"PREFETCH_COLS": max(cols, 1), "PREFETCH_LINES": lines, "PREFETCH_LINE": line}
