"""Triton paged attention for uniform decode batches (one query token per request).

The unified kernel (paged_attention.py) must find each program's request with a binary search over
query_start_loc; in a pure-decode batch row r *is* request r, so this kernel skips the search:
grid = (rows, kv heads, kv splits), a function of shapes only, hence CUDA-graph safe. Rows past the
real requests (r >= query_start_loc[max_reqs], the padding of a recording) are zeroed.

It writes the step's new K/V into the cache itself (one launch a layer fewer than write_kv_cache
first, ~1.7 us at batch 1 on the H200), and split-KV merges in the kernel: the last split of a row and
kv head to finish merges the partials (-O2 batch-1 step 1.065 against 1.082 ms with a merge launch;
benchmarks/RESULTS.md, 2026-11-29, 5ffed15). Under PDL it loads the step's metadata, the rotary table
and, for grids of at most one (row, kv head) per SM, its first tile of cached K/V before it waits for
the kernel before it (batch-1 step 0.916 against 0.952 ms; RESULTS 2026-12-01, 6e15e72; larger grids
keep the tile loop: at batch 64 the early tile made attention 213.6 against 150.0 us a step).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.split_merge import MAX_SPLITS
from graphbench.runner.kernels.decode_parts import attend_rest, merge_own_splits, with_new_token, write_new_kv
from graphbench.runner.kernels.paged_attention import (
    attend_tiles,
    load_kv_tile,
    make_workspace,
    sm_count,
    softmax_step,
    store_result,
)
from graphbench.runner.kernels.rotary import partner_offsets, rotary_cos_sin, rotated_row
from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.util import next_power_of_2, triton_interpreting

# The fewest KV tiles a split covers. One: a context of three 64-key tiles runs as three programs per
# (row, kv head), the last to finish merging them. With 4, and 128-key tiles, it ran as one program:
# batch-1 step llama-3.2-1b 0.877 against 0.840 ms, llama-3.1-8b 4.259 against 4.056 ms on an H200
# (benchmarks/RESULTS.md, 2026-12-02). benchmarks/decode_blocks.py tunes it (blocks["MIN_TILES"]).
MIN_TILES_PER_SPLIT = 1


# The split count is a run-time value (one compiled kernel for every split count > 1, one for no split):
# each Triton variant costs a JIT compile in the first capture.
@triton.jit(do_not_specialize=["num_splits"])
def _decode_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, out_ptr, part_ptr, lse_ptr,
    qsl_ptr, seq_lens_ptr, block_tables_ptr,
    k_ptr, v_ptr, slot_ptr,  # this step's new K/V rows [T, kv heads, head_dim] and their slots
    count_ptr,  # SPLIT: one int32 counter per (row, kv head), zero between launches
    cos_sin_ptr,  # ROTARY: [max_positions, HEAD_DIM] cos of each half, then sin of each half
    scale, max_reqs, num_heads, num_splits,
    stride_qt, stride_qh, stride_ot, stride_oh,
    stride_kb, stride_ko, stride_kh, stride_vb, stride_vo, stride_vh, stride_bt,
    stride_nkt, stride_nkh, stride_nvt, stride_nvh, stride_cs,
    GROUP: tl.constexpr, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr, SPLIT: tl.constexpr, MIN_TILES: tl.constexpr,
    ROTARY: tl.constexpr, EARLY_TILE: tl.constexpr,
    PRECISION: tl.constexpr, INTERPRET: tl.constexpr, PDL: tl.constexpr = False,
):
    req = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    offs_m = tl.arange(0, BLOCK_M)  # one row per query head of this kv head's group
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    head = kv_head * GROUP + offs_m
    row_ok = offs_m < GROUP
    io_mask = row_ok[:, None] & d_ok[None, :]
    req64 = req.to(tl.int64)
    out_offs = req64 * stride_ot + head[:, None] * stride_oh + offs_d[None, :]
    # Under PDL everything up to pdl_enter loads while the previous kernel finishes: the step's metadata
    # (unpacked by the graph's first kernel, several launches back), the rotary table and (EARLY_TILE) the
    # first tile of this layer's cache at older positions (written before the graph started). Only q and the
    # new K/V come from the kernel before; nothing is
    # stored before the wait (an output buffer may be memory the previous kernel reads).
    num_real = tl.load(qsl_ptr + max_reqs)
    seq_len = tl.load(seq_lens_ptr + req)
    new_pos = seq_len - 1  # every row is the request's newest token
    pos = tl.zeros([BLOCK_M], dtype=tl.int32) + new_pos
    num_kv_tiles = tl.cdiv(seq_len, TILE_N)
    # at least MIN_TILES tiles a split (and one, for a padding row's empty context)
    per_split = tl.maximum(tl.cdiv(num_kv_tiles, num_splits), MIN_TILES)
    num_active = tl.cdiv(num_kv_tiles, per_split)
    t_lo = split * per_split
    t_hi = tl.minimum(t_lo + per_split, num_kv_tiles)
    last_tile = num_kv_tiles - 1
    bt_row = block_tables_ptr + req64 * stride_bt
    holds_new = (last_tile >= t_lo) & (last_tile < t_hi)  # this program writes the new K/V
    slot = tl.load(slot_ptr + req64).to(tl.int64)
    if EARLY_TILE:  # the cache holds no kernel's output yet: the first tile loads before the wait
        k_first, v_first = load_kv_tile(t_lo, k_cache_ptr, v_cache_ptr, bt_row, new_pos, kv_head, stride_kb,
                                        stride_ko, stride_kh, stride_vb, stride_vo, stride_vh,
                                        HEAD_DIM, BLOCK_D, BLOCK_SIZE, TILE_N)
    if ROTARY:
        table_row = cos_sin_ptr + tl.maximum(new_pos, 0).to(tl.int64) * stride_cs  # (padding rows: -1)
        cos, sin = rotary_cos_sin(table_row, offs_d, d_ok, HEAD_DIM)
        partner = partner_offsets(offs_d, HEAD_DIM)
    pdl_enter(PDL)
    if req >= num_real:  # padding row of a recording
        if split == 0:
            tl.store(out_ptr + out_offs, tl.zeros([BLOCK_M, BLOCK_D], dtype=out_ptr.dtype.element_ty), mask=io_mask)
        return
    if split >= num_active:
        return

    q_rows = q_ptr + req64 * stride_qt + head[:, None] * stride_qh
    if ROTARY:  # q and the new k arrive unrotated; rounded to their dtype as a separate rotary kernel would
        q = rotated_row(q_rows, offs_d[None, :], partner[None, :], io_mask, cos[None, :], sin[None, :]
                        ).to(q_ptr.dtype.element_ty)
    else:
        q = tl.load(q_rows + offs_d[None, :], mask=io_mask, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    qk_scale = scale * 1.4426950408889634
    # The program whose tiles hold the new token writes its K/V into the cache. EARLY_TILE: it attends to
    # it from registers (its tile was loaded before the write, so that one position is patched in); else it
    # reads it back with the rest of its tiles (grids of more programs than SMs: the tile loop's pipelined
    # loads feed the dots from shared memory).
    new_k = tl.zeros([BLOCK_D], dtype=k_cache_ptr.dtype.element_ty)
    new_v = tl.zeros([BLOCK_D], dtype=v_cache_ptr.dtype.element_ty)
    if holds_new:
        k_row = k_ptr + req64 * stride_nkt + kv_head * stride_nkh
        if ROTARY:
            rot = rotated_row(k_row, offs_d, partner, d_ok, cos, sin)
            new_k = rot.to(k_ptr.dtype.element_ty).to(k_cache_ptr.dtype.element_ty)
        else:
            new_k = tl.load(k_row + offs_d, mask=d_ok, other=0.0).to(k_cache_ptr.dtype.element_ty)
        new_v = tl.load(v_ptr + req64 * stride_nvt + kv_head * stride_nvh + offs_d, mask=d_ok,
                        other=0.0).to(v_cache_ptr.dtype.element_ty)
        write_new_kv(new_k, new_v, slot, k_cache_ptr, v_cache_ptr, kv_head, stride_kb, stride_ko, stride_kh,
                     stride_vb, stride_vo, stride_vh, offs_d, d_ok, BLOCK_SIZE)
    if EARLY_TILE:
        if t_lo < t_hi:
            k_t, v_t = with_new_token(k_first, v_first, t_lo, new_pos, new_k, new_v, TILE_N)
            m_i, l_i, acc = softmax_step(q, pos, t_lo, k_t, v_t, seq_len, m_i, l_i, acc, qk_scale,
                                         TILE_N, PRECISION, INTERPRET)
        m_i, l_i, acc = attend_rest(q, pos, t_lo + 1, t_hi, m_i, l_i, acc, k_cache_ptr, v_cache_ptr,
                                     bt_row, seq_len, new_pos, new_k, new_v, kv_head, qk_scale, stride_kb,
                                     stride_ko, stride_kh, stride_vb, stride_vo, stride_vh, HEAD_DIM, BLOCK_D,
                                     BLOCK_SIZE, TILE_N, PRECISION, INTERPRET)
    else:
        tl.debug_barrier()  # every thread's stores land before any thread loads the tile
        m_i, l_i, acc = attend_tiles(
            q, pos, t_lo, t_hi, k_cache_ptr, v_cache_ptr, bt_row, seq_len,
            kv_head, scale, stride_kb, stride_ko, stride_kh, stride_vb, stride_vo, stride_vh,
            BLOCK_M, HEAD_DIM, BLOCK_D, BLOCK_SIZE, TILE_N, PRECISION, INTERPRET)
    split_row = (req64 * num_heads + head) * num_splits + split
    if not SPLIT:
        store_result(m_i, l_i, acc, out_ptr, out_offs, io_mask, part_ptr, lse_ptr, split_row, row_ok,
                     HEAD_DIM, BLOCK_D, False)
    elif num_active == 1:  # the whole context in this program: the output directly
        store_result(m_i, l_i, acc, out_ptr, out_offs, io_mask, part_ptr, lse_ptr, split_row, row_ok,
                      HEAD_DIM, BLOCK_D, False)
    else:  # a partial; the last of the active splits to finish merges them
        store_result(m_i, l_i, acc, out_ptr, out_offs, io_mask, part_ptr, lse_ptr, split_row, row_ok,
                      HEAD_DIM, BLOCK_D, True)
        tl.debug_barrier()  # every thread's partial stores come before the release of the count
        counter = count_ptr + req64 * (num_heads // GROUP) + kv_head
        num_done = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
        tl.debug_barrier()
        if num_done == num_active - 1:
            merge_own_splits(part_ptr, lse_ptr, out_ptr, out_offs, io_mask, split_row - split, row_ok, num_active,
                          HEAD_DIM, BLOCK_M, BLOCK_D, INTERPRET)
            tl.atomic_xchg(counter, 0, sem="relaxed", scope="gpu")  # zero again for the next launch


def decode_config(num_rows: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype,
                  num_sms: int | None = None) -> dict:
    """Tile size and split count from shapes only: split the KV axis until the GPU has enough programs."""
    # the unified kernel's decode tiles (from an H200 sweep): 128 keys per step for head_dim <= 64
    tile_n = 128 if head_dim <= 64 else 64
    if dtype == torch.float32:
        tile_n = 32
    splits, programs = 1, num_rows * num_kv_heads
    if num_sms and programs < 2 * num_sms:
        # up to ~8 programs an SM: the splits a short context leaves empty still cost their launch (16 rows x
        # 8 kv heads x 32 splits took 11.4 against 7.8 us for x 8 at context 168, below)
        while splits < MAX_SPLITS and programs * splits * 2 <= 8 * num_sms:
            splits *= 2
    if splits > 1 and dtype != torch.float32:
        # A split covers a few tiles (MIN_TILES_PER_SPLIT 1): 64 keys a tile (a short context still splits),
        # no pipelining, 8 warps a program while there are few (row, kv head) pairs. H200, in a CUDA graph
        # (benchmarks/decode_blocks.py; benchmarks/RESULTS.md, 2026-12-02): llama-3.2-1b's heads at batch 1, context
        # 168 / 2048: 5.2 / 9.9 us against 6.8 / 15.8 for 128-key tiles, 4 warps, 2 stages and 4 tiles a
        # split; at batch 16: 7.8 / 34.1 against 10.1 / 38.7; llama-3.1-8b's 6.3 / 15.5 against 11.0 / 17.8
        # (batch 1) and 11.0 / 58.0 against 14.6 / 65.9 (batch 16).
        warps = 8 if 4 * programs <= num_sms else 4
        return {"TILE_N": 64, "NUM_SPLITS": splits, "num_warps": warps, "num_stages": 1}
    return {"TILE_N": tile_n, "NUM_SPLITS": splits, "num_warps": 4, "num_stages": 2}


def paged_decode(
    q: torch.Tensor,  # [T, num_heads, head_dim], row r = request r's one new token
    k_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor,
    out: torch.Tensor,  # [T, num_heads, head_dim]; rows >= query_start_loc[-1] are zeroed
    query_start_loc: torch.Tensor,  # [max_reqs + 1] int32 (its last entry: the number of real rows)
    seq_lens: torch.Tensor,  # [max_reqs] int32
    block_tables: torch.Tensor,  # [max_reqs, max_blocks_per_seq] int32
    scale: float,
    new_kv: tuple[torch.Tensor, torch.Tensor, torch.Tensor],  # (k, v [T, kvh, hd], slot_mapping [T])
    num_splits: int | None = None,
    cos_sin: torch.Tensor | None = None,  # [max_positions, 1, hd]: cos of each half, then sin of each half
    early_tile: bool | None = None,
    blocks: dict | None = None,
) -> None:
    """Attention of one new token per request over its paged context (a uniform decode batch), writing
    this step's K/V rows (new_kv) into the cache.

    Split-KV: each split covers at least MIN_TILES KV tiles, a context that fits one split is written out
    directly, and otherwise the last active split to finish (an atomic count per row and kv head) merges
    the partials.
    cos_sin: q and the new k arrive without rotary embedding; the kernel applies it (at position
    seq_len - 1, each row's new token) as it loads them.
    early_tile (default: at most one (row, kv head) per SM): each program's first cached K/V tile loads
    before the PDL wait and the new token is attended from registers.
    blocks: any of TILE_N, num_warps, num_stages, NUM_SPLITS, MIN_TILES in place of decode_config's and
    MIN_TILES_PER_SPLIT (a tuning grid: benchmarks/decode_blocks.py)."""
    num_rows, num_heads, head_dim = q.shape
    _, block_size, num_kv_heads, _ = k_cache.shape
    max_reqs = seq_lens.shape[0]
    assert num_rows <= max_reqs, "a decode batch has at most one row per request slot"
    assert out.shape == q.shape and out.dtype == q.dtype and k_cache.shape[3] == head_dim
    assert block_size & (block_size - 1) == 0, "block_size must be a power of two"
    if num_rows == 0:
        return
    num_sms = sm_count(q.device.index or 0) if q.is_cuda else None
    cfg = decode_config(num_rows, num_kv_heads, head_dim, q.dtype, num_sms)
    if num_splits is not None:
        assert 1 <= num_splits <= MAX_SPLITS, f"num_splits must be in 1..{MAX_SPLITS}"
        cfg["NUM_SPLITS"] = num_splits
    blocks = dict(blocks or {})
    min_tiles = blocks.pop("MIN_TILES", MIN_TILES_PER_SPLIT)
    cfg.update(blocks)
    splits = cfg.pop("NUM_SPLITS")
    part, lse = make_workspace(num_rows, num_heads, head_dim, splits, q.device) if splits > 1 else (out, out)
    group = num_heads // num_kv_heads
    block_d = max(16, next_power_of_2(head_dim))
    k, v, slot_mapping = new_kv
    assert k.shape == v.shape == (num_rows, num_kv_heads, head_dim) and slot_mapping.shape[0] >= num_rows
    assert k.stride(-1) == 1 and v.stride(-1) == 1, "the head_dim axis must be contiguous"
    if early_tile is None:
        early_tile = num_rows * num_kv_heads <= (num_sms or 132)
    if cos_sin is not None:
        assert head_dim % 2 == 0 and cos_sin.shape[-1] == head_dim and cos_sin.stride(-1) == 1 and q.stride(-1) == 1
    counts = _split_counters(q.device, num_rows * num_kv_heads) if splits > 1 else seq_lens
    _decode_launch[(num_rows, num_kv_heads, splits)](
        q, k_cache, v_cache, out, part, lse, query_start_loc, seq_lens, block_tables,
        k, v, slot_mapping, counts, cos_sin if cos_sin is not None else q,
        scale, max_reqs, num_heads, splits,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), block_tables.stride(0),
        k.stride(0), k.stride(1), v.stride(0), v.stride(1), cos_sin.stride(0) if cos_sin is not None else 0,
        ROTARY=cos_sin is not None, EARLY_TILE=early_tile, GROUP=group, MIN_TILES=min_tiles,
        BLOCK_M=max(16, next_power_of_2(group)), HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_SIZE=block_size,
        SPLIT=splits > 1, PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        INTERPRET=triton_interpreting(), **cfg, **pdl_arguments(q),
    )


# (device) -> int32 counters, one per (row, kv head), zero between launches: the merging split resets
# the one it used. Kept between calls (a decode step allocates none). A launch splits only with fewer
# than 2 x num_sms (row, kv head) programs, so 8192 counters always suffice: allocated once, at the
# first merging launch (inside a recording its zero fill is recorded too, which is harmless: the
# counters are zero between launches anyway).
_counters: dict[torch.device, torch.Tensor] = {}


def _split_counters(device: torch.device, needed: int) -> torch.Tensor:
    held = _counters.get(device)
    if held is None or held.numel() < needed:
        held = torch.zeros(max(needed, 8192), dtype=torch.int32, device=device)
        _counters[device] = held
    return held


# launched through kernels/launch.py (a cached direct launch)
_decode_launch = DirectLauncher(_decode_kernel)
