"""y[M, N] = x[M, K] @ w[N, K].T (+ b) for the few rows of a decode batch (2 <= M <= 64), split along K.

At 64 rows cuBLAS runs llama-3.2-1b's projections other than gate/up at 1.5-2.5 TB/s (the roofline in
benchmarks/RESULTS.md, 2026-12-01, `8aa7851`), and its kernels break the step's chain of PDL launches. With
each shape's measured blocks this kernel is within 5% of cuBLAS in isolation, and the recorded batch-64
step is 4.8-7.6% faster with it (runner/kernel_choice.py). A program owns BLOCK_N output columns
and 1/SPLIT_K of K: it streams
its [BLOCK_N, K / SPLIT_K] weights once through tl.dot against the rows of x. With SPLIT_K > 1 each split
writes its float32 partial to a workspace, and the last split of a column block to finish (an atomic
count, as the decode kernel merges its splits) sums the partials in split order, so the result does not
depend on which program finishes first (a replay equals its eager run bit for bit).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.paged_attention import sm_count
from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.util import cdiv, next_power_of_2, triton_interpreting

MAX_ROWS = 64
BLOCK_N = 64
BLOCK_K = 128

# The fastest (BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages) of a grid at 64 rows inside a CUDA graph
# on the H200, per (N, K) of llama-3.2-1b's and llama-3.1-8b's projections, against cuBLAS's time
# (benchmarks/RESULTS.md, 2026-12-01, 10fdf14): within 5% of cuBLAS either way in isolation.
MEASURED_BEST = {
    (3072, 2048): (32, 128, 1, 4, 5),  # 1b qkv: 6.91 us, cuBLAS 6.72
    (2048, 2048): (32, 128, 1, 4, 5),  # 1b o: 6.55, cuBLAS 6.33
    (16384, 2048): (64, 64, 1, 4, 5),  # 1b gate/up: 20.61, cuBLAS 20.41
    (2048, 8192): (32, 128, 2, 4, 5),  # 1b down: 13.93, cuBLAS 14.61
    (6144, 4096): (64, 128, 1, 4, 5),  # 8b qkv: 16.91, cuBLAS 16.68
    (4096, 4096): (32, 128, 1, 4, 5),  # 8b o: 12.34, cuBLAS 11.93
    (28672, 4096): (64, 64, 1, 4, 3),  # 8b gate/up: 61.98, cuBLAS 63.13
    (4096, 14336): (64, 128, 2, 4, 5),  # 8b down: 34.88, cuBLAS 36.49
    # lm_head at 64 rows (benchmarks/skinny_blocks.py; benchmarks/RESULTS.md, 2026-12-02, 4cfaa80): most of the grid's
    # one-split configs beat cuBLAS there
    (128256, 2048): (64, 64, 1, 4, 3),  # 1b lm_head: 134.57, cuBLAS 144.69
    (128256, 4096): (128, 128, 1, 4, 3),  # 8b lm_head: 260.01, cuBLAS 285.29
}


@triton.jit
def _skinny_kernel(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, count_ptr, M, N, stride_xm, stride_wn, stride_ym,
                   HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   SPLIT_K: tl.constexpr, K_PER_SPLIT: tl.constexpr, INTERPRET: tl.constexpr,
                   PDL: tl.constexpr = False):
    pid_n = tl.program_id(0)
    split = tl.program_id(1)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    n_ok = offs_n < N
    k_lo = split * K_PER_SPLIT
    w_cols = w_ptr + offs_n[None, :].to(tl.int64) * stride_wn  # [1, BLOCK_N]: w.T's columns
    x_rows = x_ptr + offs_m[:, None].to(tl.int64) * stride_xm  # [BLOCK_M, 1]
    pdl_enter(PDL)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    if INTERPRET:  # numpy >= 2.4 cannot turn the interpreter's 1-element scalars into range bounds
        k0 = k_lo
        while k0 < k_lo + K_PER_SPLIT:
            acc = _dot_step(acc, x_rows, w_cols, k0, offs_k, m_ok, n_ok, INTERPRET)
            k0 += BLOCK_K
    else:
        for k0 in range(k_lo, k_lo + K_PER_SPLIT, BLOCK_K):
            acc = _dot_step(acc, x_rows, w_cols, k0, offs_k, m_ok, n_ok, INTERPRET)
    y_offs = offs_m[:, None].to(tl.int64) * stride_ym + offs_n[None, :]
    y_mask = m_ok[:, None] & n_ok[None, :]
    if SPLIT_K == 1:
        _store_output(acc, b_ptr, y_ptr, y_offs, y_mask, offs_n, n_ok, HAS_BIAS)
    else:
        # partial [split, BLOCK_M, N] in float32; every row and column of the block is written
        part_offs = offs_m[:, None] * N + offs_n[None, :]
        tl.store(part_ptr + split * BLOCK_M * N + part_offs, acc, mask=n_ok[None, :])
        tl.debug_barrier()  # every thread's partial stores come before the release of the count
        num_done = tl.atomic_add(count_ptr + pid_n, 1, sem="acq_rel", scope="gpu")
        tl.debug_barrier()
        if num_done == SPLIT_K - 1:  # the last split of this column block: sum the partials in split order
            total = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            for s in tl.static_range(SPLIT_K):
                # .cg: from L2, where the other programs' stores are (never a stale line of this SM's L1)
                total += tl.load(part_ptr + s * BLOCK_M * N + part_offs, mask=n_ok[None, :], other=0.0,
                                 cache_modifier=".cg")
            _store_output(total, b_ptr, y_ptr, y_offs, y_mask, offs_n, n_ok, HAS_BIAS)
            tl.atomic_xchg(count_ptr + pid_n, 0, sem="relaxed", scope="gpu")  # zero again for the next launch


@triton.jit
def _dot_step(acc, x_rows, w_cols, k0, offs_k, m_ok, n_ok, INTERPRET: tl.constexpr):
    w = tl.load(w_cols + (k0 + offs_k)[:, None], mask=n_ok[None, :], other=0.0)  # [BLOCK_K, BLOCK_N]
    x = tl.load(x_rows + (k0 + offs_k)[None, :], mask=m_ok[:, None], other=0.0)  # [BLOCK_M, BLOCK_K]
    return _mma(acc, x, w, INTERPRET)


@triton.jit
def _mma(acc, x, w, INTERPRET: tl.constexpr):
    if INTERPRET:  # the interpreter's tl.dot multiplies 16-bit floats' raw bits: do it in float32
        return tl.dot(x.to(tl.float32), w.to(tl.float32), acc, input_precision="ieee")
    return tl.dot(x, w, acc)


@triton.jit
def _store_output(acc, b_ptr, y_ptr, y_offs, y_mask, offs_n, n_ok, HAS_BIAS: tl.constexpr):
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(y_ptr + y_offs, acc.to(y_ptr.dtype.element_ty), mask=y_mask)


@triton.jit
def _gated_kernel(x_ptr, w_ptr, y_ptr, M, N, stride_xm, stride_wn, stride_ym, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, K: tl.constexpr, INTERPRET: tl.constexpr,
                  PDL: tl.constexpr = False):
    """y[:, j] = silu(x @ w[j].T) * (x @ w[N + j].T) for BLOCK_N columns j: the gate/up projection and the
    activation after it in one launch. A program streams its gate rows and their up rows (w = [gate; up],
    [2N, K]); both products are rounded to y's dtype before the activation, as the two launches round them."""
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    n_ok = offs_n < N
    gate_cols = w_ptr + offs_n[None, :].to(tl.int64) * stride_wn  # [1, BLOCK_N]: gate.T's columns
    up_cols = w_ptr + (offs_n + N)[None, :].to(tl.int64) * stride_wn  # the matching up rows
    x_rows = x_ptr + offs_m[:, None].to(tl.int64) * stride_xm  # [BLOCK_M, 1]
    pdl_enter(PDL)
    gate = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    up = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in tl.range(0, K, BLOCK_K):
        x = tl.load(x_rows + (k0 + offs_k)[None, :], mask=m_ok[:, None], other=0.0)  # [BLOCK_M, BLOCK_K]
        w_gate = tl.load(gate_cols + (k0 + offs_k)[:, None], mask=n_ok[None, :], other=0.0)  # [BLOCK_K, BLOCK_N]
        w_up = tl.load(up_cols + (k0 + offs_k)[:, None], mask=n_ok[None, :], other=0.0)
        gate = _mma(gate, x, w_gate, INTERPRET)
        up = _mma(up, x, w_up, INTERPRET)
    dtype = y_ptr.dtype.element_ty
    gate = gate.to(dtype).to(tl.float32)
    up = up.to(dtype).to(tl.float32)
    y_offs = offs_m[:, None].to(tl.int64) * stride_ym + offs_n[None, :]
    tl.store(y_ptr + y_offs, (gate * tl.sigmoid(gate) * up).to(dtype), mask=m_ok[:, None] & n_ok[None, :])


