"""Triton paged attention: prefill, decode and mixed batches in one launch, no host synchronisation.

The launch grid depends only on buffer shapes, so a step can be recorded in a CUDA graph for any
batch content: capability ALWAYS.
"""

from __future__ import annotations

from graphbench.runner.attention.backend import (
    AttentionBackend,
    AttentionMetadata,
    CudagraphSupport,
    register_backend,
)
from graphbench.runner.kernels.kv_cache_write import write_kv_cache
from graphbench.runner.kernels.paged_attention import paged_attention
from graphbench.runner.kernels.paged_decode import paged_decode


@register_backend("triton")
class TritonBackend(AttentionBackend):
    name = "triton"
    cudagraph_support = CudagraphSupport.ALWAYS

    def applies_rotary(self, meta: AttentionMetadata) -> bool:
        # the decode kernel rotates each row at seq_len - 1, its new token's KV index: the position of
        # every rotary embedding graphbench supports (not, say, M-RoPE's, which would need the positions)
        return meta.uniform_decode

    def forward(self, q, k, v, k_cache, v_cache, meta: AttentionMetadata, scale: float, out, cos_sin=None) -> None:
        if meta.uniform_decode:  # row r is request r: no search; the kernel writes the new K/V itself
            paged_decode(q, k_cache, v_cache, out, meta.query_start_loc, meta.seq_lens, meta.block_tables, scale,
                         (k, v, meta.slot_mapping), cos_sin=cos_sin)
            return
        write_kv_cache(k, v, k_cache, v_cache, meta.slot_mapping)
        paged_attention(q, k_cache, v_cache, out, meta.query_start_loc, meta.seq_lens, meta.block_tables, scale)
