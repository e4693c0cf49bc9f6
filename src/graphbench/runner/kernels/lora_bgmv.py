"""The batch's LoRA delta as two Triton kernels over tokens with per-token adapter indices (punica's
BGMV/SGMV idea: every token of a flat batch may use a different adapter, or none).

    shrink:      v[t, :]    = sum_s x[t, k-split s] @ A[idx[t], :, k-split s]^T      (fp32, splits summed in order)
    expand-add:  out[t, :] += v[t, :] @ B[idx[t]]^T                                 (rows with idx[t] >= 0)

A [L, R', K] and B [L, N, R'] are the adapters' static slot buffers (runner/lora/weights.py); idx [T]
int32 holds each token's adapter row, -1 for none (nothing is added to its row). B may be
block-diagonal over output segments (qkv: q, k, v each with their own R = R' / segments columns; gate/up
likewise): the expand reads only a row's own segment's R columns, not the zeros beside them.

Made for CUDA-graph replay: the grid depends on shapes only (T, K, N), nothing is read back to the host,
and which adapters a block of tokens uses is found inside the kernel. A program owns BLOCK_T
consecutive tokens and walks the groups of adapter slots they use in increasing order (the next is the
smallest group above the current), one tensor-core dot a group: the group's slots' tiles side by side
along the dot's K (up to 32 columns in the expand: 2 slots of rank 16; 64 in a decode shrink), each
token's row nonzero only in its own slot's columns. A decode block of 16 requests over 4 rank-16 adapters makes two dots a segment, not one a loaded
adapter in turn (each waiting for the last one's tile: 12 for qkv's three segments, now 6), and reads each
used tile once; a prefill block (one request's tokens) reads one. There is no sort by adapter: the shrink splits K
into SPLIT_K programs per token block that write their own partial sums, and the last of them to finish (an
atomic count) adds them up in split order, so that v is the same whichever finishes first; the expand and the
projections' epilogues load v once.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.util import cdiv, next_power_of_2

K_SPLIT = 256  # K columns per shrink program: K = 2048 gives 8 programs per token block, 8192 gives 32


@triton.jit
def _dot(a, b, PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    if INTERPRET:  # the interpreter's tl.dot multiplies bfloat16's raw bits: do it in float32
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    return tl.dot(a, b, input_precision=PRECISION)


@triton.jit
def _next_group(group, cur):
    """The smallest slot group in the block above cur (1 << 30: no more); group: each token's, -1 for none."""
    return tl.min(tl.where(group > cur, group, 1 << 30), axis=0)