def split_count(n: int, k: int, num_sms: int) -> int:
    """Splits of K (a power of two <= 8, each a multiple of BLOCK_K) until the column blocks and their
    splits give about two programs an SM."""
    blocks, splits = cdiv(n, BLOCK_N), 1
    while splits < 8 and blocks * splits * 2 <= 2 * num_sms and k % (splits * 2 * BLOCK_K) == 0:
        splits *= 2
    return splits


def skinny_applies(x: torch.Tensor, weight: torch.Tensor, measured_only: bool = False) -> bool:
    """2..64 rows, unit stride along K, K a multiple of BLOCK_K, 16-bit floats of one dtype
    (measured_only: and a shape of MEASURED_BEST)."""
    if measured_only and tuple(weight.shape) not in MEASURED_BEST:
        return False
    return (x.dim() == 2 and 2 <= x.shape[0] <= MAX_ROWS and x.shape[1] == weight.shape[1]
            and x.stride(-1) == 1 and weight.stride(-1) == 1 and x.dtype == weight.dtype
            and x.dtype in (torch.bfloat16, torch.float16) and weight.shape[1] % BLOCK_K == 0)


def _gemm_sms(x: torch.Tensor) -> int:
    """The SMs a GEMM on x spreads its programs over: the GPU's, or an H100/H200's 132 in the interpreter."""
    return sm_count(x.device.index or 0) if x.is_cuda else 132


