"""Stream-K for the skinny GEMM: y[M, N] = x[M, K] @ w[N, K].T (+ b), 2 <= M <= 64, on one program an SM.

kernels/skinny_gemm.py gives each program a column block (and a 1/SPLIT_K of K): llama-3.1-8b's qkv has 96
column blocks of 64 for 132 SMs, so 36 SMs stream nothing, and o and down run 128 programs, one an SM at most
(bench/RESULTS.md, 2026-12-02: qkv 3.11, o 2.75, down 3.50 TB/s at 64 rows against gate/up's 4.01 with 448
programs). Here the work is TOTAL = column blocks x K steps units in column-block-major order, and program
p of P takes units [p * TOTAL // P, (p + 1) * TOTAL // P): every SM streams the same bytes. A column block
whose K steps two or more programs share gets a float32 partial from each (a program writes at most two: its
first and its last block), and the last contributor to finish (an atomic count) sums them in program order:
the result does not depend on which program finishes first (a replay equals its eager run bit for bit).
GRAPHBENCH_STREAM_K=1 makes runner/linear.py use it where the skinny GEMM would run fewer programs than the
GPU has SMs (stream_k_applies): not measured yet.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.skinny_gemm import dot_step, gemm_sms, skinny_blocks, store_output
from graphbench.runner.kernels.util import cdiv, next_power_of_2, triton_interpreting

# (BLOCK_N, BLOCK_K, num_warps, num_stages): a first guess, not measured (bench/skinny_blocks.py --stream-k)
STREAM_K_BLOCKS = (64, 128, 4, 4)


@triton.jit
def _stream_k_kernel(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, count_ptr, M, N, K_STEPS, TOTAL, stride_xm, stride_wn,
                     stride_ym, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr, INTERPRET: tl.constexpr, PDL: tl.constexpr = False):
    p = tl.program_id(0).to(tl.int64)
    num_programs = tl.num_programs(0).to(tl.int64)
    start = p * TOTAL // num_programs  # this program's units: [start, end)
    end = (p + 1) * TOTAL // num_programs
    offs_m = tl.arange(0, BLOCK_M)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    x_rows = x_ptr + offs_m[:, None].to(tl.int64) * stride_xm  # [BLOCK_M, 1]
    pdl_enter(PDL)
    block = start // K_STEPS
    while block * K_STEPS < end:  # each column block this program's units reach into
        first_unit = block * K_STEPS
        step = tl.maximum(start, first_unit) - first_unit
        step_end = tl.minimum(end, first_unit + K_STEPS) - first_unit
        offs_n = block * BLOCK_N + tl.arange(0, BLOCK_N)
        n_ok = offs_n < N
        w_cols = w_ptr + offs_n[None, :].to(tl.int64) * stride_wn  # [1, BLOCK_N]: w.T's columns
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        if INTERPRET:  # numpy >= 2.4 cannot turn the interpreter's 1-element scalars into range bounds
            while step < step_end:
                acc = dot_step(acc, x_rows, w_cols, step * BLOCK_K, offs_k, m_ok, n_ok, INTERPRET)
                step += 1
        else:
            for k_step in range(step.to(tl.int32), step_end.to(tl.int32)):
                acc = dot_step(acc, x_rows, w_cols, k_step * BLOCK_K, offs_k, m_ok, n_ok, INTERPRET)
        y_offs = offs_m[:, None].to(tl.int64) * stride_ym + offs_n[None, :]
        y_mask = m_ok[:, None] & n_ok[None, :]
        # the programs owning the block's first and last unit (the owner of unit u: ((u + 1) P - 1) // TOTAL)
        first = ((first_unit + 1) * num_programs - 1) // TOTAL
        last = ((first_unit + K_STEPS) * num_programs - 1) // TOTAL
        if first == last:  # the whole of K here: the output directly
            store_output(acc, b_ptr, y_ptr, y_offs, y_mask, offs_n, n_ok, HAS_BIAS)
        else:
            # A program writes at most two partials, for the block it starts in and the block it ends in:
            # part[program, 0 (starts in) or 1, BLOCK_M, BLOCK_N] in float32, whatever N is.
            part_offs = offs_m[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
            starts_here = (block == start // K_STEPS).to(tl.int64)
            tl.store(part_ptr + (2 * p + 1 - starts_here) * BLOCK_M * BLOCK_N + part_offs, acc)
            tl.debug_barrier()  # every thread's partial stores come before the release of the count
            num_done = tl.atomic_add(count_ptr + block, 1, sem="acq_rel", scope="gpu")
            tl.debug_barrier()
            if num_done == last - first:  # the last contributor to finish: sum theirs in program order
                total = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
                c = first
                while c <= last:
                    c_starts_here = (block == (c * TOTAL // num_programs) // K_STEPS).to(tl.int64)
                    # .cg: from L2, where the other programs' stores are (never a stale line of this SM's L1)
                    total += tl.load(part_ptr + (2 * c + 1 - c_starts_here) * BLOCK_M * BLOCK_N + part_offs,
                                     cache_modifier=".cg")
                    c += 1
                store_output(total, b_ptr, y_ptr, y_offs, y_mask, offs_n, n_ok, HAS_BIAS)
                tl.atomic_xchg(count_ptr + block, 0, sem="relaxed", scope="gpu")  # zero again for the next launch
        block += 1


# (device, programs, BLOCK_N) -> float32 partials [programs, 2, 64, BLOCK_N]; (device, column blocks) -> int32
# counts, zero between launches (the last contributor resets its block's). Kept for the life of the process:
# a recorded graph holds their addresses.
_partials: dict[tuple, torch.Tensor] = {}
_counts: dict[tuple, torch.Tensor] = {}


def _workspace(device: torch.device, programs: int, block_n: int, n_blocks: int) -> tuple[torch.Tensor, torch.Tensor]:
    part = _partials.get((device, programs, block_n))
    if part is None:
        part = _partials[(device, programs, block_n)] = torch.empty(programs * 2 * 64 * block_n, dtype=torch.float32,
                                                                    device=device)
    counts = _counts.get((device, n_blocks))
    if counts is None:
        counts = _counts[(device, n_blocks)] = torch.zeros(n_blocks, dtype=torch.int32, device=device)
    return part, counts


def stream_k_applies(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether stream-K takes the skinny GEMM's place for this weight (with GRAPHBENCH_STREAM_K=1): the skinny
    GEMM's launch has fewer programs than the GPU has SMs (132 in the interpreter), and K is a multiple of
    STREAM_K_BLOCKS' BLOCK_K."""
    return _fewer_programs_than_sms(*weight.shape, gemm_sms(x))


