"""y[M, N] = x[M, K] @ w[N, K].T (+ b) for the few rows of a decode batch (2 <= M <= 64), split along K.

At 64 rows cuBLAS runs llama-3.2-1b's projections other than gate/up at 1.5-2.5 TB/s (the roofline in
benchmarks/RESULTS.md, 2026-12-01, `8aa7851`), and its kernels break the step's chain of PDL launches. With
each shape's measured blocks this kernel is within 5% of cuBLAS in isolation, and the recorded batch-64
step is 4.8-7.6% faster with it; start-up times its blocks against cuBLAS per shape and row class
(runner/kernel_choice.py, kernel_timing.py). A program owns BLOCK_N output columns and 1/SPLIT_K of K: it
streams its [BLOCK_N, K / SPLIT_K] weights once through tl.dot against the rows of x. With SPLIT_K > 1 each split
writes its float32 partial to a workspace, and the last split of a column block to finish (an atomic
count, as the decode kernel merges its splits) sums the partials in split order, so the result does not
depend on which program finishes first (a replay equals its eager run bit for bit).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.lora_bgmv import lora_expand_delta, lora_expand_gate_up
from graphbench.runner.kernels.lora_blocks import ShrunkInput
from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.util import cdiv, next_power_of_2, triton_interpreting

MAX_ROWS = 64  # runner/kernel_choice.py chooses the blocks per shape and row class, by timing them


@triton.jit
def _skinny_kernel(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, count_ptr, M, N, stride_xm, stride_wn, stride_ym,
                   lora_v, lora_b, lora_idx, lora_r, lora_seg1, lora_seg2, lora_stride_bl, lora_stride_bn,
                   HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   SPLIT_K: tl.constexpr, K_PER_SPLIT: tl.constexpr, LORA: tl.constexpr, LORA_SEGMENTS: tl.constexpr,
                   LORA_BLOCK_RS: tl.constexpr, LORA_GROUP: tl.constexpr,
                   LORA_PRECISION: tl.constexpr, INTERPRET: tl.constexpr, PDL: tl.constexpr = False):
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
    lora_rows = _lora_rows(lora_idx, offs_m, m_ok, LORA)
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
    last = True  # this program stores the block (with SPLIT_K: the last split of its column block to finish)
    if SPLIT_K > 1:
        # partial [split, BLOCK_M, N] in float32; every row and column of the block is written
        part_offs = offs_m[:, None] * N + offs_n[None, :]
        tl.store(part_ptr + split * BLOCK_M * N + part_offs, acc, mask=n_ok[None, :])
        tl.debug_barrier()  # every thread's partial stores come before the release of the count
        num_done = tl.atomic_add(count_ptr + pid_n, 1, sem="acq_rel", scope="gpu")
        tl.debug_barrier()
        last = num_done == SPLIT_K - 1
        if last:  # sum the partials in split order
            acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            for s in tl.static_range(SPLIT_K):
                # .cg: from L2, where the other programs' stores are (never a stale line of this SM's L1)
                acc += tl.load(part_ptr + s * BLOCK_M * N + part_offs, mask=n_ok[None, :], other=0.0,
                               cache_modifier=".cg")
    if last:
        acc = _bias_and_lora(acc, b_ptr, y_ptr, offs_m, m_ok, offs_n, n_ok, M, HAS_BIAS, lora_v, lora_b, lora_rows,
                             lora_r, lora_seg1, lora_seg2, lora_stride_bl, lora_stride_bn, LORA, LORA_SEGMENTS,
                             BLOCK_M, BLOCK_N, LORA_BLOCK_RS, LORA_GROUP, LORA_PRECISION, INTERPRET)
        tl.store(y_ptr + y_offs, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])
        if SPLIT_K > 1:
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
def _bias_and_lora(acc, b_ptr, y_ptr, offs_m, m_ok, offs_n, n_ok, M, HAS_BIAS: tl.constexpr, lora_v, lora_b,
                   lora_rows, lora_r, lora_seg1, lora_seg2, lora_stride_bl, lora_stride_bn, LORA: tl.constexpr,
                   LORA_SEGMENTS: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, LORA_BLOCK_RS: tl.constexpr, LORA_GROUP: tl.constexpr,
                   LORA_PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    """The block's output before its store: + bias, then with LoRA each row's adapter delta of these columns
    (rounded as the projection's store and the expand's add would round them: the two launches' result)."""
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    if LORA:
        acc = acc.to(y_ptr.dtype.element_ty).to(tl.float32) + lora_expand_delta(
            lora_v, lora_b, lora_rows, offs_m, m_ok, offs_n, n_ok, M, lora_r, lora_seg1, lora_seg2, lora_stride_bl,
            lora_stride_bn, LORA_SEGMENTS, BLOCK_M, BLOCK_N, LORA_BLOCK_RS, LORA_GROUP, LORA_PRECISION,
            INTERPRET)
    return acc


@triton.jit
def _lora_rows(lora_idx, offs_m, m_ok, LORA: tl.constexpr):
    """Each row's adapter slot (-1: none), loaded before the PDL wait: the step's first kernel wrote them
    (kernels/pdl.py), so the epilogue after the K loop starts from registers, one round of loads sooner."""
    if LORA:
        return tl.load(lora_idx + offs_m, mask=m_ok, other=-1)
    return tl.full(offs_m.shape, -1, tl.int32)


@triton.jit
def _gated_kernel(x_ptr, w_ptr, y_ptr, M, N, stride_xm, stride_wn, stride_ym, lora_v, lora_b, lora_idx, lora_r,
                  lora_seg1, lora_seg2, lora_stride_bl, lora_stride_bn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, K: tl.constexpr, LORA: tl.constexpr, LORA_SEGMENTS: tl.constexpr,
                  LORA_BLOCK_RS: tl.constexpr, LORA_GROUP: tl.constexpr,
                  LORA_PRECISION: tl.constexpr, INTERPRET: tl.constexpr, PDL: tl.constexpr = False):
    """y[:, j] = silu(x @ w[j].T) * (x @ w[N + j].T) for BLOCK_N columns j: the gate/up projection and the
    activation after it in one launch. A program streams its gate rows and their up rows (w = [gate; up],
    [2N, K]); both products are rounded to y's dtype before the activation, as the two launches round them.
    With LoRA, B's two segments are gate's rows and up's (from row N): the segment bounds and LORA_SEGMENTS
    come with the LoRA arguments the skinny kernel shares and are not read."""
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    n_ok = offs_n < N
    gate_cols = w_ptr + offs_n[None, :].to(tl.int64) * stride_wn  # [1, BLOCK_N]: gate.T's columns
    up_cols = w_ptr + (offs_n + N)[None, :].to(tl.int64) * stride_wn  # the matching up rows
    x_rows = x_ptr + offs_m[:, None].to(tl.int64) * stride_xm  # [BLOCK_M, 1]
    lora_rows = _lora_rows(lora_idx, offs_m, m_ok, LORA)
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
    if LORA:  # each row's adapter delta to gate (B's rows j) and up (rows N + j), rounded as the expand adds it
        gate_delta, up_delta = lora_expand_gate_up(lora_v, lora_b, lora_rows, offs_m, m_ok, offs_n, n_ok, M, lora_r,
                                                   N, lora_stride_bl, lora_stride_bn, BLOCK_M, BLOCK_N,
                                                   LORA_BLOCK_RS, LORA_GROUP, LORA_PRECISION, INTERPRET)
        gate = (gate + gate_delta).to(dtype).to(tl.float32)
        up = (up + up_delta).to(dtype).to(tl.float32)
    y_offs = offs_m[:, None].to(tl.int64) * stride_ym + offs_n[None, :]
    tl.store(y_ptr + y_offs, (gate * tl.sigmoid(gate) * up).to(dtype), mask=m_ok[:, None] & n_ok[None, :])


def skinny_applies(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """2..64 rows, unit stride along K, 16-bit floats of one dtype (the blocks must also fit K:
    runner/kernel_choice.blocks_fit)."""
    return (x.dim() == 2 and 2 <= x.shape[0] <= MAX_ROWS and x.shape[1] == weight.shape[1]
            and x.stride(-1) == 1 and weight.stride(-1) == 1 and x.dtype == weight.dtype
            and x.dtype in (torch.bfloat16, torch.float16))


def _lora_arguments(lora: ShrunkInput | None, out: torch.Tensor) -> tuple[tuple, dict]:
    """The kernels' LoRA arguments: the shrunk input's, or placeholders that a kernel without LoRA never reads."""
    if lora is None:
        return (out, out, out, 1, 0, 0, 0, 0), dict(LORA=False, LORA_SEGMENTS=1, LORA_BLOCK_RS=16,
                                                     LORA_GROUP=1, LORA_PRECISION="ieee")
    assert lora.index.shape[0] == out.shape[0] and lora.v.shape[0] == out.shape[0]
    return lora.expand_arguments(), dict(LORA=True, LORA_SEGMENTS=lora.num_segments,
                                         LORA_BLOCK_RS=lora.block_rs, LORA_GROUP=lora.group,
                                         LORA_PRECISION=lora.precision)


def skinny_gemm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                config: tuple[int, int, int, int, int], lora: ShrunkInput | None = None) -> torch.Tensor:
    """x[M, K] @ weight[N, K].T (+ bias) -> [M, N] in x's dtype, accumulated in float32; with lora (the
    shrink's output for x, kernels/lora_shrink.lora_shrink) each row's adapter delta is added in the epilogue,
    as the expand launch would add it. config: (BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages)."""
    m, k = x.shape
    n = weight.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    block_n, block_k, splits, warps, stages = config
    assert k % (block_k * splits) == 0
    block_m = max(16, next_power_of_2(m))
    part, counts = _workspace(x.device, splits, n, block_n) if splits > 1 else (out, out)
    lora_args, lora_meta = _lora_arguments(lora, out)
    _skinny_launch[(cdiv(n, block_n), splits)](
        x, weight, bias if bias is not None else out, out, part, counts, m, n, x.stride(0), weight.stride(0),
        out.stride(0), *lora_args, HAS_BIAS=bias is not None, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        SPLIT_K=splits, K_PER_SPLIT=k // splits, **lora_meta, INTERPRET=triton_interpreting(), num_warps=warps,
        num_stages=stages, **pdl_arguments(out))
    return out


def skinny_gate_up(x: torch.Tensor, weight: torch.Tensor, config: tuple[int, int, int, int],
                   lora: ShrunkInput | None = None) -> torch.Tensor:
    """x[M, K], weight = [gate; up] [2I, K] -> silu(x @ gate.T) * (x @ up.T) [M, I] in x's dtype, in one
    launch (2 <= M <= 64); with lora each row's adapter deltas are added to gate and up before the activation.
    config: (BLOCK_N, BLOCK_K, num_warps, num_stages)."""
    m, k = x.shape
    n = weight.shape[0] // 2
    block_n, block_k, warps, stages = config
    assert k % block_k == 0 and weight.shape[0] == 2 * n
    # the epilogue reads gate's rank columns as B's segment 0 and up's as segment 1, from row n
    assert lora is None or (lora.num_segments == 2 and lora.bounds[0] == n)
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    lora_args, lora_meta = _lora_arguments(lora, out)
    _gated_launch[(cdiv(n, block_n),)](
        x, weight, out, m, n, x.stride(0), weight.stride(0), out.stride(0), *lora_args,
        BLOCK_M=max(16, next_power_of_2(m)), BLOCK_N=block_n, BLOCK_K=block_k, K=k, **lora_meta,
        INTERPRET=triton_interpreting(), num_warps=warps, num_stages=stages, **pdl_arguments(out))
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


def workspace_keys() -> set[tuple]:
    return set(_workspaces)


def release_workspaces(keep: set[tuple] = frozenset()) -> None:
    """Drop the split workspaces but those kept (start-up, after timing its candidates: a recording of an
    engine already running may hold the workspaces that existed before)."""
    for key in set(_workspaces) - set(keep):
        del _workspaces[key]


# launched through kernels/launch.py (a cached direct launch)
_skinny_launch = DirectLauncher(_skinny_kernel)
_gated_launch = DirectLauncher(_gated_kernel)
