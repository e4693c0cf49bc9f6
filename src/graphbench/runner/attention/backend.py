"""Attention backends: metadata layout, declared CUDA-graph support, registry (selection.py picks one).
No torch import here."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import torch


class CudagraphSupport(enum.IntEnum):
    """What a backend can record in a CUDA graph (docs/MACHINERY.md §1.4); larger is more."""

    NEVER = 0
    UNIFORM_SINGLE_TOKEN_DECODE = 1
    UNIFORM_BATCH = 2
    ALWAYS = 3


@dataclass
class AttentionMetadata:
    """Per-step attention inputs. All tensors are views of static buffers (fixed addresses).

    Padded layout: rows past the real tokens have slot -1; requests past the real ones have
    0 query tokens (query_start_loc repeats its last value) and seq_len 0.
    """

    slot_mapping: "torch.Tensor"  # [T] int64, -1 = padding row
    query_start_loc: "torch.Tensor"  # [R + 1] int32
    seq_lens: "torch.Tensor"  # [R] int32, context incl. the new tokens
    block_tables: "torch.Tensor"  # [R, max_blocks_per_seq] int32
    num_reqs: int  # real requests (host-side, for backends that may sync)
    num_tokens: int  # real tokens
    # every real row is one request's single new token, and padding rows are request slots past the
    # real ones (a uniform decode key): backends may use a decode-only kernel
    uniform_decode: bool = False
    # host copies for the reference backend (no device sync needed to read them)
    query_start_loc_host: list[int] | None = None
    seq_lens_host: list[int] | None = None


class AttentionBackend:
    """Base class: write this step's K/V into the paged cache, then attend."""

    name = "base"
    cudagraph_support = CudagraphSupport.NEVER

    def applies_rotary(self, meta: AttentionMetadata) -> bool:
        """forward applies rotary embedding to q and k itself for this batch (it is then given cos_sin)."""
        return False

    def forward(
        self,
        q: "torch.Tensor",  # [T, num_heads, head_dim]
        k: "torch.Tensor",  # [T, num_kv_heads, head_dim]
        v: "torch.Tensor",  # [T, num_kv_heads, head_dim]
        k_cache: "torch.Tensor",  # [num_blocks, block_size, num_kv_heads, head_dim]
        v_cache: "torch.Tensor",
        meta: AttentionMetadata,
        scale: float,
        out: "torch.Tensor",  # [T, num_heads, head_dim], written in place (padding rows: 0)
        cos_sin: "torch.Tensor | None" = None,  # only when applies_rotary(meta): q, k still unrotated
    ) -> None:
        raise NotImplementedError


_BACKENDS: dict[str, Callable[[], AttentionBackend]] = {}


def register_backend(name: str) -> Callable[[Callable[[], AttentionBackend]], Callable[[], AttentionBackend]]:
    """Class decorator: make a backend selectable by name."""

    def wrap(factory: Callable[[], AttentionBackend]) -> Callable[[], AttentionBackend]:
        _BACKENDS[name] = factory
        return factory

    return wrap


def registered_backends() -> dict[str, Callable[[], AttentionBackend]]:
    """The backends registered so far, by name (a copy; selection.create_backend registers the built-in ones)."""
    return dict(_BACKENDS)