def skinny_blocks(n: int, k: int, num_sms: int) -> tuple[int, int, int, int, int]:
    """(BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages) skinny_gemm takes for a weight [n, k]: the measured
    best, else the rule above."""
    return MEASURED_BEST.get((n, k)) or (BLOCK_N, BLOCK_K, split_count(n, k, num_sms), 4, 4)


def skinny_gemm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, num_sms: int | None = None,
                config: tuple[int, int, int, int, int] | None = None) -> torch.Tensor:
    """x[M, K] @ weight[N, K].T (+ bias) -> [M, N] in x's dtype, accumulated in float32.
    config: (BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages), else the measured best, else the rule above
    (num_sms: the GPU's, or an H100/H200's 132 in the interpreter)."""
    m, k = x.shape
    if num_sms is None:
        num_sms = _gemm_sms(x)
    n = weight.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    config = config or skinny_blocks(n, k, num_sms)
    block_n, block_k, splits, warps, stages = config
    assert k % (block_k * splits) == 0
    block_m = max(16, next_power_of_2(m))
    part, counts = _workspace(x.device, splits, n, block_n) if splits > 1 else (out, out)
    _skinny_launch[(cdiv(n, block_n), splits)](
        x, weight, bias if bias is not None else out, out, part, counts, m, n, x.stride(0), weight.stride(0),
        out.stride(0), HAS_BIAS=bias is not None, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        SPLIT_K=splits, K_PER_SPLIT=k // splits, INTERPRET=triton_interpreting(), num_warps=warps,
        num_stages=stages, **pdl_arguments(out))
    return out


def gated_blocks(n: int, k: int, num_sms: int) -> tuple[int, int, int, int]:
    """(BLOCK_N, BLOCK_K, num_warps, num_stages) of skinny_gate_up for a [gate; up] weight [n, k]: the skinny
    GEMM's blocks for [n, k] with half the columns a program (the same weight bytes a program, each column
    now a gate row and an up row). For both llama shapes this was the best of a grid at 64 rows
    (benchmarks/RESULTS.md, 2026-12-02, a82bb11)."""
    block_n, block_k, _splits, warps, stages = skinny_blocks(n, k, num_sms)
    return max(16, block_n // 2), block_k, warps, stages


def skinny_gate_up(x: torch.Tensor, weight: torch.Tensor, config: tuple[int, int, int, int] | None = None,
                   num_sms: int | None = None) -> torch.Tensor:
    """x[M, K], weight = [gate; up] [2I, K] -> silu(x @ gate.T) * (x @ up.T) [M, I] in x's dtype, in one
    launch (2 <= M <= 64). config: (BLOCK_N, BLOCK_K, num_warps, num_stages), else gated_blocks's."""
    m, k = x.shape
    n = weight.shape[0] // 2
    block_n, block_k, warps, stages = config or gated_blocks(2 * n, k, num_sms or _gemm_sms(x))
    assert k % block_k == 0 and weight.shape[0] == 2 * n
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _gated_launch[(cdiv(n, block_n),)](
        x, weight, out, m, n, x.stride(0), weight.stride(0), out.stride(0), BLOCK_M=max(16, next_power_of_2(m)),
        BLOCK_N=block_n, BLOCK_K=block_k, K=k, INTERPRET=triton_interpreting(), num_warps=warps,
        num_stages=stages, **pdl_arguments(out))
    return out


# (device, splits, N, BLOCK_N) -> (float32 partials [splits, 64, N], int32 counts per column block, zero between
# launches: the last split resets its own). Kept for the life of the process: a recorded graph holds
# their addresses. Sized for 64 rows, so the first launch of a shape (the warm-up before any capture)
# allocates them for every row count.
_workspaces: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}


def _workspace(device: torch.device, splits: int, n: int, block_n: int) -> tuple[torch.Tensor, torch.Tensor]:
    key = (device, splits, n, block_n)
    held = _workspaces.get(key)
    if held is None:
        held = (torch.empty((splits, MAX_ROWS, n), dtype=torch.float32, device=device),
                torch.zeros(cdiv(n, block_n), dtype=torch.int32, device=device))
        _workspaces[key] = held
    return held


# launched through kernels/launch.py (a cached direct launch)
_skinny_launch = DirectLauncher(_skinny_kernel)
_gated_launch = DirectLauncher(_gated_kernel)
