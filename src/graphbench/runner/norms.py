"""The decoder's two norms outside its fused projections, as graphbench ops: the embedding lookup + the
first layer's input RMSNorm, and the final residual add + RMSNorm.

With these, the forward of a single-GPU model without LoRA holds no torch op that launches a kernel of
its own: every kernel is in a graphbench op, so Inductor has nothing to generate for the pieces between
attention calls, and compile/splitting.py runs them as traced (a warm start then needs none of torch's
compile stack). On the GPU each is one Triton launch (kernels/add_rmsnorm.py), as Inductor's fusion of
the same torch ops was; elsewhere, and in the variants compiled for a fixed multi-row size, the torch
ops of the eager model (compile/pieces.linears_as_matmuls).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from graphbench.runner.linear import (add_norm_kernel_applies, add_rmsnorm_rows, add_rmsnorm_torch, on_triton_device,
                                      pick_implementation, rms_norm)
from graphbench.runner.op_registry import register_op

EMBED_NORM_OP_NAME = "graphbench::embed_rmsnorm"
ADD_NORM_OP_NAME = "graphbench::add_rmsnorm"


@functools.cache
def _kernels():
    from graphbench.runner.kernels import add_rmsnorm

    return add_rmsnorm


def embed_rmsnorm_torch(input_ids: torch.Tensor, table: torch.Tensor, norm_weight: torch.Tensor,
                        eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(rmsnorm(table[input_ids]) * norm_weight, table[input_ids]) as torch ops."""
    x = F.embedding(input_ids, table)
    return rms_norm(x, norm_weight, eps), x


def embed_rmsnorm_impl(input_ids: torch.Tensor, table: torch.Tensor, norm_weight: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """input_ids [T] -> (the first layer's normed input [T, H], the embeddings [T, H]: its residual)."""
    if (input_ids.dim() == 1 and on_triton_device(table) and table.stride(-1) == 1
            and norm_weight.dtype == table.dtype):
        out = table.new_empty((input_ids.shape[0], table.shape[1]))
        x = torch.empty_like(out)
        _kernels().launch_embed_rmsnorm(input_ids, table, norm_weight, eps, out, x)
        return out, x
    return embed_rmsnorm_torch(input_ids, table, norm_weight, eps)


def _embed_rmsnorm_fake(input_ids, table, norm_weight, eps):
    out = table.new_empty((input_ids.shape[0], table.shape[1]))
    return out, torch.empty_like(out)


embed_rmsnorm_op = register_op(EMBED_NORM_OP_NAME, embed_rmsnorm_impl, _embed_rmsnorm_fake)


def embed_rmsnorm(input_ids: torch.Tensor, table: torch.Tensor, norm_weight: torch.Tensor,
                  eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """input_ids [T] -> (rmsnorm(embeddings) * norm_weight, embeddings), both [T, H]."""
    return pick_implementation(embed_rmsnorm_impl, embed_rmsnorm_op)(input_ids, table, norm_weight, eps)


def add_rmsnorm_impl(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor,
                     eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """x, residual [T, H] -> (rmsnorm(x + residual) * norm_weight, x + residual)."""
    if add_norm_kernel_applies(x, residual, norm_weight):
        return add_rmsnorm_rows(x, residual, norm_weight, eps)
    return add_rmsnorm_torch(x, residual, norm_weight, eps)


def _add_rmsnorm_fake(x, residual, norm_weight, eps):
    return torch.empty_like(x), torch.empty_like(x)


add_rmsnorm_op = register_op(ADD_NORM_OP_NAME, add_rmsnorm_impl, _add_rmsnorm_fake)


def add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor,
                eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """x, residual [T, H] -> (rmsnorm(x + residual) * norm_weight, x + residual)."""
    return pick_implementation(add_rmsnorm_impl, add_rmsnorm_op)(x, residual, norm_weight, eps)
