"""What the LoRA kernels share (kernels/lora_bgmv.py describes them): block sizes from the shapes, the groups of
adapter slots one dot covers, the shrink's output as the expand and the projections' epilogues take it, and the
jitted helpers that walk a token block's slot groups."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.util import cdiv, next_power_of_2

K_SPLIT = 256  # K columns per shrink program: K = 2048 gives 8 programs per token block, 8192 gives 32


@triton.jit
def lora_dot(a, b, PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    if INTERPRET:  # the interpreter's tl.dot multiplies bfloat16's raw bits: do it in float32
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    return tl.dot(a, b, input_precision=PRECISION)


@triton.jit
def next_slot_group(group, cur):
    """The smallest slot group in the block above cur (1 << 30: no more); group: each token's, -1 for none."""
    return tl.min(tl.where(group > cur, group, 1 << 30), axis=0)


@triton.jit
def slot_groups(idx, GROUP: tl.constexpr):
    """Each token's group of GROUP adapter slots, -1 for a token without an adapter."""
    return tl.where(idx >= 0, idx // GROUP, -1)



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
