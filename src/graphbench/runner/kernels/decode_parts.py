"""The uniform-decode attention kernel's parts (paged_decode.py): writing the step's new K/V row, the
tile loop of a program whose first tile loaded before the PDL wait (the new token patched in from
registers), and the merge of a row's splits by the last split to finish."""

from __future__ import annotations

import triton
import triton.language as tl

from graphbench.runner.kernels.paged_attention import load_kv_tile, softmax_step


@triton.jit
def with_new_token(k, v, t, new_pos, new_k, new_v, TILE_N: tl.constexpr):
    """Tile t's K^T [BLOCK_D, TILE_N] and V [TILE_N, BLOCK_D] with position new_pos (if in it) set to the new row."""
    is_new = (t * TILE_N + tl.arange(0, TILE_N)) == new_pos
    return tl.where(is_new[None, :], new_k[:, None], k), tl.where(is_new[:, None], new_v[None, :], v)


@triton.jit
def attend_rest(q, pos, t_lo, t_hi, m_i, l_i, acc, k_cache_ptr, v_cache_ptr, bt_row, seq_len, new_pos, new_k,
                 new_v, kv_head, qk_scale, stride_kb, stride_ko, stride_kh, stride_vb, stride_vo, stride_vh,
                 HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr,
                 PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    """The online softmax over tiles [t_lo, t_hi) loaded now, the new token patched in from registers."""
    if INTERPRET:  # numpy >= 2.4 cannot turn the interpreter's 1-element scalars into range bounds
        t = t_lo
        while t < t_hi:
            m_i, l_i, acc = _attend_loaded(q, pos, t, m_i, l_i, acc, k_cache_ptr, v_cache_ptr, bt_row, seq_len,
                                           new_pos, new_k, new_v, kv_head, qk_scale, stride_kb, stride_ko,
                                           stride_kh, stride_vb, stride_vo, stride_vh, HEAD_DIM, BLOCK_D,
                                           BLOCK_SIZE, TILE_N, PRECISION, INTERPRET)
            t += 1
    else:
        for t in range(t_lo, t_hi):
            m_i, l_i, acc = _attend_loaded(q, pos, t, m_i, l_i, acc, k_cache_ptr, v_cache_ptr, bt_row, seq_len,
                                           new_pos, new_k, new_v, kv_head, qk_scale, stride_kb, stride_ko,
                                           stride_kh, stride_vb, stride_vo, stride_vh, HEAD_DIM, BLOCK_D,
                                           BLOCK_SIZE, TILE_N, PRECISION, INTERPRET)
    return m_i, l_i, acc


@triton.jit
def _attend_loaded(q, pos, t, m_i, l_i, acc, k_cache_ptr, v_cache_ptr, bt_row, seq_len, new_pos, new_k, new_v,
                   kv_head, qk_scale, stride_kb, stride_ko, stride_kh, stride_vb, stride_vo, stride_vh,
                   HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr,
                   PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    # positions below new_pos come from the cache; new_pos (not written there yet when loaded) from registers
    k, v = load_kv_tile(t, k_cache_ptr, v_cache_ptr, bt_row, new_pos, kv_head, stride_kb, stride_ko, stride_kh,
                        stride_vb, stride_vo, stride_vh, HEAD_DIM, BLOCK_D, BLOCK_SIZE, TILE_N)
    k, v = with_new_token(k, v, t, new_pos, new_k, new_v, TILE_N)
    return softmax_step(q, pos, t, k, v, seq_len, m_i, l_i, acc, qk_scale, TILE_N, PRECISION, INTERPRET)


@triton.jit
def _merge_split(m, l, acc, part_ptr, lse_ptr, row, row_ok, io_mask, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr):
    """Fold one split's partial (normalised output, log2-sum-exp) into a running merge."""
    offs_d = tl.arange(0, BLOCK_D)
    # .cg: from L2, where the other programs' stores are (never a stale line of this SM's L1)
    lse = tl.load(lse_ptr + row, mask=row_ok, other=float("-inf"), cache_modifier=".cg")
    part = tl.load(part_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], mask=io_mask, other=0.0, cache_modifier=".cg")
    m_new = tl.maximum(m, lse)
    m_safe = tl.where(m_new > float("-inf"), m_new, 0.0)
    alpha = tl.exp2(m - m_safe)
    w = tl.exp2(lse - m_safe)
    return m_new, l * alpha + w, acc * alpha[:, None] + part * w[:, None]


@triton.jit
def merge_own_splits(part_ptr, lse_ptr, out_ptr, out_offs, io_mask, first_row, row_ok, num_active,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr, INTERPRET: tl.constexpr):
    """out = the log-sum-exp weighted mean of splits 0..num_active-1 (split s at row first_row + s)."""
    m = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    if INTERPRET:  # numpy >= 2.4 cannot turn the interpreter's 1-element scalars into range bounds
        s = 0
        while s < num_active:
            m, l, acc = _merge_split(m, l, acc, part_ptr, lse_ptr, first_row + s, row_ok, io_mask, HEAD_DIM, BLOCK_D)
            s += 1
    else:
        for s in range(0, num_active):
            m, l, acc = _merge_split(m, l, acc, part_ptr, lse_ptr, first_row + s, row_ok, io_mask, HEAD_DIM, BLOCK_D)
    tl.store(out_ptr + out_offs, (acc / tl.where(l > 0.0, l, 1.0)[:, None]).to(out_ptr.dtype.element_ty), mask=io_mask)


@triton.jit
def write_new_kv(new_k, new_v, slot, k_cache_ptr, v_cache_ptr, kv_head, stride_kb, stride_ko, stride_kh,
                  stride_vb, stride_vo, stride_vh, offs_d, d_ok, BLOCK_SIZE: tl.constexpr):
    """k_cache[slot] = new_k and v_cache[slot] = new_v for one kv head (what write_kv_cache does for one row).

    A slot < 0 writes nothing: the engine's dummy batches (warm-up, memory profile, capture) have real
    rows with slot -1, and block -1 would be outside the cache."""
    if slot >= 0:
        block = slot // BLOCK_SIZE
        offset = slot % BLOCK_SIZE
        tl.store(k_cache_ptr + block * stride_kb + offset * stride_ko + kv_head * stride_kh + offs_d, new_k, mask=d_ok)
        tl.store(v_cache_ptr + block * stride_vb + offset * stride_vo + kv_head * stride_vh + offs_d, new_v, mask=d_ok)