@triton.jit
def _slot_groups(idx, GROUP: tl.constexpr):
    """Each token's group of GROUP adapter slots, -1 for a token without an adapter."""
    return tl.where(idx >= 0, idx // GROUP, -1)


@triton.jit
def _shrink_kernel(x_ptr, a_ptr, idx_ptr, part_ptr, sum_ptr, count_ptr, T, K, R, stride_xt, stride_al, stride_ar,
                   BLOCK_T: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, K_SPLIT: tl.constexpr,
                   SPLIT_K: tl.constexpr, SUM_COLS: tl.constexpr, GROUP: tl.constexpr, PRECISION: tl.constexpr,
                   INTERPRET: tl.constexpr, PDL: tl.constexpr = False):
    pid_t, pid_k = tl.program_id(0), tl.program_id(1)
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    t_ok = offs_t < T
    # [BLOCK_T] adapter rows, -1: none; before the wait: the step's first kernel wrote them (kernels/pdl.py)
    idx = tl.load(idx_ptr + offs_t, mask=t_ok, other=-1)
    pdl_enter(PDL)
    group = _slot_groups(idx, GROUP)
    cols = tl.arange(0, GROUP * BLOCK_R)  # the group's slots' rank columns side by side
    col_r = cols % BLOCK_R
    r_ok = col_r < R
    offs_k = tl.arange(0, BLOCK_K)
    out = part_ptr + (pid_k * T + offs_t[:, None]) * R + col_r[None, :]
    cur = _next_group(group, -1)
    while cur < (1 << 30):
        slot = cur * GROUP + cols // BLOCK_R  # [GROUP * BLOCK_R]
        used = tl.max(((idx[:, None] == slot[None, :]) & t_ok[:, None]).to(tl.int32), axis=0) > 0
        in_group = (group == cur) & t_ok  # this group's tokens: the other rows of x load as zeros
        a_rows = a_ptr + slot.to(tl.int64)[:, None] * stride_al + col_r[:, None] * stride_ar  # [GROUP * BLOCK_R, 1]
        acc = tl.zeros([BLOCK_T, GROUP * BLOCK_R], dtype=tl.float32)
        for kk in range(0, K_SPLIT, BLOCK_K):  # constexpr bounds (the interpreter needs them)
            k = pid_k * K_SPLIT + kk + offs_k
            k_ok = k < K
            x = tl.load(x_ptr + offs_t[:, None] * stride_xt + k[None, :],
                        mask=in_group[:, None] & k_ok[None, :], other=0.0)  # [BLOCK_T, BLOCK_K]
            a = tl.load(a_rows + k[None, :], mask=(used & r_ok)[:, None] & k_ok[None, :], other=0.0)
            acc += _dot(x, tl.trans(a), PRECISION, INTERPRET)
        # each token's own slot's columns: its R partial sums (a slot's columns of another token: not stored)
        tl.store(out, acc, mask=(idx[:, None] == slot[None, :]) & t_ok[:, None] & r_ok[None, :])
        cur = _next_group(group, cur)
    # every real row is written (zeros without an adapter): the splits are summed unmasked by idx
    none = (idx < 0) & t_ok
    tl.store(out, tl.zeros([BLOCK_T, GROUP * BLOCK_R], dtype=tl.float32),
             mask=none[:, None] & (r_ok & (cols < BLOCK_R))[None, :])
    if SPLIT_K > 1:
        _sum_splits(part_ptr, sum_ptr, count_ptr + pid_t, offs_t, t_ok, T, R, SPLIT_K, BLOCK_T, BLOCK_R, SUM_COLS)


@triton.jit
def _sum_splits(part_ptr, sum_ptr, count_ptr, offs_t, t_ok, T, R, SPLIT_K: tl.constexpr, BLOCK_T: tl.constexpr,
                BLOCK_R: tl.constexpr, SUM_COLS: tl.constexpr):
    """The last split of a token block to finish (an atomic count, as the skinny GEMM merges its splits) sums
    the block's partials in split order into sum [T, R], SUM_COLS rank columns at a time: once, where every
    projection tile's epilogue summed them again (down's 32 splits cost its LoRA epilogue 7.4 us a layer on the
    H200, benchmarks/RESULTS.md, 2026-12-05)."""
    tl.debug_barrier()  # every thread's partial stores come before the release of the count
    num_done = tl.atomic_add(count_ptr, 1, sem="acq_rel", scope="gpu")
    tl.debug_barrier()
    if num_done == SPLIT_K - 1:
        for c in tl.static_range(BLOCK_R // SUM_COLS):
            offs_r = c * SUM_COLS + tl.arange(0, SUM_COLS)
            tile = offs_t[:, None] * R + offs_r[None, :]
            ok = t_ok[:, None] & (offs_r < R)[None, :]
            total = tl.zeros([BLOCK_T, SUM_COLS], dtype=tl.float32)
            # .cg: from L2, where the other programs' stores are (never a stale line of this SM's L1)
            if BLOCK_T * SUM_COLS * SPLIT_K <= 8192:  # a decode block's splits in one round of loads
                for s in tl.static_range(SPLIT_K):
                    total += tl.load(part_ptr + s * T * R + tile, mask=ok, other=0.0, cache_modifier=".cg")
            else:  # (unrolled, a prefill block's would not fit the registers)
                for s in range(SPLIT_K):
                    total += tl.load(part_ptr + s * T * R + tile, mask=ok, other=0.0, cache_modifier=".cg")
            tl.store(sum_ptr + tile, total, mask=ok)
        tl.atomic_xchg(count_ptr, 0, sem="relaxed", scope="gpu")  # zero again for the next launch


@triton.jit
def lora_expand_delta(v_ptr, b_ptr, idx, offs_t, t_ok, rows, rows_ok, T, R, seg1, seg2, stride_bl, stride_bn,
                      NUM_SEG: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_RS: tl.constexpr, GROUP: tl.constexpr, PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    """[BLOCK_T, BLOCK_N] float32: the delta of B's rows `rows` for the tokens offs_t (adapter rows idx, -1:
    none, whose rows stay 0): the shrink's output, rounded to B's dtype, times each
    token's own adapter's B rows of their segment; GROUP slots' B tiles in one dot. The expand kernel's body,
    and the epilogue of the skinny GEMM that adds the delta where it stores the projection (kernels/skinny_gemm.py)."""
    seg = (rows >= seg1).to(tl.int32) + (rows >= seg2).to(tl.int32)  # [BLOCK_N] each row's segment
    # the segments these rows hold (a tile of qkv's mostly lies in one of q, k, v; gate's and up's in one)
    seg_lo = tl.min(tl.where(rows_ok, seg, NUM_SEG), axis=0)
    seg_hi = tl.max(tl.where(rows_ok, seg, -1), axis=0)
    rs = R // NUM_SEG  # rank columns of one segment
    # [.., GROUP, BLOCK_RS] tiles (the rank columns contiguous), reshaped to [.., GROUP * BLOCK_RS] for the dot
    group = _slot_groups(idx, GROUP)
    acc = tl.zeros([BLOCK_T, BLOCK_N], dtype=tl.float32)
    cur = _next_group(group, -1)
    while cur < (1 << 30):
        slot, mine, used = _group_columns(idx, t_ok, cur, rs, GROUP, BLOCK_RS)
        for j in tl.static_range(NUM_SEG):
            if (seg_lo <= j) & (j <= seg_hi):
                acc = _segment_delta(acc, v_ptr, b_ptr, offs_t, rows, T, R, rs, j, mine, used,
                                     rows_ok & (seg == j), slot, stride_bl, stride_bn, BLOCK_T, BLOCK_N,
                                     BLOCK_RS, GROUP, PRECISION, INTERPRET)
        cur = _next_group(group, cur)
    return acc


@triton.jit
def lora_expand_gate_up(v_ptr, b_ptr, idx, offs_t, t_ok, rows, rows_ok, T, R, up_row, stride_bl, stride_bn,
                        BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_RS: tl.constexpr,
                        GROUP: tl.constexpr, PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    """(gate's delta, up's delta) [BLOCK_T, BLOCK_N] each for gate's B rows `rows` (segment 0) and up's rows
    rows + up_row (segment 1), as lora_expand_delta gives each, in one walk of the slot groups: both
    segments' loads in one round (the gated GEMM's epilogue: kernels/skinny_gemm.py)."""
    rs = R // 2
    group = _slot_groups(idx, GROUP)
    gate = tl.zeros([BLOCK_T, BLOCK_N], dtype=tl.float32)
    up = tl.zeros([BLOCK_T, BLOCK_N], dtype=tl.float32)
    cur = _next_group(group, -1)
    while cur < (1 << 30):
        slot, mine, used = _group_columns(idx, t_ok, cur, rs, GROUP, BLOCK_RS)
        gate = _segment_delta(gate, v_ptr, b_ptr, offs_t, rows, T, R, rs, 0, mine, used, rows_ok, slot,
                              stride_bl, stride_bn, BLOCK_T, BLOCK_N, BLOCK_RS, GROUP, PRECISION, INTERPRET)
        up = _segment_delta(up, v_ptr, b_ptr, offs_t, rows + up_row, T, R, rs, 1, mine, used, rows_ok, slot,
                            stride_bl, stride_bn, BLOCK_T, BLOCK_N, BLOCK_RS, GROUP, PRECISION, INTERPRET)
        cur = _next_group(group, cur)
    return gate, up


@triton.jit
def _group_columns(idx, t_ok, cur, rs, GROUP: tl.constexpr, BLOCK_RS: tl.constexpr):
    """Slot group cur's slots [GROUP], each token's own slot's rank columns [BLOCK_T, GROUP, BLOCK_RS] (rs of
    BLOCK_RS real), and the columns of the slots some token of the block uses [GROUP, BLOCK_RS]."""
    slot = cur * GROUP + tl.arange(0, GROUP)
    r_ok = tl.arange(0, BLOCK_RS) < rs
    mine = (idx[:, None, None] == slot[None, :, None]) & t_ok[:, None, None] & r_ok[None, None, :]
    return slot, mine, tl.max(mine.to(tl.int32), axis=0) > 0


@triton.jit
def _segment_delta(acc, v_ptr, b_ptr, offs_t, rows, T, R, rs, j, mine, used, rows_in_segment, slot, stride_bl,
                   stride_bn, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_RS: tl.constexpr, GROUP: tl.constexpr,
                   PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    """acc + segment j's delta for one group of slots: its shrink output (rounded to B's dtype, as the torch
    path's x A^T is) on each token's own slot's columns, times those slots' B rows of the segment (rows of other
    segments are not read), in one dot."""
    offs_r = tl.arange(0, BLOCK_RS)
    v = tl.load(v_ptr + (offs_t[:, None, None] * R + j * rs + offs_r[None, None, :]), mask=mine, other=0.0)
    v = tl.reshape(v.to(b_ptr.dtype.element_ty), [BLOCK_T, GROUP * BLOCK_RS])  # [BLOCK_T, GROUP, BLOCK_RS] flat
    b = tl.load(b_ptr + slot.to(tl.int64)[None, :, None] * stride_bl + rows[:, None, None] * stride_bn
                + (j * rs + offs_r)[None, None, :], mask=rows_in_segment[:, None, None] & used[None, :, :],
                other=0.0)  # [BLOCK_N, GROUP, BLOCK_RS]
    return acc + _dot(v, tl.trans(tl.reshape(b, [BLOCK_N, GROUP * BLOCK_RS])), PRECISION, INTERPRET)


@triton.jit
def _expand_kernel(v_ptr, b_ptr, idx_ptr, out_ptr, T, N, R, seg1, seg2, stride_bl, stride_bn, stride_ot,
                   NUM_SEG: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_RS: tl.constexpr, GROUP: tl.constexpr, PRECISION: tl.constexpr, INTERPRET: tl.constexpr,
                   PDL: tl.constexpr = False):
    pdl_enter(PDL)
    pid_t, pid_n = tl.program_id(0), tl.program_id(1)
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    t_ok = offs_t < T
    idx = tl.load(idx_ptr + offs_t, mask=t_ok, other=-1)  # [BLOCK_T]
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < N
    acc = lora_expand_delta(v_ptr, b_ptr, idx, offs_t, t_ok, offs_n, n_ok, T, R, seg1, seg2, stride_bl, stride_bn,
                            NUM_SEG, BLOCK_T, BLOCK_N, BLOCK_RS, GROUP, PRECISION, INTERPRET)
    keep = (idx >= 0)[:, None] & n_ok[None, :]  # tokens without an adapter: their rows are not touched
    dst = out_ptr + offs_t[:, None] * stride_ot + offs_n[None, :]
    o = tl.load(dst, mask=keep, other=0.0).to(tl.float32)
    tl.store(dst, (o + acc).to(out_ptr.dtype.element_ty), mask=keep)


# rank columns of one dot's group of slots in the expand: 2 slots of rank 16, 1 of rank 32 or 64. 64 (4 of rank
# 16) made qkv's expand (3 segments, BLOCK_N 128, 4 warps) keep a 48-byte stack frame on sm_90, and down's
# epilogue (32 K splits) 56-240 bytes. The decode shrink's one [64, 256] A tile holds 4 slots of rank 16 without
# spilling (tests/test_triton_compile.py): its group takes 64.
MAX_GROUP_COLUMNS = 32
MAX_SHRINK_GROUP_COLUMNS = 64


def slot_group(num_slots: int, block_rank: int, max_columns: int = MAX_GROUP_COLUMNS) -> int:
    """Adapter slots side by side in one dot (a power of two): as many as fit max_columns, at most all."""
    return min(next_power_of_2(num_slots), max(1, max_columns // block_rank))


def lora_blocks(num_tokens: int, k: int, rank_total: int, num_segments: int, num_slots: int) -> dict:
    """Block sizes and warps from the shapes alone (a recording's T is fixed): BLOCK_T 16 for decode-sized
    batches (the smallest tensor-core tile), 64 for prefill chunks, whose blocks mostly hold one request.
    8 warps for the larger tiles: with 4, a [64, 64] shrink tile or a BLOCK_T 64 expand needed 230-255
    registers a thread and spilled where the shapes had no divisibility by 16, and rank 128's expand (B tiles of
    128 x 128) kept an 80-byte stack frame (sm_90 compiles, cuobjdump)."""
    block_t, block_r = 16 if num_tokens <= 64 else 64, max(16, next_power_of_2(rank_total))
    k_split = max(16, min(K_SPLIT, next_power_of_2(k)))
    block_rs = max(16, next_power_of_2(rank_total // num_segments))
    # slots side by side only in decode-sized blocks, which hold many requests' adapters (a prefill block mostly
    # holds one request's tokens; its expand with two slots a dot kept a 40-byte stack frame on sm_90)
    shrink_group = slot_group(num_slots, block_r, MAX_SHRINK_GROUP_COLUMNS) if block_t == 16 else 1
    # a decode block's split in one tile, one round of loads: a loop of 64-column tiles waited for each in turn
    # (the launch took 4.1 us at 16 rows on the H200, benchmarks/RESULTS.md, 2026-12-05); prefill blocks loop
    # (at most 16384 values of A a tile: qkv's shrink at rank 128 or 256 spilled 0.8-11 KB with the whole split)
    block_k = min(k_split, max(16, 16384 // (block_r * shrink_group))) if block_t == 16 else min(64, k_split)
    return {"BLOCK_T": block_t, "BLOCK_K": block_k, "K_SPLIT": k_split, "SPLIT_K": cdiv(k, k_split),
            "BLOCK_R": block_r, "SUM_COLS": min(block_r, 1024 // block_t), "SHRINK_GROUP": shrink_group, "BLOCK_RS": block_rs,
            "GROUP": slot_group(num_slots, block_rs) if block_t == 16 else 1, "BLOCK_N": 128,
            "shrink_warps": 8 if block_t * block_r * shrink_group >= 4096 else 4,
            "expand_warps": 8 if block_t == 64 or block_rs >= 128 else 4}


class ShrunkInput:
    """The shrink's output for one projection, and what expanding it needs: v [T, R'] in float32, the B buffer,
    each token's adapter row, where B's segments 1 and 2 start, the expand's blocks (lora_blocks)."""

    __slots__ = ("v", "b", "index", "bounds", "block_rs", "group", "num_segments", "precision")

    def __init__(self, v: torch.Tensor, b: torch.Tensor, index: torch.Tensor, segments: list[int], dtype: torch.dtype):
        n, r = b.shape[1], b.shape[2]
        assert sum(segments) == n and 1 <= len(segments) <= 3 and r % len(segments) == 0
        assert index.dtype == torch.int32 and v.shape == (index.shape[0], r) and v.is_contiguous()
        self.v, self.b, self.index = v, b, index
        self.bounds = [sum(segments[:i + 1]) for i in range(len(segments) - 1)] + [n, n]  # segments 1, 2 start
        self.num_segments = len(segments)
        cfg = lora_blocks(index.shape[0], 1, r, len(segments), b.shape[0])
        self.block_rs, self.group = cfg["BLOCK_RS"], cfg["GROUP"]
        self.precision = "ieee" if dtype == torch.float32 else "tf32"  # float32 models: no tf32 rounding

    def expand_arguments(self) -> tuple:
        """The arguments an expanding kernel takes after its own: v, B, index, R', the two segment bounds, B's
        strides (kernels/skinny_gemm.py's LoRA epilogue)."""
        b = self.b
        return (self.v, b, self.index, b.shape[2], self.bounds[0], self.bounds[1], b.stride(0), b.stride(1))


# device -> int32 counts of a shrink's finished splits per token block, zero between launches (the last split
# resets its own). One buffer a device, made at its first shrink (a warm-up's, before any capture) and sized for
# the most token blocks a step holds: made lazily per block count, a recording could be the first to ask for one
# and take it from its graph pool, where its zeros are never written. Kept for the life of the process.
MAX_COUNT_BLOCKS = 16384  # 1M tokens in blocks of 64, 256K in blocks of 16
_split_counts: dict[torch.device, torch.Tensor] = {}


def _counts(device: torch.device, blocks: int) -> torch.Tensor:
    assert blocks <= MAX_COUNT_BLOCKS, f"{blocks} token blocks in one shrink"
    held = _split_counts.get(device)
    if held is None:
        assert not (device.type == "cuda" and torch.cuda.is_current_stream_capturing()), \
            "the shrink's split counts must be made before a CUDA-graph capture (a warm-up shrink first)"
        held = _split_counts[device] = torch.zeros(MAX_COUNT_BLOCKS, dtype=torch.int32, device=device)
    return held[:blocks]


def lora_shrink(x: torch.Tensor,  # [T, K], unit stride along K
                a: torch.Tensor,  # [L, R', K] contiguous
                b: torch.Tensor,  # [L, N, R'] contiguous (block-diagonal over the segments)
                index: torch.Tensor,  # [T] int32: each token's adapter row, -1 for none
                segments: list[int],  # output rows of each segment (sum N), each with R' / len columns
                *, interpret: bool = False) -> ShrunkInput:
    """v = x A[idx]^T in one launch (its K splits summed by the last to finish), ready to be expanded by B."""
    t, k = x.shape
    r = b.shape[2]
    assert a.shape[1:] == (r, k) and a.shape[0] == b.shape[0] and index.shape == (t,) and t > 0
    assert x.stride(1) == 1 and a.is_contiguous() and b.is_contiguous()
    cfg = lora_blocks(t, k, r, len(segments), a.shape[0])
    splits, blocks = cfg["SPLIT_K"], cdiv(t, cfg["BLOCK_T"])
    v = torch.empty((t, r), dtype=torch.float32, device=x.device)
    # one split writes v itself; more write partials [SPLIT_K, T, R'] that the last of a token block sums
    part = torch.empty((splits, t, r), dtype=torch.float32, device=x.device) if splits > 1 else v
    counts = _counts(x.device, blocks) if splits > 1 else index
    shrunk = ShrunkInput(v, b, index, segments, x.dtype)
    _shrink_launch[(blocks, splits)](
        x, a, index, part, v, counts, t, k, r, x.stride(0), a.stride(0), a.stride(1),
        BLOCK_T=cfg["BLOCK_T"], BLOCK_R=cfg["BLOCK_R"], BLOCK_K=cfg["BLOCK_K"], K_SPLIT=cfg["K_SPLIT"], SPLIT_K=splits,
        SUM_COLS=cfg["SUM_COLS"],
        GROUP=cfg["SHRINK_GROUP"], PRECISION=shrunk.precision, INTERPRET=interpret, num_warps=cfg["shrink_warps"],
        num_stages=2, **pdl_arguments(x))
    return shrunk


def lora_add_triton(out: torch.Tensor,  # [T, N], unit stride along N; out[t] += delta for idx[t] >= 0
                    x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, index: torch.Tensor, segments: list[int],
                    *, interpret: bool = False) -> None:
    """out += x A[idx]^T B[idx]^T row by row, in two launches (shrink, expand-add); lora_shrink's arguments."""
    t, n = out.shape[0], b.shape[1]
    assert out.shape == (t, n) and x.shape[0] == t and out.stride(1) == 1
    if t == 0:
        return
    shrunk = lora_shrink(x, a, b, index, segments, interpret=interpret)
    cfg = lora_blocks(t, x.shape[1], b.shape[2], len(segments), b.shape[0])
    v, b, index, *rest = shrunk.expand_arguments()
    _expand_launch[(cdiv(t, cfg["BLOCK_T"]), cdiv(n, cfg["BLOCK_N"]))](
        v, b, index, out, t, n, *rest, out.stride(0), NUM_SEG=len(segments),
        BLOCK_T=cfg["BLOCK_T"], BLOCK_N=cfg["BLOCK_N"], BLOCK_RS=cfg["BLOCK_RS"], GROUP=cfg["GROUP"],
        PRECISION=shrunk.precision, INTERPRET=interpret, num_warps=cfg["expand_warps"], num_stages=2,
        **pdl_arguments(out))


# launched through kernels/launch.py (a cached direct launch)
_shrink_launch = DirectLauncher(_shrink_kernel)
_expand_launch = DirectLauncher(_expand_kernel)