@functools.lru_cache(maxsize=None)
def _fewer_programs_than_sms(n: int, k: int, num_sms: int) -> bool:
    block_n, _, splits, _, _ = skinny_blocks(n, k, num_sms)
    return cdiv(n, block_n) * splits < num_sms and k % STREAM_K_BLOCKS[1] == 0


def stream_k_gemm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, num_sms: int | None = None,
                  config: tuple[int, int, int, int] | None = None) -> torch.Tensor:
    """x[M, K] @ weight[N, K].T (+ bias) -> [M, N] in x's dtype, accumulated in float32, on min(SMs, units)
    programs. config: (BLOCK_N, BLOCK_K, num_warps, num_stages), else STREAM_K_BLOCKS (num_sms: the GPU's, or
    an H100/H200's 132 in the interpreter)."""
    m, k = x.shape
    n = weight.shape[0]
    if num_sms is None:
        num_sms = gemm_sms(x)
    block_n, block_k, warps, stages = config or STREAM_K_BLOCKS
    assert k % block_k == 0 and m <= 64
    k_steps, n_blocks = k // block_k, cdiv(n, block_n)
    total = n_blocks * k_steps
    programs = min(num_sms, total)
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    part, counts = _workspace(x.device, programs, block_n, n_blocks)
    _stream_k_launch[(programs,)](
        x, weight, bias if bias is not None else out, out, part, counts, m, n, k_steps, total, x.stride(0),
        weight.stride(0), out.stride(0), HAS_BIAS=bias is not None, BLOCK_M=max(16, next_power_of_2(m)),
        BLOCK_N=block_n, BLOCK_K=block_k, INTERPRET=triton_interpreting(), num_warps=warps, num_stages=stages,
        **pdl_arguments(out))
    return out


# launched through kernels/launch.py (a cached direct launch unless GRAPHBENCH_DIRECT_LAUNCH=0)
_stream_k_launch = DirectLauncher(_stream_k_kernel)
