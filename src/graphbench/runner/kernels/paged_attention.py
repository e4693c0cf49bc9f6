"""Triton paged attention for a flat batch mixing prefill and decode (one call, CUDA-graph safe).

Structure as vLLM's "unified attention": grid = (query tiles, kv heads[, kv splits]). With
P = min(T, max_reqs) request slots (a batch of T tokens has at most T requests), the number of query
tiles, T // BLOCK_Q + P + 1, is a function of buffer shapes only: request r owns tiles
[qsl[r] // BLOCK_Q + r, qsl[r + 1] // BLOCK_Q + r + 1), enough for its q_len tokens, and one extra
pseudo request (index P) owns the padding rows [qsl[P], T), which get zeros. A program
finds its request by binary search over query_start_loc and returns early when its tile is empty.

One program handles BLOCK_Q tokens x all GROUP query heads of one kv head (BLOCK_M = BLOCK_Q * GROUP
rows, >= 16 for tl.dot), so each K/V tile is loaded once per group. It walks the request's KV
positions in TILE_N chunks through the block table, with an online softmax in float32 (exp2).
Split-KV (flash decoding): with NUM_SPLITS > 1 each program covers 1/NUM_SPLITS of the KV tiles and
writes a partial output + log-sum-exp to a workspace; a second kernel merges the splits.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.split_merge import MAX_SPLITS, merge_splits
from graphbench.runner.kernels.util import next_power_of_2, triton_interpreting


@triton.jit
def _find_request(qsl_ptr, tile, max_reqs, BLOCK_Q: tl.constexpr):
    """Largest r in [0, max_reqs] with qsl[r] // BLOCK_Q + r <= tile (keys strictly increase in r)."""
    lo: tl.int32 = 0
    hi: tl.int32 = tl.minimum(max_reqs, tile) + 1  # key(r) >= r, so r <= tile
    while lo < hi:
        mid = (lo + hi) // 2
        key = tl.load(qsl_ptr + mid) // BLOCK_Q + mid
        if key <= tile:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


