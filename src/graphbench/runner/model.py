"""A Llama-family decoder (Llama 3.x, Qwen2/2.5, Mistral) on a flat token batch.

forward(input_ids[T], positions[T]) -> hidden[T, H]; attention goes through the
`graphbench::attention` custom op, which is where torch.compile splits the graph.
Projections are fused: one qkv matmul and one gate/up matmul per layer; a one-row batch runs them
as a Triton GEMV (linear.py). Under tensor parallelism
the model is built from the per-rank shape (parallel.local_arch) and all-reduces after o_proj,
down_proj and the vocab-parallel embedding (see parallel.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from graphbench.config.arch import ArchConfig
from graphbench.runner import linear as ops
from graphbench.runner import norms
from graphbench.runner.attention.op import attention
from graphbench.runner.linear import rms_norm
from graphbench.runner.lora.projection import lora_add_rmsnorm_gate_up, lora_add_rmsnorm_linear, lora_linear
from graphbench.runner.parallel import Shard, all_gather_last, all_reduce, vocab_rows
from graphbench.runner.rope import RotaryEmbedding


@dataclass(frozen=True, slots=True)
class LayerOps:
    """The projection and norm ops the model calls: config.model.kernels picks the set."""

    linear: Callable
    add_rmsnorm_linear: Callable  # residual add + RMSNorm, then the projection
    add_rmsnorm_gate_up: Callable  # residual add + RMSNorm, then gate/up and silu(gate) * up
    add_rmsnorm: Callable
    embed_rmsnorm: Callable  # the embedding lookup + the first layer's norm
    own_kernels: bool  # graphbench's kernels: a LoRA delta may be added in its projection's epilogue


LAYER_OPS = {
    # graphbench's ops: its Triton kernels where they apply (linear.py, norms.py), torch ops elsewhere
    "graphbench": LayerOps(ops.linear, ops.add_rmsnorm_linear, ops.add_rmsnorm_gate_up, norms.add_rmsnorm,
                           norms.embed_rmsnorm, True),
    # torch ops only: cuBLAS, and Inductor's fusions when compiled
    "torch": LayerOps(F.linear, ops.add_rmsnorm_matmul, ops.add_rmsnorm_gate_up_matmul, norms.add_rmsnorm_torch,
                      norms.embed_rmsnorm_torch, False),
}


class Linear(nn.Linear):
    """nn.Linear whose forward is the layer ops' `linear` (same parameters, same state-dict keys)."""

    def __init__(self, in_features: int, out_features: int, bias: bool, op: Callable):
        super().__init__(in_features, out_features, bias=bias)
        self.op = op

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op(x, self.weight, self.bias)


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float, add_rmsnorm: Callable):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps
        self.add_rmsnorm = add_rmsnorm

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        """norm(x) or, with a residual, (norm(x + residual), x + residual): the fused add-norm."""
        if residual is not None:
            return self.add_rmsnorm(x, residual, self.weight, self.eps)
        return rms_norm(x, self.weight, self.eps)


class Attention(nn.Module):
    def __init__(self, arch: ArchConfig, layer_idx: int, rotary: RotaryEmbedding, layer_ops: LayerOps,
                 tp_size: int = 1):
        super().__init__()
        self.tp_size = tp_size
        self.own_kernels = layer_ops.own_kernels  # (its LoRA projection: runner/lora/projection.py)
        self.num_heads, self.num_kv_heads, self.head_dim = (
            arch.num_attention_heads, arch.num_key_value_heads, arch.head_dim)
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        self.qkv_proj = Linear(arch.hidden_size, self.q_size + 2 * self.kv_size, arch.attention_bias, layer_ops.linear)
        self.o_proj = Linear(self.q_size, arch.hidden_size, False, layer_ops.linear)
        self.layer_idx = layer_idx
        self.rotary = rotary

    def forward(self, positions: torch.Tensor, qkv: torch.Tensor, lora=None) -> torch.Tensor:
        """qkv[T, q + 2kv] (the layer computes it after its norm) -> o_proj output [T, H].
        lora: (the layer's LayerLoRA, each token's adapter row [T] int32) when adapters are loaded."""
        num_tokens = qkv.shape[0]
        q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)  # strided views of qkv: no copy
        out = qkv.new_empty((num_tokens, self.num_heads, self.head_dim))  # [T, h, hd], filled by the attention op
        attention(  # which applies RoPE to q and k (in its decode kernel, or one launch before)
            q.view(num_tokens, self.num_heads, self.head_dim),
            k.view(num_tokens, self.num_kv_heads, self.head_dim),
            v.view(num_tokens, self.num_kv_heads, self.head_dim),
            out,
            self.layer_idx,
            positions,
            self.rotary.cos_sin,
        )
        flat = out.view(num_tokens, self.q_size)
        if lora is None:
            out = self.o_proj(flat)
        else:
            out = lora_linear(flat, self.o_proj.weight, None, lora[0].o_a, lora[0].o_b, lora[1], lora[0].out_segments,
                              self.own_kernels)
        return all_reduce(out) if self.tp_size > 1 else out


