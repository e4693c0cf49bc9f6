"""Triton kernel: a step's inputs, uploaded as one packet, scattered into the engine's static buffers.

The host packs what a step changes (runner/inputs.py) into one int32 packet: a header [R, BU, V, 0], then
V values in this order: token ids [P], positions [P], KV slots [P], logits rows [R], query start offsets
[R_MAX + 1], sequence lengths [R_MAX], the block-table rows [R, BU] and, with LoRA adapters, each token's
adapter row [P] (P padded tokens, R requests, BU block-table columns in use). One copy brings it to the
device and one launch of this kernel writes each section to its buffer, in place of a copy per buffer and
two kernels for the tokens the previous step sampled on the device. A token id < 0 is such a token: -1 - id
is its row in `sampled`, read here (the previous step's sampling ran before this launch, in stream order).

R, BU and V are read from the header, not passed: a launch depends on P alone (and its grid on the most
values it may meet), so a FULL recording holds it as its first kernel (runner/model_runner.py) and a decode
step's host launches no kernel of its own.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.util import cdiv

BLOCK = 1024


@triton.jit
def _section(offs, ok, lo, n):
    """Lanes of the section [lo, lo + n) of the packet, and their index inside it."""
    return ok & (offs >= lo) & (offs < lo + n), offs - lo


# The sizes are not specialised on: each distinct (== 1, multiple of 16) mix would be a compile in the middle
# of serving, for a kernel whose cost is its one launch.
@triton.jit(do_not_specialize=["P", "R_MAX", "stride_bt"])
def _unpack_kernel(packet_ptr, sampled_ptr, ids_ptr, pos_ptr, slot_ptr, logits_ptr, qsl_ptr, lens_ptr, bt_ptr,
                   lora_ptr, P, R_MAX, stride_bt, HAS_LORA: tl.constexpr, BLOCK: tl.constexpr):
    R = tl.load(packet_ptr)
    BU = tl.load(packet_ptr + 1)
    total = tl.load(packet_ptr + 2)
    packet_ptr += 4  # (util.PACKET_HEADER: a jitted function reads no module constant)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < total
    v = tl.load(packet_ptr + offs, mask=ok, other=0)
    in_ids, i = _section(offs, ok, 0, P)
    pending = in_ids & (v < 0)
    token = tl.load(sampled_ptr + tl.where(pending, -1 - v, 0), mask=pending, other=0)
    tl.store(ids_ptr + i, tl.where(pending, token, v.to(tl.int64)), mask=in_ids)
    m, i = _section(offs, ok, P, P)
    tl.store(pos_ptr + i, v.to(tl.int64), mask=m)
    m, i = _section(offs, ok, 2 * P, P)
    tl.store(slot_ptr + i, v.to(tl.int64), mask=m)
    m, i = _section(offs, ok, 3 * P, R)
    tl.store(logits_ptr + i, v.to(tl.int64), mask=m)
    lo = 3 * P + R
    m, i = _section(offs, ok, lo, R_MAX + 1)
    tl.store(qsl_ptr + i, v, mask=m)
    lo += R_MAX + 1
    m, i = _section(offs, ok, lo, R_MAX)
    tl.store(lens_ptr + i, v, mask=m)
    lo += R_MAX
    m, i = _section(offs, ok, lo, R * BU)
    bu = tl.maximum(BU, 1)  # (an all-zero header, V = 0: no lane is stored, but no division by zero either)
    row, col = i // bu, i % bu
    tl.store(bt_ptr + row.to(tl.int64) * stride_bt + col, v, mask=m)
    if HAS_LORA:
        m, i = _section(offs, ok, lo + R * BU, P)
        tl.store(lora_ptr + i, v, mask=m)


def unpack_step_inputs(packet: torch.Tensor,  # [>= PACKET_HEADER + values] int32, on the device
                       sampled: torch.Tensor,  # [R_MAX] int64: the previous step's sampled ids
                       ids: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor,  # [>= P] int64
                       logits_rows: torch.Tensor,  # [R_MAX] int64
                       query_start_loc: torch.Tensor, seq_lens: torch.Tensor,  # [R_MAX + 1], [R_MAX] int32
                       block_tables: torch.Tensor,  # [R_MAX, max blocks] int32, unit stride along a row
                       lora_slots: torch.Tensor | None,  # [>= P] int32, or None without adapters
                       num_padded: int, max_values: int) -> None:
    """Write the packet's sections (see the module's docstring) into their buffers, in one launch with programs
    for max_values values (at least the header's V)."""
    assert block_tables.stride(1) == 1
    _unpack_launch[(cdiv(max_values, BLOCK),)](
        packet, sampled, ids, positions, slots, logits_rows, query_start_loc, seq_lens, block_tables,
        lora_slots if lora_slots is not None else seq_lens, num_padded, seq_lens.shape[0], block_tables.stride(0),
        HAS_LORA=lora_slots is not None, BLOCK=BLOCK, num_warps=4)


# launched through kernels/launch.py (a cached direct launch)
_unpack_launch = DirectLauncher(_unpack_kernel)
