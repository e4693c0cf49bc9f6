"""Paged KV cache: the per-layer block tensors and their sizing (the block allocator is in
block_allocator.py, torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from graphbench.config.arch import ArchConfig
from graphbench.errors import GraphbenchError

CPU_KV_CACHE_BYTES = 256 << 20  # CPU runs: at most 256 MiB of KV cache unless num_blocks is given


def bytes_per_block(arch: ArchConfig, block_size: int, dtype: torch.dtype) -> int:
    """K and V for one block, all layers."""
    element = torch.empty((), dtype=dtype).element_size()
    return 2 * arch.num_hidden_layers * block_size * arch.num_key_value_heads * arch.head_dim * element


@dataclass
class KVCache:
    """Per layer (k_cache, v_cache), each [num_blocks, block_size, num_kv_heads, head_dim]."""

    layers: list[tuple[torch.Tensor, torch.Tensor]]
    num_blocks: int
    block_size: int

    @property
    def num_tokens(self) -> int:
        return self.num_blocks * self.block_size

    @classmethod
    def allocate(cls, arch: ArchConfig, num_blocks: int, block_size: int, dtype, device) -> "KVCache":
        shape = (num_blocks, block_size, arch.num_key_value_heads, arch.head_dim)
        layers = [
            (torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device))
            for _ in range(arch.num_hidden_layers)
        ]
        return cls(layers, num_blocks, block_size)


def activation_bytes(arch: ArchConfig, max_num_batched_tokens: int, max_num_seqs: int, dtype) -> int:
    """A generous estimate of one step's peak activations at max_num_batched_tokens."""
    element = torch.empty((), dtype=dtype).element_size()
    per_token = (4 * arch.hidden_size + 4 * arch.intermediate_size
                 + 2 * (arch.num_attention_heads + 2 * arch.num_key_value_heads) * arch.head_dim) * element
    logits = max_num_seqs * arch.vocab_size * 4 * 3
    return max_num_batched_tokens * per_token + logits + (512 << 20)


def num_kv_blocks(arch: ArchConfig, config, dtype, block_size: int, max_model_len: int,
                  total_memory: int | None, free_memory: int | None, weights_bytes: int = 0) -> int:
    """KV blocks: explicit count; on the CPU enough for max_num_seqs full sequences (<= 256 MiB);
    on a GPU utilisation x total memory, minus what is in use, minus one step's activations.
    weights_bytes (this engine's weights, already loaded) only explains a shortfall."""
    if config.cache.num_blocks is not None:
        return config.cache.num_blocks
    per_block = bytes_per_block(arch, block_size, dtype)
    sched = config.scheduler
    if free_memory is None:
        enough = sched.max_num_seqs * -(-max_model_len // block_size)
        return max(1, min(CPU_KV_CACHE_BYTES // per_block, enough))
    in_use = (total_memory or 0) - free_memory
    reserve = activation_bytes(arch, sched.max_num_batched_tokens, sched.max_num_seqs, dtype)
    budget = int((total_memory or 0) * config.cache.gpu_memory_utilization) - in_use - reserve
    if budget < per_block:
        raise GraphbenchError(_shortfall(config.cache.gpu_memory_utilization, total_memory or 0, in_use,
                                         weights_bytes, reserve, budget))
    return budget // per_block


def _shortfall(utilization: float, total: int, in_use: int, weights: int, reserve: int, budget: int) -> str:
    """Where the GPU's memory went, when none is left for the KV cache."""
    gib = 2**30
    others = in_use - weights
    held = f"this engine's weights {weights / gib:.2f} GiB"
    if weights and others > 1 * gib:  # (the CUDA context and torch's own buffers take a few hundred MiB)
        held += (f"; {others / gib:.2f} GiB held by something else: another engine in this process "
                 "(close it and free its memory first) or another process on the GPU")
    return (f"no memory left for the KV cache: gpu_memory_utilization {utilization:.2f} x {total / gib:.2f} GiB "
            f"minus {in_use / gib:.2f} GiB in use ({held}) minus {reserve / gib:.2f} GiB for one step's "
            f"activations leaves {budget / gib:.2f} GiB. Raise --gpu-memory-utilization, lower "
            "--max-num-batched-tokens or use a smaller model")