class MLP(nn.Module):
    def __init__(self, arch: ArchConfig, layer_ops: LayerOps, tp_size: int = 1):
        super().__init__()
        self.tp_size = tp_size
        self.gate_up_proj = Linear(arch.hidden_size, 2 * arch.intermediate_size, False, layer_ops.linear)
        self.down_proj = Linear(arch.intermediate_size, arch.hidden_size, False, layer_ops.linear)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden[T, I] = silu(gate) * up (the layer computes it with its norm: linear.add_rmsnorm_gate_up)
        -> down_proj(hidden) [T, H]."""
        out = self.down_proj(hidden)
        return all_reduce(out) if self.tp_size > 1 else out


class DecoderLayer(nn.Module):
    def __init__(self, arch: ArchConfig, layer_idx: int, rotary: RotaryEmbedding, layer_ops: LayerOps,
                 tp_size: int = 1):
        super().__init__()
        self.ops = layer_ops
        self.input_layernorm = RMSNorm(arch.hidden_size, arch.rms_norm_eps, layer_ops.add_rmsnorm)
        self.self_attn = Attention(arch, layer_idx, rotary, layer_ops, tp_size)
        self.post_attention_layernorm = RMSNorm(arch.hidden_size, arch.rms_norm_eps, layer_ops.add_rmsnorm)
        self.mlp = MLP(arch, layer_ops, tp_size)
        self.lora = None  # runner/lora/weights.py's LayerLoRA when adapters are loaded

    def forward(self, positions, x, residual, lora_index=None):
        if lora_index is not None:
            return self._forward_with_lora(positions, x, residual, lora_index)
        attn = self.self_attn
        if residual is None:  # the first layer: nothing to add yet
            return self.forward_normed(positions, self.input_layernorm(x), x)
        # residual add + RMSNorm (one Triton launch on the GPU), then qkv: linear.py
        qkv, residual = self.ops.add_rmsnorm_linear(x, residual, *_norm(self.input_layernorm), *_proj(attn.qkv_proj))
        return self._from_qkv(positions, qkv, residual)

    def forward_normed(self, positions, h, residual):
        """The layer from its input already normed: h = input_layernorm(residual) [T, H]."""
        return self._from_qkv(positions, self.self_attn.qkv_proj(h), residual)

    def _from_qkv(self, positions, qkv, residual):
        x = self.self_attn(positions, qkv)
        hidden, residual = self.ops.add_rmsnorm_gate_up(x, residual, *_norm(self.post_attention_layernorm),
                                                        self.mlp.gate_up_proj.weight)
        return self.mlp(hidden), residual


    def _forward_with_lora(self, positions, x, residual, index):
        """The same layer with each projection's LoRA delta added (runner/lora/projection.py: the shrinks of qkv's
        and gate/up's inputs in their add-norm's launch, the expands in the projections' epilogues where the
        kernels apply). index [T] int32: each token's adapter row in the layer's buffers (-1: none)."""
        attn, mlp, lora = self.self_attn, self.mlp, self.lora
        own = self.ops.own_kernels
        if residual is None:
            residual = x
            qkv = lora_linear(self.input_layernorm(x), attn.qkv_proj.weight, attn.qkv_proj.bias, lora.qkv_a, lora.qkv_b,
                              index, lora.qkv_segments, own)
        else:
            qkv, residual = lora_add_rmsnorm_linear(x, residual, *_norm(self.input_layernorm), attn.qkv_proj.weight,
                                                    attn.qkv_proj.bias, lora.qkv_a, lora.qkv_b, index,
                                                    lora.qkv_segments, own)
        x = attn(positions, qkv, (lora, index))
        hidden, residual = lora_add_rmsnorm_gate_up(x, residual, *_norm(self.post_attention_layernorm),
                                                    mlp.gate_up_proj.weight, lora.gate_up_a, lora.gate_up_b, index,
                                                    lora.gate_up_segments, own)
        out = lora_linear(hidden, mlp.down_proj.weight, None, lora.down_a, lora.down_b, index, lora.out_segments, own)
        return (all_reduce(out) if mlp.tp_size > 1 else out), residual


def _norm(norm: RMSNorm) -> tuple[torch.Tensor, float]:
    return norm.weight, norm.eps


def _proj(proj: nn.Linear) -> tuple[torch.Tensor, torch.Tensor | None]:
    return proj.weight, proj.bias


class CausalLM(nn.Module):
    """Embedding, decoder layers, final norm; lm_head applied only to the rows that need logits."""

    def __init__(self, arch: ArchConfig, max_positions: int, shard: Shard = Shard(), kernels: str = "graphbench"):
        """arch: this rank's shape (parallel.local_arch); the vocabulary is split here. kernels:
        config.model.kernels (LAYER_OPS)."""
        super().__init__()
        self.arch, self.shard, self.ops = arch, shard, LAYER_OPS[kernels]
        rotary = RotaryEmbedding(arch.head_dim, max_positions, arch.rope_theta, arch.rope_scaling)
        self.vocab_start, vocab_rows_local = vocab_rows(arch.vocab_size, shard)
        self.embed_tokens = nn.Embedding(vocab_rows_local, arch.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(arch, i, rotary, self.ops, shard.size)
                                    for i in range(arch.num_hidden_layers))
        self.norm = RMSNorm(arch.hidden_size, arch.rms_norm_eps, self.ops.add_rmsnorm)
        self.lm_head = Linear(arch.hidden_size, vocab_rows_local, False, self.ops.linear)
        if arch.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self.rotary = rotary

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """input_ids[T], positions[T] -> hidden[T, H] (after the final norm)."""
        lora_index = None
        if getattr(self, "lora_num_slots", 0):  # adapters loaded (runner/lora/weights.py attach_lora)
            lora_index = self.lora_token_slots[: input_ids.shape[0]]  # [T] int32 adapter rows, -1: none
        layers = iter(self.layers)
        if self.shard.size == 1 and lora_index is None:
            # the embedding lookup and the first norm in one graphbench op (norms.py says why)
            first = next(layers)
            h, residual = self.ops.embed_rmsnorm(input_ids, self.embed_tokens.weight, *_norm(first.input_layernorm))
            x, residual = first.forward_normed(positions, h, residual)
        else:
            x, residual = self._embed(input_ids), None
        for layer in layers:
            x, residual = layer(positions, x, residual, lora_index)
        x, _ = self.norm(x, residual)
        return x

    def _embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        if self.shard.size == 1:
            return self.embed_tokens(input_ids)
        local = input_ids - self.vocab_start  # vocab-parallel: this rank's rows, zeros elsewhere
        inside = (local >= 0) & (local < self.embed_tokens.num_embeddings)
        x = self.embed_tokens(torch.where(inside, local, 0)) * inside[:, None].to(self.embed_tokens.weight.dtype)
        return all_reduce(x)

    def compute_logits(self, hidden: torch.Tensor, float32: bool = True) -> torch.Tensor:
        """hidden[N, H] -> logits[N, V] (float32, or the model dtype for greedy sampling)."""
        logits = self.lm_head(hidden)
        if self.shard.size > 1:  # vocab-parallel lm_head: gather every rank's slice, drop the padding
            logits = all_gather_last(logits)[:, : self.arch.vocab_size]
        return logits.float() if float32 else logits
