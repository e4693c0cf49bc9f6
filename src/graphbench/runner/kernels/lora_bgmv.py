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

The shrink is in kernels/lora_shrink.py, what the kernels share in kernels/lora_blocks.py; the expand is here.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.lora_blocks import lora_blocks, lora_dot, next_slot_group, slot_groups
from graphbench.runner.kernels.lora_shrink import lora_shrink
from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.util import cdiv


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
    group = slot_groups(idx, GROUP)
    acc = tl.zeros([BLOCK_T, BLOCK_N], dtype=tl.float32)
    cur = next_slot_group(group, -1)
    while cur < (1 << 30):
        slot, mine, used = _group_columns(idx, t_ok, cur, rs, GROUP, BLOCK_RS)
        for j in tl.static_range(NUM_SEG):
            if (seg_lo <= j) & (j <= seg_hi):
                acc = _segment_delta(acc, v_ptr, b_ptr, offs_t, rows, T, R, rs, j, mine, used,
                                     rows_ok & (seg == j), slot, stride_bl, stride_bn, BLOCK_T, BLOCK_N,
                                     BLOCK_RS, GROUP, PRECISION, INTERPRET)
        cur = next_slot_group(group, cur)
    return acc


@triton.jit
def lora_expand_gate_up(v_ptr, b_ptr, idx, offs_t, t_ok, rows, rows_ok, T, R, up_row, stride_bl, stride_bn,
                        BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_RS: tl.constexpr,
                        GROUP: tl.constexpr, PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    """(gate's delta, up's delta) [BLOCK_T, BLOCK_N] each for gate's B rows `rows` (segment 0) and up's rows
    rows + up_row (segment 1), as lora_expand_delta gives each, in one walk of the slot groups: both
    segments' loads in one round (the gated GEMM's epilogue: kernels/skinny_gemm.py)."""
    rs = R // 2
    group = slot_groups(idx, GROUP)
    gate = tl.zeros([BLOCK_T, BLOCK_N], dtype=tl.float32)
    up = tl.zeros([BLOCK_T, BLOCK_N], dtype=tl.float32)
    cur = next_slot_group(group, -1)
    while cur < (1 << 30):
        slot, mine, used = _group_columns(idx, t_ok, cur, rs, GROUP, BLOCK_RS)
        gate = _segment_delta(gate, v_ptr, b_ptr, offs_t, rows, T, R, rs, 0, mine, used, rows_ok, slot,
                              stride_bl, stride_bn, BLOCK_T, BLOCK_N, BLOCK_RS, GROUP, PRECISION, INTERPRET)
        up = _segment_delta(up, v_ptr, b_ptr, offs_t, rows + up_row, T, R, rs, 1, mine, used, rows_ok, slot,
                            stride_bl, stride_bn, BLOCK_T, BLOCK_N, BLOCK_RS, GROUP, PRECISION, INTERPRET)
        cur = next_slot_group(group, cur)
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
    return acc + lora_dot(v, tl.trans(tl.reshape(b, [BLOCK_N, GROUP * BLOCK_RS])), PRECISION, INTERPRET)


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
_expand_launch = DirectLauncher(_expand_kernel)
