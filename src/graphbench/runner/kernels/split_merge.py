"""Split-KV attention's second launch: each (token, head)'s partial outputs over the KV splits combined by their
log-sum-exp weights. Prefill (kernels/paged_attention.py) and decode (kernels/paged_decode.py) attention both
split long contexts into at most MAX_SPLITS parts to fill the GPU."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.launch import DirectLauncher
from graphbench.runner.kernels.util import next_power_of_2


MAX_SPLITS = 32  # the most KV splits a launch may use (the merge kernel's static width)


@triton.jit(do_not_specialize=["max_reqs", "num_splits"])
def _merge_splits_kernel(
    part_ptr, lse_ptr, out_ptr, qsl_ptr, max_reqs, num_heads, num_splits, stride_ot, stride_oh,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, MAX_SPLITS: tl.constexpr,
):
    """out[tok, head] = the log-sum-exp weighted mean of the splits' partial outputs (num_splits <= MAX_SPLITS).

    num_splits is a run-time value so that one compiled kernel serves every split count."""
    tok = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    out_offs = out_ptr + tok * stride_ot + head * stride_oh + offs_d
    if tok >= tl.load(qsl_ptr + max_reqs):  # padding row
        tl.store(out_offs, tl.zeros([BLOCK_D], dtype=out_ptr.dtype.element_ty), mask=d_ok)
        return
    offs_s = tl.arange(0, MAX_SPLITS)
    s_ok = offs_s < num_splits
    row = (tok * num_heads + head) * num_splits + offs_s
    lse = tl.load(lse_ptr + row, mask=s_ok, other=float("-inf"))
    w = tl.exp2(lse - tl.max(lse, 0))  # empty splits: lse = -inf -> weight 0 (their part is 0)
    part = tl.load(part_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], mask=s_ok[:, None] & d_ok[None, :],
                   other=0.0)
    o = tl.sum(part * w[:, None], 0) / tl.sum(w, 0)
    tl.store(out_offs, o.to(out_ptr.dtype.element_ty), mask=d_ok)


def merge_splits(part: torch.Tensor, lse: torch.Tensor, out: torch.Tensor, query_start_loc: torch.Tensor,
                 max_reqs: int) -> None:
    """Combine split-KV partial outputs part[T, h, S, hd] / lse[T, h, S] into out[T, h, hd]."""
    num_tokens, num_heads, num_splits, head_dim = part.shape
    assert 1 < num_splits <= MAX_SPLITS
    _merge_splits_launch[(num_tokens, num_heads)](
        part, lse, out, query_start_loc, max_reqs, num_heads, num_splits, out.stride(0), out.stride(1),
        HEAD_DIM=head_dim, BLOCK_D=max(16, next_power_of_2(head_dim)), MAX_SPLITS=MAX_SPLITS,
    )


# launched through kernels/launch.py (a cached direct launch)
_merge_splits_launch = DirectLauncher(_merge_splits_kernel)
