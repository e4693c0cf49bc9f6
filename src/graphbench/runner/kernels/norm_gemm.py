"""The skinny GEMM (kernels/skinny_gemm.py) with the decoder's residual add + RMSNorm in front: one launch
where the add-norm kernel and the projection were two (GRAPHBENCH_NORM_IN_GEMM, runner/kernel_choice.py).

A decoder layer's qkv and gate/up projections read rmsnorm(x + residual) * norm_weight. Norming a row
needs all of its columns, and with one split of K each program of the skinny GEMM streams every column
of its rows' inputs anyway: so each program adds the residual to its x tile as it loads it, keeps the
rows' running sum of squares, multiplies the tile by the norm weight for the dot, and scales its
accumulator by the rows' 1 / rms at the end (the scale is per row, so it commutes with the dot). After
the K loop each program writes its slice of columns of h = x + residual, the next residual. The
products round once, in float32, where the add-norm kernel rounded the normed row to the model's dtype
before the norm weight and again after it: results agree to bf16's precision, not bit for bit.

The norm weight is loaded as a [BLOCK_M, BLOCK_K] tile (the same row repeated): Triton 3.6 pipelines
that load with the others (cp.async), where a [BLOCK_K] vector load stayed a synchronous load inside
the K loop, one L2 round trip an iteration. That form measured 3-4x slower than the two launches it
replaces (bench/RESULTS.md, 2026-12-03, 29aa69a); this one has not been measured on a GPU yet.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.skinny_gemm import dot_acc, gated_blocks, skinny_blocks
from graphbench.runner.kernels.util import cdiv, next_power_of_2, triton_interpreting

# An H100/H200 SM's shared memory a block may use (227 KiB): the norm's two extra staged tiles (residual,
# norm weight) can push the skinny GEMM's stage count past it, so norm_gemm takes fewer stages there.
SHARED_BYTES = 227 * 1024
# The most columns of h one program writes after its K loop ([BLOCK_M, MAX_BLOCK_H] in float32 registers)
MAX_BLOCK_H = 128


@triton.jit
def _normed_tile(x_rows, r_rows, nw_ptr, k0, offs_k, m_ok, sumsq):
    """x + residual at columns k0.. ([BLOCK_M, BLOCK_K], rounded to x's dtype as the model rounds it), its
    squares added to sumsq [BLOCK_M], times the norm weight: the dot's operand, in x's dtype."""
    cols = (k0 + offs_k)[None, :]
    x = tl.load(x_rows + cols, mask=m_ok[:, None], other=0.0)
    h = (x.to(tl.float32) + tl.load(r_rows + cols, mask=m_ok[:, None], other=0.0).to(tl.float32)).to(x.dtype)
    hf = h.to(tl.float32)
    sumsq += tl.sum(hf * hf, axis=1)
    # [BLOCK_M, BLOCK_K], every row the norm weight: a tile load the K loop's pipeline stages (see above)
    nw = tl.load(nw_ptr + cols + 0 * m_ok[:, None].to(tl.int32)).to(tl.float32)
    return (hf * nw).to(x.dtype), sumsq


@triton.jit
def _norm_gemm_kernel(x_ptr, r_ptr, nw_ptr, w_ptr, b_ptr, y_ptr, h_ptr, M, N, stride_wn, eps,
                      HAS_BIAS: tl.constexpr, GATED: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, K: tl.constexpr, BLOCK_H: tl.constexpr, INTERPRET: tl.constexpr,
                      PDL: tl.constexpr = False):
    """y = (rmsnorm(x + r) * nw) @ w.T (+ b), and h = x + r; x, r, h [M, K] and y contiguous. GATED: w = [gate;
    up] [2N, K] and y[:, j] = silu(gate_j) * up_j for BLOCK_N columns j (the gated skinny GEMM's epilogue).
    Program p writes h's columns [p * BLOCK_H, (p + 1) * BLOCK_H)."""
    pid_n = tl.program_id(0)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    n_ok = offs_n < N
    row_offs = offs_m[:, None].to(tl.int64) * K  # [BLOCK_M, 1]
    x_rows, r_rows, h_rows = x_ptr + row_offs, r_ptr + row_offs, h_ptr + row_offs
    cols = w_ptr + offs_n[None, :].to(tl.int64) * stride_wn  # [1, BLOCK_N]: w.T's columns (the gate's if GATED)
    up_cols = w_ptr + (offs_n + N)[None, :].to(tl.int64) * stride_wn  # GATED: the matching up rows
    pdl_enter(PDL)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    up = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    sumsq = tl.zeros([BLOCK_M], dtype=tl.float32)
    for k0 in tl.range(0, K, BLOCK_K):
        x, sumsq = _normed_tile(x_rows, r_rows, nw_ptr, k0, offs_k, m_ok, sumsq)
        acc = dot_acc(acc, x, tl.load(cols + (k0 + offs_k)[:, None], mask=n_ok[None, :], other=0.0), INTERPRET)
        if GATED:
            up = dot_acc(up, x, tl.load(up_cols + (k0 + offs_k)[:, None], mask=n_ok[None, :], other=0.0), INTERPRET)
    rstd = (1.0 / tl.sqrt(sumsq / K + eps))[:, None]
    # this program's columns of the next residual, x + r again from L2 (a store inside the K loop would
    # sit between its pipelined loads, and one program writing all of h would finish last)
    offs_h = pid_n * BLOCK_H + tl.arange(0, BLOCK_H)
    h_mask = m_ok[:, None] & (offs_h < K)[None, :]
    h = (tl.load(x_rows + offs_h[None, :], mask=h_mask, other=0.0).to(tl.float32)
         + tl.load(r_rows + offs_h[None, :], mask=h_mask, other=0.0).to(tl.float32))
    tl.store(h_rows + offs_h[None, :], h.to(h_ptr.dtype.element_ty), mask=h_mask)
    dtype = y_ptr.dtype.element_ty
    y_offs = offs_m[:, None].to(tl.int64) * N + offs_n[None, :]
    y_mask = m_ok[:, None] & n_ok[None, :]
    acc *= rstd
    if GATED:  # both products rounded to y's dtype before the activation, as the gated skinny GEMM rounds them
        gate = acc.to(dtype).to(tl.float32)
        up = (up * rstd).to(dtype).to(tl.float32)
        tl.store(y_ptr + y_offs, (gate * tl.sigmoid(gate) * up).to(dtype), mask=y_mask)
    else:
        if HAS_BIAS:
            acc += tl.load(b_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)[None, :]
        tl.store(y_ptr + y_offs, acc.to(dtype), mask=y_mask)


def norm_gemm_applies(x: torch.Tensor, weight: torch.Tensor, num_sms: int, gated: bool = False) -> bool:
    """bf16 (the dot's operand is the row times the norm weight before 1/rms: float16 could overflow where
    the normed row would not); the skinny GEMM's blocks for this weight take K in one split (the norm needs
    whole rows); the programs write h in slices of at most MAX_BLOCK_H columns. The caller checks that the
    skinny GEMM takes x and the weight (skinny_applies)."""
    n, k = weight.shape
    if x.dtype != torch.bfloat16:
        return False
    if gated:
        block_n, block_k = gated_blocks(n, k, num_sms)[:2]
        return k % block_k == 0 and cdiv(n // 2, block_n) * MAX_BLOCK_H >= k
    block_n, _block_k, splits = skinny_blocks(n, k, num_sms)[:3]
    return splits == 1 and cdiv(n, block_n) * MAX_BLOCK_H >= k


def norm_gemm_stages(block_m: int, block_n: int, block_k: int, stages: int, gated: bool, elem: int = 2) -> int:
    """The blocks' stage count, lowered until a stage's tiles (x, residual, norm weight: [block_m, block_k];
    the weights: [block_k, block_n], twice when gated) fit in SHARED_BYTES; at least 2. Conservative: Triton
    3.6 gives the three row tiles one buffer fewer than the stage count (llama-3.1-8b's qkv at 64 rows fits
    4 stages, this gives 3), which may differ in other versions; the compile test checks the fit."""
    per_stage = (3 * block_m * block_k + (2 if gated else 1) * block_k * block_n) * elem
    return max(2, min(stages, SHARED_BYTES // per_stage))


def norm_gemm(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float, weight: torch.Tensor,
              bias: torch.Tensor | None, num_sms: int, gated: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """x, residual [M, K] (2 <= M <= 64, contiguous) -> (rmsnorm(x + residual) * norm_weight @ weight.T (+ bias)
    [M, N], x + residual [M, K]) in one launch, on the skinny GEMM's blocks for the weight. gated: weight =
    [gate; up] [2I, K] and the first result is silu(gate) * up [M, I] (no bias), on the gated GEMM's blocks."""
    m, k = x.shape
    if gated:
        n = weight.shape[0] // 2
        block_n, block_k, warps, stages = gated_blocks(2 * n, k, num_sms)
    else:
        n = weight.shape[0]
        block_n, block_k, splits, warps, stages = skinny_blocks(n, k, num_sms)
        assert splits == 1, "the norm needs whole rows: one split of K"
    assert k % block_k == 0 and residual.shape == x.shape and x.is_contiguous() and residual.is_contiguous()
    block_m = max(16, next_power_of_2(m))
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    h = torch.empty_like(x)
    programs = cdiv(n, block_n)
    _norm_gemm_launch[(programs,)](
        x, residual, norm_weight, weight, bias if bias is not None else out, out, h, m, n, weight.stride(0), eps,
        HAS_BIAS=bias is not None, GATED=gated, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, K=k,
        BLOCK_H=max(16, next_power_of_2(cdiv(k, programs))), INTERPRET=triton_interpreting(), num_warps=warps,
        num_stages=norm_gemm_stages(block_m, block_n, block_k, stages, gated), **pdl_arguments(out))
    return out, h


# launched through kernels/launch.py (a cached direct launch unless GRAPHBENCH_DIRECT_LAUNCH=0)
_norm_gemm_launch = DirectLauncher(_norm_gemm_kernel)
