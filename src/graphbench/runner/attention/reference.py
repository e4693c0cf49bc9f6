"""Reference attention in plain torch: readable, works on the CPU, reads metadata on the host.

Because it reads per-request lengths on the host it cannot be recorded: capability NEVER.
"""

from __future__ import annotations

import torch

from graphbench.runner.attention.backend import (
    AttentionBackend,
    AttentionMetadata,
    CudagraphSupport,
    register_backend,
)


@register_backend("reference")
class ReferenceBackend(AttentionBackend):
    name = "reference"
    cudagraph_support = CudagraphSupport.NEVER

    def forward(self, q, k, v, k_cache, v_cache, meta: AttentionMetadata, scale: float, out, cos_sin=None) -> None:
        num_blocks, block_size, num_kv_heads, head_dim = k_cache.shape
        slots = meta.slot_mapping[: meta.num_tokens]
        kept = slots >= 0  # a dummy batch's tokens have no slot (-1 would index the cache's last one)
        k_cache.view(-1, num_kv_heads, head_dim)[slots[kept]] = k[: meta.num_tokens][kept]
        v_cache.view(-1, num_kv_heads, head_dim)[slots[kept]] = v[: meta.num_tokens][kept]

        out[meta.num_tokens:] = 0  # padding rows
        starts = meta.query_start_loc_host or meta.query_start_loc[: meta.num_reqs + 1].tolist()
        seq_lens = meta.seq_lens_host or meta.seq_lens[: meta.num_reqs].tolist()
        group = q.shape[1] // num_kv_heads
        for r in range(meta.num_reqs):
            start, end, seq_len = starts[r], starts[r + 1], seq_lens[r]
            q_len = end - start
            num_req_blocks = -(-seq_len // block_size)
            blocks = meta.block_tables[r, :num_req_blocks].long()
            keys = k_cache[blocks].reshape(-1, num_kv_heads, head_dim)[:seq_len]  # [S, kvh, hd]
            values = v_cache[blocks].reshape(-1, num_kv_heads, head_dim)[:seq_len]
            keys = keys.repeat_interleave(group, dim=1).float()  # [S, h, hd]
            values = values.repeat_interleave(group, dim=1).float()
            scores = torch.einsum("qhd,shd->hqs", q[start:end].float(), keys) * scale  # [h, Q, S]
            query_pos = torch.arange(seq_len - q_len, seq_len, device=q.device)
            causal = torch.arange(seq_len, device=q.device)[None, :] <= query_pos[:, None]  # [Q, S]
            scores = scores.masked_fill(~causal, float("-inf"))
            probs = scores.softmax(dim=-1)
            out[start:end] = torch.einsum("hqs,shd->qhd", probs, values).to(q.dtype)
