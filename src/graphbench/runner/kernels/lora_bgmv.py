"""The batch's LoRA delta as two Triton kernels over tokens with per-token adapter indices (punica's
BGMV/SGMV idea: every token of a flat batch may use a different adapter, or none).

    shrink:      part[s, t, :] = x[t, k-split s] @ A[idx[t], :, k-split s]^T       (fp32 partial sums)
    expand-add:  out[t, :]    += (sum_s part[s, t, :]) @ B[idx[t]]^T                 (rows with idx[t] >= 0)

A [L, R', K] and B [L, N, R'] are the adapters' static slot buffers (runner/lora/weights.py); idx [T]
int32 holds each token's adapter row, -1 for none (nothing is added to its row). B may be
block-diagonal over output segments (qkv: q, k, v each with their own R = R' / segments columns; gate/up
likewise): the expand reads only a row's own segment's R columns, not the zeros beside them.

Made for CUDA-graph replay: the grid depends on shapes only (T, K, N), nothing is read back to the host,
and which adapters a block of tokens uses is found inside the kernel. A program owns BLOCK_T
consecutive tokens and walks the distinct adapter rows among them in increasing order (the next is the
smallest index above the current), one tensor-core dot per adapter with the other tokens' rows zeroed:
a decode block of 16 requests over 4 adapters reads each adapter's tile once, not once per token, and a
prefill block (one request's tokens) reads one. There is no sort by adapter and no atomics: the
shrink splits K into SPLIT_K programs per token block that write their own partial sums, and the
expand adds them up when it loads them (no zeroed buffer to memset inside the graph).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.util import cdiv, next_power_of_2

K_SPLIT = 256  # K columns per shrink program: K = 2048 gives 8 programs per token block, 8192 gives 32


@triton.jit
def _dot(a, b, PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    if INTERPRET:  # the interpreter's tl.dot multiplies bfloat16's raw bits: do it in float32
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    return tl.dot(a, b, input_precision=PRECISION)


@triton.jit
def _next_adapter(idx, cur):
    """The smallest adapter row in the block above cur (1 << 30: no more)."""
    return tl.min(tl.where(idx > cur, idx, 1 << 30), axis=0)


@triton.jit
def _shrink_kernel(x_ptr, a_ptr, idx_ptr, part_ptr, T, K, R, stride_xt, stride_al, stride_ar,
                   BLOCK_T: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr, K_SPLIT: tl.constexpr,
                   PRECISION: tl.constexpr, INTERPRET: tl.constexpr, PDL: tl.constexpr = False):
    pdl_enter(PDL)
    pid_t, pid_k = tl.program_id(0), tl.program_id(1)
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    t_ok = offs_t < T
    idx = tl.load(idx_ptr + offs_t, mask=t_ok, other=-1)  # [BLOCK_T] adapter rows, -1: none
    offs_r = tl.arange(0, BLOCK_R)
    r_ok = offs_r < R
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_T, BLOCK_R], dtype=tl.float32)
    cur = _next_adapter(idx, -1)
    while cur < (1 << 30):
        sel = (idx == cur) & t_ok  # this adapter's tokens: the other rows of x load as zeros
        a_rows = a_ptr + cur.to(tl.int64) * stride_al + offs_r[:, None] * stride_ar  # [BLOCK_R, 1]
        for kk in range(0, K_SPLIT, BLOCK_K):  # constexpr bounds (the interpreter needs them)
            k = pid_k * K_SPLIT + kk + offs_k
            k_ok = k < K
            x = tl.load(x_ptr + offs_t[:, None] * stride_xt + k[None, :],
                        mask=sel[:, None] & k_ok[None, :], other=0.0)  # [BLOCK_T, BLOCK_K]
            a = tl.load(a_rows + k[None, :], mask=r_ok[:, None] & k_ok[None, :], other=0.0)  # [BLOCK_R, BLOCK_K]
            acc += _dot(x, tl.trans(a), PRECISION, INTERPRET)
        cur = _next_adapter(idx, cur)
    # every real row is written (zeros without an adapter): the expand sums all splits unmasked by idx
    out = part_ptr + (pid_k * T + offs_t[:, None]) * R + offs_r[None, :]
    tl.store(out, acc, mask=t_ok[:, None] & r_ok[None, :])


@triton.jit
def lora_expand_delta(part_ptr, b_ptr, idx, offs_t, t_ok, rows, rows_ok, T, R, seg1, seg2, stride_bl, stride_bn,
                      NUM_SEG: tl.constexpr, SPLIT_K: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_RS: tl.constexpr, PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    """[BLOCK_T, BLOCK_N] float32: the delta of B's rows `rows` for the tokens offs_t (adapter rows idx, -1:
    none, whose rows stay 0): the shrink's partials summed over its splits, rounded to B's dtype, times each
    token's own adapter's B rows of their segment. The expand kernel's body, and the epilogue of the skinny
    GEMM that adds the delta where it stores the projection (kernels/skinny_gemm.py)."""
    seg = (rows >= seg1).to(tl.int32) + (rows >= seg2).to(tl.int32)  # [BLOCK_N] each row's segment
    rs = R // NUM_SEG  # rank columns of one segment
    offs_r = tl.arange(0, BLOCK_RS)
    r_ok = offs_r < rs
    acc = tl.zeros([BLOCK_T, BLOCK_N], dtype=tl.float32)
    for j in tl.static_range(NUM_SEG):
        v = tl.zeros([BLOCK_T, BLOCK_RS], dtype=tl.float32)  # this segment's shrink output, splits summed
        for s in range(SPLIT_K):
            part = part_ptr + (s * T + offs_t[:, None]) * R + j * rs + offs_r[None, :]
            v += tl.load(part, mask=t_ok[:, None] & r_ok[None, :], other=0.0)
        v = v.to(b_ptr.dtype.element_ty)  # rounded to the model's dtype, as the torch path's x A^T is
        b_ok = (rows_ok & (seg == j))[:, None] & r_ok[None, :]  # rows of other segments: not read
        cur = _next_adapter(idx, -1)
        while cur < (1 << 30):
            vs = tl.where((idx == cur)[:, None], v, 0.0)  # [BLOCK_T, BLOCK_RS] this adapter's tokens only
            b = tl.load(b_ptr + cur.to(tl.int64) * stride_bl + rows[:, None] * stride_bn
                        + j * rs + offs_r[None, :], mask=b_ok, other=0.0)  # [BLOCK_N, BLOCK_RS]
            acc += _dot(vs, tl.trans(b), PRECISION, INTERPRET)
            cur = _next_adapter(idx, cur)
    return acc


@triton.jit
def _expand_kernel(part_ptr, b_ptr, idx_ptr, out_ptr, T, N, R, seg1, seg2, stride_bl, stride_bn, stride_ot,
                   NUM_SEG: tl.constexpr, SPLIT_K: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_RS: tl.constexpr, PRECISION: tl.constexpr, INTERPRET: tl.constexpr,
                   PDL: tl.constexpr = False):
    pdl_enter(PDL)
    pid_t, pid_n = tl.program_id(0), tl.program_id(1)
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    t_ok = offs_t < T
    idx = tl.load(idx_ptr + offs_t, mask=t_ok, other=-1)  # [BLOCK_T]
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < N
    acc = lora_expand_delta(part_ptr, b_ptr, idx, offs_t, t_ok, offs_n, n_ok, T, R, seg1, seg2, stride_bl, stride_bn,
                            NUM_SEG, SPLIT_K, BLOCK_T, BLOCK_N, BLOCK_RS, PRECISION, INTERPRET)
    keep = (idx >= 0)[:, None] & n_ok[None, :]  # tokens without an adapter: their rows are not touched
    dst = out_ptr + offs_t[:, None] * stride_ot + offs_n[None, :]
    o = tl.load(dst, mask=keep, other=0.0).to(tl.float32)
    tl.store(dst, (o + acc).to(out_ptr.dtype.element_ty), mask=keep)


def lora_blocks(num_tokens: int, k: int, rank_total: int, num_segments: int) -> dict:
    """Block sizes and warps from the shapes alone (a recording's T is fixed): BLOCK_T 16 for decode-sized
    batches (the smallest tensor-core tile), 64 for prefill chunks, whose blocks mostly hold one request.
    8 warps for the larger tiles: with 4, a [64, 64] shrink tile or a BLOCK_T 64 expand needed 230-255
    registers a thread and spilled where the shapes had no divisibility by 16 (sm_90 compiles, cuobjdump)."""
    block_k = min(64, max(16, next_power_of_2(k)))
    k_split = max(block_k, min(K_SPLIT, next_power_of_2(k)))
    block_t, block_r = 16 if num_tokens <= 64 else 64, max(16, next_power_of_2(rank_total))
    return {"BLOCK_T": block_t, "BLOCK_K": block_k, "K_SPLIT": k_split, "SPLIT_K": cdiv(k, k_split),
            "BLOCK_R": block_r, "BLOCK_RS": max(16, next_power_of_2(rank_total // num_segments)), "BLOCK_N": 128,
            "shrink_warps": 8 if block_t * block_r >= 4096 else 4, "expand_warps": 8 if block_t == 64 else 4}


@triton.jit
def _add_rmsnorm_shrink_kernel(x_ptr, r_ptr, nw_ptr, out_ptr, h_ptr, a_ptr, idx_ptr, part_ptr, T, K, R, stride_x,
                               stride_r, stride_al, stride_ar, eps, BLOCK: tl.constexpr, BLOCK_R: tl.constexpr,
                               PDL: tl.constexpr = False):
    """Program (row, j): the row's residual add + RMSNorm as kernels/add_rmsnorm.py computes it (program j = 0
    stores h and the normalised row), then BLOCK_R columns j of the row's shrink, normed . A[idx, r]. The
    adapter index and its A tile load before the PDL wait: the step's inputs and the adapters were written
    before the graph started."""
    row = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1)
    dtype = x_ptr.dtype.element_ty
    offs = tl.arange(0, BLOCK)
    ok = offs < K
    offs_r = j * BLOCK_R + tl.arange(0, BLOCK_R)
    r_ok = offs_r < R
    nw = tl.load(nw_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    res = tl.load(r_ptr + row * stride_r + offs, mask=ok, other=0.0).to(tl.float32)
    idx = tl.load(idx_ptr + row + tl.zeros([BLOCK_R], dtype=tl.int64))  # [BLOCK_R], all the row's adapter
    a_ok = r_ok & (idx >= 0)
    a_rows = a_ptr + tl.maximum(idx, 0).to(tl.int64)[:, None] * stride_al + offs_r[:, None] * stride_ar
    a = tl.load(a_rows + offs[None, :], mask=a_ok[:, None] & ok[None, :], other=0.0)  # [BLOCK_R, BLOCK]
    pdl_enter(PDL)
    h = tl.load(x_ptr + row * stride_x + offs, mask=ok, other=0.0).to(tl.float32) + res
    h = h.to(dtype).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / K + eps)
    hn = ((h * rstd).to(dtype).to(tl.float32) * nw).to(dtype)
    if j == 0:
        tl.store(h_ptr + row * K + offs, h.to(dtype), mask=ok)
        tl.store(out_ptr + row * K + offs, hn, mask=ok)
    v = tl.sum(a.to(tl.float32) * hn.to(tl.float32)[None, :], axis=1)  # [BLOCK_R]; 0 without an adapter
    tl.store(part_ptr + row * R + offs_r, v, mask=r_ok)


class ShrunkInput:
    """The shrink's output for one projection, and what expanding it needs: partials [SPLIT_K, T, R'] in
    float32 (summed when loaded), the B buffer, each token's adapter row, where B's segments 1 and 2 start."""

    __slots__ = ("part", "b", "index", "bounds", "split_k", "block_rs", "num_segments", "precision")

    def __init__(self, part, b, index, bounds, cfg: dict, num_segments: int, precision: str):
        self.part, self.b, self.index, self.bounds = part, b, index, bounds
        self.split_k, self.block_rs, self.num_segments = cfg["SPLIT_K"], cfg["BLOCK_RS"], num_segments
        self.precision = precision

    def expand_arguments(self) -> tuple:
        """The arguments an expanding kernel takes after its own: part, B, index, R', the two segment bounds,
        B's strides (kernels/skinny_gemm.py's LoRA epilogue)."""
        b = self.b
        return (self.part, b, self.index, b.shape[2], self.bounds[0], self.bounds[1], b.stride(0), b.stride(1))


def lora_shrink(x: torch.Tensor,  # [T, K], unit stride along K
                a: torch.Tensor,  # [L, R', K] contiguous
                b: torch.Tensor,  # [L, N, R'] contiguous (block-diagonal over the segments)
                index: torch.Tensor,  # [T] int32: each token's adapter row, -1 for none
                segments: list[int],  # output rows of each segment (sum N), each with R' / len columns
                *, interpret: bool = False) -> ShrunkInput:
    """x A[idx]^T in one launch (partial sums per K split), ready to be expanded by B."""
    t, k = x.shape
    n, r = b.shape[1], b.shape[2]
    assert a.shape[1:] == (r, k) and index.shape == (t,) and index.dtype == torch.int32 and t > 0
    assert sum(segments) == n and 1 <= len(segments) <= 3 and r % len(segments) == 0
    assert x.stride(1) == 1 and a.is_contiguous() and b.is_contiguous()
    cfg = lora_blocks(t, k, r, len(segments))
    precision = "ieee" if x.dtype == torch.float32 else "tf32"  # float32 models: no tf32 rounding
    part = torch.empty((cfg["SPLIT_K"], t, r), dtype=torch.float32, device=x.device)  # [SPLIT_K, T, R']
    _shrink_launch[(cdiv(t, cfg["BLOCK_T"]), cfg["SPLIT_K"])](
        x, a, index, part, t, k, r, x.stride(0), a.stride(0), a.stride(1),
        BLOCK_T=cfg["BLOCK_T"], BLOCK_R=cfg["BLOCK_R"], BLOCK_K=cfg["BLOCK_K"], K_SPLIT=cfg["K_SPLIT"],
        PRECISION=precision, INTERPRET=interpret, num_warps=cfg["shrink_warps"], num_stages=2, **pdl_arguments(x))
    bounds = [sum(segments[:i + 1]) for i in range(len(segments) - 1)] + [n, n]  # where segments 1, 2 start
    return ShrunkInput(part, b, index, bounds, cfg, len(segments), precision)


def add_rmsnorm_shrink(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                       out: torch.Tensor, h_out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, index: torch.Tensor,
                       segments: list[int]) -> ShrunkInput:
    """The residual add + RMSNorm (out, h_out as kernels/add_rmsnorm.launch_add_rmsnorm writes them) and the
    shrink of its output, normed A[idx]^T, in one launch: what the projection after it expands in its
    epilogue (lora_shrink's result, one K split). x, residual, out, h_out [T, K] contiguous."""
    t, k = x.shape
    r = a.shape[1]
    assert a.shape[2] == k and a.is_contiguous() and b.is_contiguous() and index.shape == (t,) and t > 0
    assert x.is_contiguous() and residual.is_contiguous() and out.is_contiguous() and h_out.is_contiguous()
    block = next_power_of_2(k)
    block_r = max(1, min(16, 16384 // block, next_power_of_2(r)))  # at most 16384 values of A a program
    part = torch.empty((1, t, r), dtype=torch.float32, device=x.device)
    _norm_shrink_launch[(t, cdiv(r, block_r))](
        x, residual, norm_weight, out, h_out, a, index, part, t, k, r, x.stride(0), residual.stride(0), a.stride(0),
        a.stride(1), eps, BLOCK=block, BLOCK_R=block_r, num_warps=8 if block * block_r >= 16384 else 4,
        **pdl_arguments(out))
    n = b.shape[1]
    bounds = [sum(segments[:i + 1]) for i in range(len(segments) - 1)] + [n, n]
    cfg = {"SPLIT_K": 1, "BLOCK_RS": max(16, next_power_of_2(r // len(segments)))}
    return ShrunkInput(part, b, index, bounds, cfg, len(segments), "ieee" if x.dtype == torch.float32 else "tf32")


def lora_add_triton(out: torch.Tensor,  # [T, N], unit stride along N; out[t] += delta for idx[t] >= 0
                    x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, index: torch.Tensor, segments: list[int],
                    *, interpret: bool = False) -> None:
    """out += x A[idx]^T B[idx]^T row by row, in two launches (shrink, expand-add); lora_shrink's arguments."""
    t, n = out.shape[0], b.shape[1]
    assert out.shape == (t, n) and x.shape[0] == t and out.stride(1) == 1
    if t == 0:
        return
    shrunk = lora_shrink(x, a, b, index, segments, interpret=interpret)
    cfg = lora_blocks(t, x.shape[1], b.shape[2], len(segments))
    _expand_launch[(cdiv(t, cfg["BLOCK_T"]), cdiv(n, cfg["BLOCK_N"]))](
        *shrunk.expand_arguments()[:3], out, t, n, *shrunk.expand_arguments()[3:], out.stride(0),
        NUM_SEG=len(segments), SPLIT_K=cfg["SPLIT_K"], BLOCK_T=cfg["BLOCK_T"], BLOCK_N=cfg["BLOCK_N"],
        BLOCK_RS=cfg["BLOCK_RS"], PRECISION=shrunk.precision, INTERPRET=interpret, num_warps=cfg["expand_warps"],
        num_stages=2, **pdl_arguments(out))


# launched through kernels/launch.py (a cached direct launch)
_shrink_launch = DirectLauncher(_shrink_kernel)
_expand_launch = DirectLauncher(_expand_kernel)
_norm_shrink_launch = DirectLauncher(_add_rmsnorm_shrink_kernel)
