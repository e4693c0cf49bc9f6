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
from graphbench.switches import switch_value


# GRAPHBENCH_DECODE_WRITES_KV=0 turns off: a uniform decode batch writes its new K/V inside the decode
# kernel (one launch a layer fewer, ~1.7 us at batch 1 on the H200).
DECODE_WRITES_KV = switch_value("GRAPHBENCH_DECODE_WRITES_KV") == "1"
# GRAPHBENCH_DECODE_MERGE_IN_KERNEL=0 turns off: split-KV decode without the merge launch (the last split
# of a row and kv head to finish merges them; how many tiles a split covers: paged_decode's
# MIN_TILES_PER_SPLIT). H200, -O2, batch 1: 1.065 vs 1.082 ms a step (benchmarks/RESULTS.md, 2026-11-29, 5ffed15).
DECODE_MERGE_IN_KERNEL = switch_value("GRAPHBENCH_DECODE_MERGE_IN_KERNEL") == "1"
# GRAPHBENCH_DECODE_ROTARY=0 turns off: the decode kernel applies rotary embedding to q and the new k as it
# loads them (by default; needs DECODE_WRITES_KV), instead of a rotary launch before it.
DECODE_ROTARY = switch_value("GRAPHBENCH_DECODE_ROTARY") == "1"


@register_backend("triton")
class TritonBackend(AttentionBackend):
    name = "triton"
    cudagraph_support = CudagraphSupport.ALWAYS

    def applies_rotary(self, meta: AttentionMetadata) -> bool:
        # the decode kernel rotates each row at seq_len - 1, its new token's KV index: the position of
        # every rotary embedding graphbench supports (not, say, M-RoPE's, which would need the positions)
        return meta.uniform_decode and DECODE_WRITES_KV and DECODE_ROTARY

    def forward(self, q, k, v, k_cache, v_cache, meta: AttentionMetadata, scale: float, out, cos_sin=None) -> None:
        kernel_writes_kv = meta.uniform_decode and DECODE_WRITES_KV  # the decode kernel writes the new K/V itself
        if not kernel_writes_kv:
            write_kv_cache(k, v, k_cache, v_cache, meta.slot_mapping)
        if meta.uniform_decode:  # row r is request r: no search for each program's request
            paged_decode(q, k_cache, v_cache, out, meta.query_start_loc, meta.seq_lens, meta.block_tables, scale,
                         new_kv=(k, v, meta.slot_mapping) if kernel_writes_kv else None,
                         merge_in_kernel=DECODE_MERGE_IN_KERNEL, cos_sin=cos_sin)
            return
        paged_attention(q, k_cache, v_cache, out, meta.query_start_loc, meta.seq_lens, meta.block_tables, scale)