@triton.jit
def load_kv_tile(t, k_cache_ptr, v_cache_ptr, bt_row, kv_end, kv_head,
                 stride_kb, stride_ko, stride_kh, stride_vb, stride_vo, stride_vh,
                 HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr):
    """K^T [BLOCK_D, TILE_N] and V [TILE_N, BLOCK_D] of KV positions [t * TILE_N, (t + 1) * TILE_N) below
    kv_end, gathered via the block table (zeros past kv_end)."""
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    kpos = t * TILE_N + tl.arange(0, TILE_N)
    k_ok = kpos < kv_end
    block = tl.load(bt_row + kpos // BLOCK_SIZE, mask=k_ok, other=0).to(tl.int64)
    in_block = kpos % BLOCK_SIZE
    k_offs = block * stride_kb + in_block * stride_ko + kv_head * stride_kh
    k = tl.load(k_cache_ptr + k_offs[None, :] + offs_d[:, None], mask=k_ok[None, :] & d_ok[:, None], other=0.0)
    v_offs = block * stride_vb + in_block * stride_vo + kv_head * stride_vh
    v = tl.load(v_cache_ptr + v_offs[:, None] + offs_d[None, :], mask=k_ok[:, None] & d_ok[None, :], other=0.0)
    return k, v


@triton.jit
def softmax_step(q, pos, t, k, v, kv_end, m_i, l_i, acc, qk_scale,
                 TILE_N: tl.constexpr, PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    """Online-softmax step of q [BLOCK_M, BLOCK_D] over one loaded tile (load_kv_tile's k, v at tile t)."""
    kpos = t * TILE_N + tl.arange(0, TILE_N)
    if INTERPRET:  # the interpreter's tl.dot multiplies bfloat16's raw bits: do it in float32
        s = tl.dot(q.to(tl.float32), k.to(tl.float32), input_precision="ieee") * qk_scale
    else:
        s = tl.dot(q, k, input_precision=PRECISION) * qk_scale
    s = tl.where((kpos[None, :] <= pos[:, None]) & (kpos < kv_end)[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_safe = tl.where(m_new > float("-inf"), m_new, 0.0)  # rows with nothing visible yet
    p = tl.exp2(s - m_safe[:, None])
    alpha = tl.exp2(m_i - m_safe)
    l_i = l_i * alpha + tl.sum(p, 1)
    if INTERPRET:
        pv = tl.dot(p.to(v.dtype).to(tl.float32), v.to(tl.float32), input_precision="ieee")
    else:
        pv = tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
    acc = acc * alpha[:, None] + pv
    return m_new, l_i, acc


@triton.jit
def _attend_tile(q, pos, t, m_i, l_i, acc, k_cache_ptr, v_cache_ptr, bt_row, kv_end, kv_head, qk_scale,
                 stride_kb, stride_ko, stride_kh, stride_vb, stride_vo, stride_vh,
                 HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                 TILE_N: tl.constexpr, PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    """Online-softmax step over KV positions [t * TILE_N, (t + 1) * TILE_N), gathered via the block table."""
    k, v = load_kv_tile(t, k_cache_ptr, v_cache_ptr, bt_row, kv_end, kv_head,
                        stride_kb, stride_ko, stride_kh, stride_vb, stride_vo, stride_vh,
                        HEAD_DIM, BLOCK_D, BLOCK_SIZE, TILE_N)
    return softmax_step(q, pos, t, k, v, kv_end, m_i, l_i, acc, qk_scale, TILE_N, PRECISION, INTERPRET)


@triton.jit
def attend_tiles(q, pos, t_lo, t_hi, k_cache_ptr, v_cache_ptr, bt_row, kv_end, kv_head, scale,
                  stride_kb, stride_ko, stride_kh, stride_vb, stride_vo, stride_vh,
                  BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                  TILE_N: tl.constexpr, PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    """Online softmax over KV tiles [t_lo, t_hi) -> (running max, running sum, unnormalised output)."""
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    qk_scale = scale * 1.4426950408889634
    if INTERPRET:  # numpy >= 2.4 cannot turn the interpreter's 1-element scalars into range bounds
        t = t_lo
        while t < t_hi:
            m_i, l_i, acc = _attend_tile(
                q, pos, t, m_i, l_i, acc, k_cache_ptr, v_cache_ptr, bt_row, kv_end, kv_head, qk_scale,
                stride_kb, stride_ko, stride_kh, stride_vb, stride_vo, stride_vh,
                HEAD_DIM, BLOCK_D, BLOCK_SIZE, TILE_N, PRECISION, INTERPRET)
            t += 1
    else:
        for t in range(t_lo, t_hi):
            m_i, l_i, acc = _attend_tile(
                q, pos, t, m_i, l_i, acc, k_cache_ptr, v_cache_ptr, bt_row, kv_end, kv_head, qk_scale,
                stride_kb, stride_ko, stride_kh, stride_vb, stride_vo, stride_vh,
                HEAD_DIM, BLOCK_D, BLOCK_SIZE, TILE_N, PRECISION, INTERPRET)
    return m_i, l_i, acc


@triton.jit
def store_result(m_i, l_i, acc, out_ptr, out_offs, io_mask, part_ptr, lse_ptr, split_row, row_ok,
                  HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, SPLIT: tl.constexpr):
    """The normalised output into out, or (split-KV) into the workspace with its log2-sum-exp:
    part [T, num_heads, splits, HEAD_DIM] and lse [T, num_heads, splits], float32, at split_row."""
    offs_d = tl.arange(0, BLOCK_D)
    o = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    if not SPLIT:
        tl.store(out_ptr + out_offs, o.to(out_ptr.dtype.element_ty), mask=io_mask)
    else:
        tl.store(part_ptr + split_row[:, None] * HEAD_DIM + offs_d[None, :], o, mask=io_mask)
        lse = tl.where(l_i > 0.0, m_i + tl.log2(tl.where(l_i > 0.0, l_i, 1.0)), float("-inf"))
        tl.store(lse_ptr + split_row, lse, mask=row_ok)


# Integer arguments that vary with the batch size are not specialised (Triton would otherwise JIT a
# variant per value class: == 1, divisible by 16, other), which costs seconds in a first capture.
@triton.jit(do_not_specialize=["num_tokens", "max_reqs"])
def _attention_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, out_ptr, part_ptr, lse_ptr,
    qsl_ptr, seq_lens_ptr, block_tables_ptr,
    scale, num_tokens, max_reqs, num_heads,
    stride_qt, stride_qh, stride_ot, stride_oh,
    stride_kb, stride_ko, stride_kh, stride_vb, stride_vo, stride_vh, stride_bt,
    GROUP: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_M: tl.constexpr,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr,
    NUM_SPLITS: tl.constexpr, PRECISION: tl.constexpr, INTERPRET: tl.constexpr,
):
    tile = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    req = _find_request(qsl_ptr, tile, max_reqs, BLOCK_Q)
    q_start = tl.load(qsl_ptr + req)
    q_end = tl.load(qsl_ptr + req + 1, mask=req < max_reqs, other=num_tokens)  # req == max_reqs: padding
    local = tile - (q_start // BLOCK_Q + req)
    row0 = q_start + local * BLOCK_Q
    if row0 >= q_end:
        return

    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    tok = row0 + offs_m // GROUP  # flat-batch row of each tile row
    head = kv_head * GROUP + offs_m % GROUP
    row_ok = (offs_m < BLOCK_Q * GROUP) & (tok < q_end)
    d_ok = offs_d < HEAD_DIM
    io_mask = row_ok[:, None] & d_ok[None, :]
    tok64 = tok.to(tl.int64)
    out_offs = tok64[:, None] * stride_ot + head[:, None] * stride_oh + offs_d[None, :]
    if req == max_reqs:  # padding rows past the real tokens: finite output, nothing else
        if NUM_SPLITS == 1:
            zero = tl.zeros([BLOCK_M, BLOCK_D], dtype=out_ptr.dtype.element_ty)
            tl.store(out_ptr + out_offs, zero, mask=io_mask)
        return  # (split mode: the merge kernel zeroes these rows)

    seq_len = tl.load(seq_lens_ptr + req)
    context = seq_len - (q_end - q_start)  # tokens already in the cache before this step
    pos = context + (tok - q_start)  # absolute position of each row; attends to keys 0..pos
    q = tl.load(q_ptr + tok64[:, None] * stride_qt + head[:, None] * stride_qh + offs_d[None, :],
                mask=io_mask, other=0.0)
    kv_end = tl.minimum(seq_len, context + (local + 1) * BLOCK_Q)  # last row's pos + 1
    num_kv_tiles = tl.cdiv(kv_end, TILE_N)
    if NUM_SPLITS == 1:
        t_lo = 0
        t_hi = num_kv_tiles
    else:
        per_split = tl.cdiv(num_kv_tiles, NUM_SPLITS)
        t_lo = split * per_split
        t_hi = tl.minimum(t_lo + per_split, num_kv_tiles)

    bt_row = block_tables_ptr + req.to(tl.int64) * stride_bt
    m_i, l_i, acc = attend_tiles(
        q, pos, t_lo, t_hi, k_cache_ptr, v_cache_ptr, bt_row, kv_end, kv_head, scale,
        stride_kb, stride_ko, stride_kh, stride_vb, stride_vo, stride_vh,
        BLOCK_M, HEAD_DIM, BLOCK_D, BLOCK_SIZE, TILE_N, PRECISION, INTERPRET)
    split_row = (tok64 * num_heads + head) * NUM_SPLITS + split
    store_result(m_i, l_i, acc, out_ptr, out_offs, io_mask, part_ptr, lse_ptr, split_row, row_ok,
                  HEAD_DIM, BLOCK_D, NUM_SPLITS != 1)


@functools.lru_cache(maxsize=None)
def sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def attention_config(num_tokens: int, max_reqs: int, num_heads: int, num_kv_heads: int, head_dim: int,
                     dtype: torch.dtype, num_sms: int | None = None) -> dict:
    """Tile sizes and split count from shapes only (so a captured graph stays valid for any values)."""
    group = num_heads // num_kv_heads
    prefill_like = num_tokens >= 4 * max_reqs and num_tokens >= 64  # big chunks per request
    # From an H200 sweep in bf16 (decode: batch 1..256 x context 512..4000; prefill: 2048 tokens).
    if prefill_like:
        block_m, tile_n, num_warps, num_stages = (128, 64, 8, 2) if head_dim <= 64 else (64, 64, 4, 3)
    else:
        block_m, tile_n, num_warps, num_stages = 16, (128 if head_dim <= 64 else 64), 4, 2
    block_m = max(block_m, next_power_of_2(group))
    if dtype == torch.float32:
        tile_n = min(tile_n, 32)
    splits = 1
    programs = min(num_tokens, max_reqs) * num_kv_heads  # live (tile, kv head) programs in decode
    if num_sms and not prefill_like and programs < 2 * num_sms:  # too few: split the KV axis
        while splits < MAX_SPLITS and programs * splits * 2 <= 16 * num_sms:
            splits *= 2
    return dict(BLOCK_M=block_m, BLOCK_Q=block_m // group, TILE_N=tile_n, NUM_SPLITS=splits,
                num_warps=num_warps, num_stages=num_stages)


def make_workspace(num_tokens: int, num_heads: int, head_dim: int, num_splits: int, device) -> tuple:
    """Split-KV scratch (float32): partial outputs [T, h, S, hd] and log2-sum-exp [T, h, S]."""
    part = torch.empty((num_tokens, num_heads, num_splits, head_dim), dtype=torch.float32, device=device)
    lse = torch.empty((num_tokens, num_heads, num_splits), dtype=torch.float32, device=device)
    return part, lse


def paged_attention(
    q: torch.Tensor,  # [T, num_heads, head_dim]
    k_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor,
    out: torch.Tensor,  # [T, num_heads, head_dim], same dtype as q; fully written (padding rows = 0)
    query_start_loc: torch.Tensor,  # [max_reqs + 1] int32
    seq_lens: torch.Tensor,  # [max_reqs] int32
    block_tables: torch.Tensor,  # [max_reqs, max_blocks_per_seq] int32
    scale: float,
    num_splits: int | None = None,  # None: chosen from shapes; 1 disables split-KV
    workspace: tuple | None = None,  # from make_workspace (else allocated when splitting)
    config: dict | None = None,  # overrides of attention_config's choices (tuning)
) -> None:
    num_tokens, num_heads, head_dim = q.shape
    _, block_size, num_kv_heads, _ = k_cache.shape
    max_reqs = seq_lens.shape[0]
    assert num_heads % num_kv_heads == 0 and k_cache.shape[3] == head_dim and v_cache.shape == k_cache.shape
    assert out.shape == q.shape and out.dtype == q.dtype
    assert query_start_loc.shape[0] == max_reqs + 1 and block_tables.shape[0] == max_reqs
    assert block_size & (block_size - 1) == 0, "block_size must be a power of two"
    for t in (q, out, k_cache, v_cache, block_tables):
        assert t.stride(-1) == 1, "the last axis must be contiguous"
    if num_tokens == 0:
        return
    # A batch of T tokens has at most T requests, and request slots past the real ones repeat
    # query_start_loc's last value: the kernels need only the first min(T, max_reqs) slots. That keeps
    # the grid small for small batches in a large engine (e.g. 1 token with 256 request slots).
    max_reqs = min(num_tokens, max_reqs)
    num_sms = sm_count(q.device.index or 0) if q.is_cuda else None
    cfg = attention_config(num_tokens, max_reqs, num_heads, num_kv_heads, head_dim, q.dtype, num_sms)
    if num_splits is not None:
        assert 1 <= num_splits <= MAX_SPLITS and num_splits & (num_splits - 1) == 0, "num_splits: a power of two"
        cfg["NUM_SPLITS"] = num_splits
    cfg.update(config or {})
    cfg["BLOCK_Q"] = cfg["BLOCK_M"] // (num_heads // num_kv_heads)
    splits = cfg["NUM_SPLITS"]
    if splits > 1:
        part, lse = workspace or make_workspace(num_tokens, num_heads, head_dim, splits, q.device)
        assert part.shape == (num_tokens, num_heads, splits, head_dim) and part.is_contiguous()
        assert lse.shape == (num_tokens, num_heads, splits) and lse.is_contiguous()
    else:
        part, lse = out, out  # unused
    num_tiles = num_tokens // cfg["BLOCK_Q"] + max_reqs + 1
    _attention_launch[(num_tiles, num_kv_heads, splits)](
        q, k_cache, v_cache, out, part, lse, query_start_loc, seq_lens, block_tables,
        scale, num_tokens, max_reqs, num_heads,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), block_tables.stride(0),
        GROUP=num_heads // num_kv_heads, HEAD_DIM=head_dim, BLOCK_D=max(16, next_power_of_2(head_dim)),
        BLOCK_SIZE=block_size, PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        INTERPRET=triton_interpreting(), **cfg,
    )
    if splits > 1:
        merge_splits(part, lse, out, query_start_loc, max_reqs)


# launched through kernels/launch.py (a cached direct launch)
_attention_launch = DirectLauncher(_attention_kernel)
