"""A Llama-family decoder (Llama 3.x, Qwen2/2.5, Mistral) on a flat token batch.

forward(input_ids[T], positions[T]) -> hidden[T, H]; attention goes through the
`graphbench::attention` custom op, which is where torch.compile splits the graph.
Projections are fused: one qkv matmul and one gate/up matmul per layer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from graphbench.config.arch import ArchConfig
from graphbench.runner.attention.op import attention
from graphbench.runner.rotary import RotaryEmbedding


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        """norm(x) or, with a residual, (norm(x + residual), x + residual): the fused add-norm."""
        if residual is not None:
            x = x + residual
            residual = x
        dtype = x.dtype
        xf = x.float()
        out = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(dtype) * self.weight
        return out if residual is None else (out, residual)


class Attention(nn.Module):
    def __init__(self, arch: ArchConfig, layer_idx: int, rotary: RotaryEmbedding):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = (
            arch.num_attention_heads, arch.num_key_value_heads, arch.head_dim)
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        self.qkv_proj = nn.Linear(arch.hidden_size, self.q_size + 2 * self.kv_size, bias=arch.attention_bias)
        self.o_proj = nn.Linear(self.q_size, arch.hidden_size, bias=False)
        self.layer_idx = layer_idx
        self.rotary = rotary

    def forward(self, positions: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        num_tokens = x.shape[0]
        qkv = self.qkv_proj(x)  # [T, q + 2kv]
        qk, v = qkv.split([self.q_size + self.kv_size, self.kv_size], dim=-1)
        q, k = self.rotary(positions, qk).split([self.q_size, self.kv_size], dim=-1)  # RoPE on q and k heads at once
        q = q.view(num_tokens, self.num_heads, self.head_dim)
        out = torch.empty_like(q)  # [T, h, hd], filled by the attention op
        attention(
            q,
            k.view(num_tokens, self.num_kv_heads, self.head_dim),
            v.view(num_tokens, self.num_kv_heads, self.head_dim),  # a strided view of qkv: no copy
            out,
            self.layer_idx,
        )
        return self.o_proj(out.view(num_tokens, self.q_size))


class MLP(nn.Module):
    def __init__(self, arch: ArchConfig):
        super().__init__()
        self.gate_up_proj = nn.Linear(arch.hidden_size, 2 * arch.intermediate_size, bias=False)
        self.down_proj = nn.Linear(arch.intermediate_size, arch.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class DecoderLayer(nn.Module):
    def __init__(self, arch: ArchConfig, layer_idx: int, rotary: RotaryEmbedding):
        super().__init__()
        self.input_layernorm = RMSNorm(arch.hidden_size, arch.rms_norm_eps)
        self.self_attn = Attention(arch, layer_idx, rotary)
        self.post_attention_layernorm = RMSNorm(arch.hidden_size, arch.rms_norm_eps)
        self.mlp = MLP(arch)

    def forward(self, positions, x, residual):
        if residual is None:
            residual = x
            x = self.input_layernorm(x)
        else:
            x, residual = self.input_layernorm(x, residual)
        x = self.self_attn(positions, x)
        x, residual = self.post_attention_layernorm(x, residual)
        return self.mlp(x), residual


class CausalLM(nn.Module):
    """Embedding, decoder layers, final norm; lm_head applied only to the rows that need logits."""

    def __init__(self, arch: ArchConfig, max_positions: int):
        super().__init__()
        self.arch = arch
        rotary = RotaryEmbedding(arch.head_dim, max_positions, arch.rope_theta, arch.rope_scaling)
        self.embed_tokens = nn.Embedding(arch.vocab_size, arch.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(arch, i, rotary) for i in range(arch.num_hidden_layers))
        self.norm = RMSNorm(arch.hidden_size, arch.rms_norm_eps)
        self.lm_head = nn.Linear(arch.hidden_size, arch.vocab_size, bias=False)
        if arch.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self.rotary = rotary

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """input_ids[T], positions[T] -> hidden[T, H] (after the final norm)."""
        x = self.embed_tokens(input_ids)
        residual = None
        for layer in self.layers:
            x, residual = layer(positions, x, residual)
        x, _ = self.norm(x, residual)
        return x

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden[N, H] -> logits[N, V] in float32."""
        return self.lm_head(hidden).float()
