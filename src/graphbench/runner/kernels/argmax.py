"""Greedy sampling's argmax over a large vocabulary, as two Triton kernels.

PyTorch reduces one row per thread block: 28 us for one row of 128k logits on an H200, and its
max over chunks took 33 us at 64 rows (benchmarks/RESULTS.md, 2026-11-29, 99afdd3 and 6e86962). Here
stage 1 gives every (row, chunk of BLOCK logits) its own program, writing the chunk's max and first
arg-max; stage 2 picks, per row, the first chunk holding the row's max. Ties resolve to the first
index, as torch.argmax does.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.util import cdiv, next_power_of_2

MAX_CHUNKS = 64  # stage 2 reduces one row's chunk maxima in one program


@triton.jit
def _chunk_argmax_kernel(logits_ptr, values_ptr, indices_ptr, vocab, stride_row, num_chunks,
                         BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    pdl_enter(PDL)
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    offs = chunk * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(logits_ptr + row.to(tl.int64) * stride_row + offs, mask=offs < vocab, other=float("-inf"))
    x = x.to(tl.float32)
    best = tl.max(x, axis=0)
    # the first offset holding the max (masked lanes are -inf and never below a real max)
    first = tl.min(tl.where(x == best, offs, vocab), axis=0)
    tl.store(values_ptr + row * num_chunks + chunk, best)
    tl.store(indices_ptr + row * num_chunks + chunk, first)


@triton.jit
def _row_argmax_kernel(values_ptr, indices_ptr, out_ptr, num_chunks, BLOCK_C: tl.constexpr,
                       PDL: tl.constexpr = False):
    pdl_enter(PDL)
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_C)
    ok = offs < num_chunks
    v = tl.load(values_ptr + row * num_chunks + offs, mask=ok, other=float("-inf"))
    best = tl.max(v, axis=0)
    chunk = tl.min(tl.where(ok & (v == best), offs, BLOCK_C), axis=0)  # first chunk with the max
    tl.store(out_ptr + row, tl.load(indices_ptr + row * num_chunks + chunk).to(tl.int64))


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
        rows = max(num_rows, 2 * held[0].shape[0] if held is not None else num_rows)
        held = (torch.empty((rows, num_chunks), dtype=torch.float32, device=device),
                torch.empty((rows, num_chunks), dtype=torch.int32, device=device))
        _workspaces[key] = held
    return held


def triton_argmax(logits: torch.Tensor,  # [R, V] float, unit stride in V
                  out: torch.Tensor | None = None) -> torch.Tensor:  # [R] int64, contiguous
    """torch.argmax(logits, dim=-1) in two launches, for a large vocabulary on the GPU (into out when given)."""
    num_rows, vocab = logits.shape
    assert logits.stride(-1) == 1, "triton_argmax: logits must be contiguous along the vocabulary"
    block = chunk_size(vocab)
    num_chunks = cdiv(vocab, block)
    values, indices = _workspace(logits.device, num_rows, num_chunks)
    if out is None:
        out = torch.empty((num_rows,), dtype=torch.int64, device=logits.device)
    assert out.shape == (num_rows,) and out.dtype == torch.int64 and out.is_contiguous()
    if num_rows == 0:
        return out
    warps = 4 if block <= 2048 else 8
    pdl = pdl_arguments(logits)
    _chunk_argmax_launch[(num_rows, num_chunks)](logits, values, indices, vocab, logits.stride(0), num_chunks,
                                                  BLOCK=block, num_warps=warps, **pdl)
    _row_argmax_launch[(num_rows,)](values, indices, out, num_chunks, BLOCK_C=max(16, next_power_of_2(num_chunks)),
                                    num_warps=1, **pdl)
    return out


# launched through kernels/launch.py (a cached direct launch)
_chunk_argmax_launch = DirectLauncher(_chunk_argmax_kernel)
_row_argmax_launch = DirectLauncher(_row_argmax_kernel)
