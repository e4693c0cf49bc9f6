"""Greedy sampling's argmax over a large vocabulary, as two Triton kernels.

PyTorch reduces one row per thread block: 28 us for one row of 128k logits on an H200, and its
max over chunks took 33 us at 64 rows (benchmarks/RESULTS.md, 2026-11-29, 99afdd3 and 6e86962). Here
stage 1 gives every (row, chunk of BLOCK logits) its own program, writing the chunk's max and first
arg-max; stage 2 picks, per row, the first chunk holding the row's max. Ties resolve to the first
index, as torch.argmax does. A NaN logit is passed over (the id stays a valid token for the next step's
input) and, with `marked`, flagged: the row's id + NAN_MARK, for the host to raise on.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.util import NAN_MARK, cdiv, next_power_of_2

MAX_CHUNKS = 64  # stage 2 reduces one row's chunk maxima in one program
# added to a chunk's arg-max (an int32 below any vocabulary's 2**30) when the chunk held a NaN
CHUNK_NAN: tl.constexpr = tl.constexpr(1 << 30)
_NAN_MARK: tl.constexpr = tl.constexpr(NAN_MARK)


@triton.jit
def _chunk_argmax_kernel(logits_ptr, values_ptr, indices_ptr, vocab, stride_row, num_chunks,
                         BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    pdl_enter(PDL)
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    offs = chunk * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(logits_ptr + row.to(tl.int64) * stride_row + offs, mask=offs < vocab, other=float("-inf"))
    x = x.to(tl.float32)
    nan = x != x
    x = tl.where(nan, float("-inf"), x)
    best = tl.max(x, axis=0)
    # the first offset holding the max (masked lanes are -inf and never below a real one's offset)
    first = tl.min(tl.where(x == best, offs, vocab), axis=0)
    tl.store(values_ptr + row * num_chunks + chunk, best)
    tl.store(indices_ptr + row * num_chunks + chunk, first + tl.max(nan.to(tl.int32), axis=0) * CHUNK_NAN)


@triton.jit
def _row_argmax_kernel(values_ptr, indices_ptr, out_ptr, marked_ptr, num_chunks, BLOCK_C: tl.constexpr,
                       MARK: tl.constexpr, PDL: tl.constexpr = False):
    pdl_enter(PDL)
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_C)
    ok = offs < num_chunks
    v = tl.load(values_ptr + row * num_chunks + offs, mask=ok, other=float("-inf"))
    best = tl.max(v, axis=0)
    chunk = tl.min(tl.where(ok & (v == best), offs, BLOCK_C), axis=0)  # first chunk with the max
    packed = tl.load(indices_ptr + row * num_chunks + offs, mask=ok, other=0)
    token = (tl.sum(tl.where(offs == chunk, packed, 0), axis=0) % CHUNK_NAN).to(tl.int64)
    tl.store(out_ptr + row, token)
    if MARK:  # the host's copy: + NAN_MARK when a chunk of the row held a NaN
        tl.store(marked_ptr + row, token + (tl.max(packed, axis=0) >= CHUNK_NAN).to(tl.int64) * _NAN_MARK)


def chunk_size(vocab: int) -> int:
    """Logits per stage-1 program: a power of two >= 1024 giving at most MAX_CHUNKS chunks per row."""
    return max(1024, next_power_of_2(cdiv(vocab, MAX_CHUNKS)))


# Stage 1's per-chunk maxima, kept between calls so a decode step allocates only its output:
# (device, num_chunks) -> (values [rows, num_chunks] float32, indices [rows, num_chunks] int32).
# Reuse is safe: both kernels run on the caller's stream, in order.
_workspaces: dict[tuple[torch.device, int], tuple[torch.Tensor, torch.Tensor]] = {}


def _workspace(device: torch.device, num_rows: int, num_chunks: int) -> tuple[torch.Tensor, torch.Tensor]:
    key = (device, num_chunks)
    held = _workspaces.get(key)
    if held is None or held[0].shape[0] < num_rows:
        held = _buffers(device, max(num_rows, 2 * held[0].shape[0] if held is not None else num_rows), num_chunks)
        _workspaces[key] = held
    return held


def _buffers(device: torch.device, num_rows: int, num_chunks: int) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.empty((num_rows, num_chunks), dtype=torch.float32, device=device),
            torch.empty((num_rows, num_chunks), dtype=torch.int32, device=device))


def argmax_workspace(device: torch.device, num_rows: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Stage 1's buffers for up to num_rows rows, owned by the caller: what a CUDA-graph recording passes, so
    that the buffers it reads stay its own (the shared ones above are replaced when a larger batch comes)."""
    return _buffers(device, num_rows, cdiv(vocab, chunk_size(vocab)))


def triton_argmax(logits: torch.Tensor,  # [R, V] float, unit stride in V
                  out: torch.Tensor | None = None,  # [R] int64, contiguous
                  marked: torch.Tensor | None = None,  # [R] int64: out + NAN_MARK on a NaN row
                  workspace: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """torch.argmax(logits, dim=-1) in two launches, for a large vocabulary on the GPU (into out when given);
    NaN logits are passed over, and flagged in `marked` when given. workspace: argmax_workspace's, for a
    recording (else the shared buffers)."""
    num_rows, vocab = logits.shape
    assert logits.stride(-1) == 1, "triton_argmax: logits must be contiguous along the vocabulary"
    block = chunk_size(vocab)
    num_chunks = cdiv(vocab, block)
    values, indices = workspace or _workspace(logits.device, num_rows, num_chunks)
    assert values.shape[0] >= num_rows and values.shape[1] == num_chunks
    if out is None:
        out = torch.empty((num_rows,), dtype=torch.int64, device=logits.device)
    assert out.shape == (num_rows,) and out.dtype == torch.int64 and out.is_contiguous()
    if num_rows == 0:
        return out
    warps = 4 if block <= 2048 else 8
    pdl = pdl_arguments(logits)
    _chunk_argmax_launch[(num_rows, num_chunks)](logits, values, indices, vocab, logits.stride(0), num_chunks,
                                                  BLOCK=block, num_warps=warps, **pdl)
    _row_argmax_launch[(num_rows,)](values, indices, out, out if marked is None else marked, num_chunks,
                                    BLOCK_C=max(16, next_power_of_2(num_chunks)), MARK=marked is not None,
                                    num_warps=1, **pdl)
    return out


# launched through kernels/launch.py (a cached direct launch)
_chunk_argmax_launch = DirectLauncher(_chunk_argmax_kernel)
_row_argmax_launch = DirectLauncher(_row_argmax_kernel)
