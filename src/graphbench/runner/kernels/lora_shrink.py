"""The LoRA shrink of kernels/lora_bgmv.py: v = x A[idx]^T for a flat batch, K split over programs whose partial
sums the last of a token block to finish adds up in split order (v is the same whichever finishes first)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.lora_blocks import ShrunkInput, lora_blocks, lora_dot, next_slot_group, slot_groups
from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.util import cdiv


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
    group = slot_groups(idx, GROUP)
    cols = tl.arange(0, GROUP * BLOCK_R)  # the group's slots' rank columns side by side
    col_r = cols % BLOCK_R
    r_ok = col_r < R
    offs_k = tl.arange(0, BLOCK_K)
    out = part_ptr + (pid_k * T + offs_t[:, None]) * R + col_r[None, :]
    cur = next_slot_group(group, -1)
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
            acc += lora_dot(x, tl.trans(a), PRECISION, INTERPRET)
        # each token's own slot's columns: its R partial sums (a slot's columns of another token: not stored)
        tl.store(out, acc, mask=(idx[:, None] == slot[None, :]) & t_ok[:, None] & r_ok[None, :])
        cur = next_slot_group(group, cur)
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


# launched through kernels/launch.py (a cached direct launch)
_shrink_launch = DirectLauncher(_shrink_kernel)
