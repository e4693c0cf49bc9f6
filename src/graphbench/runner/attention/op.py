"""The attention custom op: the one place the model calls attention, and the compiler's split point.

`graphbench::attention(q, k, v, out, layer_idx, positions, cos_sin)` is opaque to torch.compile; it
reads this step's metadata, KV cache and backend from the forward context the engine sets around each
forward. q and k arrive before rotary embedding: a backend that applies it inside its kernel for this
batch (the Triton decode kernel) is handed the table, every other batch is rotated first (one launch).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch

from graphbench.runner.attention.backend import AttentionBackend, AttentionMetadata
from graphbench.runner.op_registry import register_op
from graphbench.runner.rope import rotate_qk

OP_NAME = "graphbench::attention"


@dataclass
class ForwardContext:
    meta: AttentionMetadata
    kv_caches: list[tuple[torch.Tensor, torch.Tensor]]  # per layer: (k_cache, v_cache)
    backend: AttentionBackend
    scale: float


_context: ForwardContext | None = None


@contextmanager
def forward_context(ctx: ForwardContext) -> Iterator[None]:
    """Make ctx visible to the attention op for the duration of one forward (or a capture)."""
    global _context
    previous, _context = _context, ctx
    try:
        yield
    finally:
        _context = previous


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, layer_idx: int,
               positions: torch.Tensor, cos_sin: torch.Tensor) -> None:
    """Writes attention of q[T, h, hd] over the paged cache into out[T, h, hd].

    q and k[T, kvh, hd] get rotary embedding at positions[T] (cos_sin: RotaryEmbedding's table); k and
    v[T, kvh, hd] are written into layer_idx's cache. `out` is allocated by the caller, inside the
    compiled piece before the split, so under piecewise CUDA graphs its address is static.
    """
    ctx = _context
    if ctx is None:
        raise RuntimeError("graphbench::attention called outside a forward context")
    k_cache, v_cache = ctx.kv_caches[layer_idx]
    if ctx.backend.applies_rotary(ctx.meta):
        ctx.backend.forward(q, k, v, k_cache, v_cache, ctx.meta, ctx.scale, out, cos_sin=cos_sin)
        return
    q, k = rotate_qk(q, k, positions, cos_sin)
    ctx.backend.forward(q, k, v, k_cache, v_cache, ctx.meta, ctx.scale, out)


def _attention_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, layer_idx: int,
                    positions: torch.Tensor, cos_sin: torch.Tensor) -> None:
    return None


attention = register_op(OP_NAME, _attention, _attention_fake, mutates_args=("out",))
