"""Paged KV cache: the per-layer block tensors and their sizing (the block allocator is in
block_allocator.py, torch-free)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from graphbench.config.arch import ArchConfig
from graphbench.errors import GraphbenchError

if TYPE_CHECKING:
    from graphbench.runner.kv_arena import KVArena

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
    arena: KVArena | None = None  # sized after capture: the reserved addresses the layers view

    @property
    def num_tokens(self) -> int:
        return self.num_blocks * self.block_size

    def device_bytes(self, arch: ArchConfig, dtype) -> int:
        """The device memory the cache holds (a reserved cache's mapping rounds each region up to a granule)."""
        if self.arena is not None:
            return self.arena.mapped_bytes
        return self.num_blocks * bytes_per_block(arch, self.block_size, dtype)

    @classmethod
    def allocate(cls, arch: ArchConfig, num_blocks: int, block_size: int, dtype, device) -> "KVCache":
        shape = (num_blocks, block_size, arch.num_key_value_heads, arch.head_dim)
        layers = [
            (torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device))
            for _ in range(arch.num_hidden_layers)
        ]
        return cls(layers, num_blocks, block_size)

    @classmethod
    def reserve(cls, arch: ArchConfig, max_blocks: int, block_size: int, dtype, device) -> "KVCache":
        """A cache whose addresses are reserved for max_blocks blocks but backed for a probe's few (what the
        warm-up and the recordings' dummy batches address); grow() backs the rest (runner/kv_arena.py)."""
        from graphbench.runner.kv_arena import KVArena, probe_blocks

        shape = (max_blocks, block_size, arch.num_key_value_heads, arch.head_dim)
        region_block_bytes = bytes_per_block(arch, block_size, dtype) // (2 * arch.num_hidden_layers)  # one layer's K
        index = device.index if device.index is not None else torch.cuda.current_device()
        arena = KVArena.reserve(arch.num_hidden_layers, region_block_bytes, max_blocks, index)
        try:
            num_blocks = min(max_blocks, probe_blocks(region_block_bytes, arena.granularity))
            arena.back(num_blocks)
            views = [torch.as_tensor(arena.span(i), device=device)[:max_blocks * region_block_bytes]
                     .view(dtype).view(shape) for i in range(arena.num_regions)]
        except BaseException:
            arena.release()
            raise
        for view in views:
            view[:num_blocks].zero_()  # (fresh physical memory holds anything; masked reads must see numbers)
        return cls(list(zip(views[0::2], views[1::2])), num_blocks, block_size, arena)

    def grow(self, num_blocks: int) -> None:
        """Back and zero blocks up to num_blocks (a reserved cache only)."""
        assert self.arena is not None, "only a reserved cache grows"
        old = self.num_blocks
        self.arena.back(num_blocks)
        for k, v in self.layers:
            k[old:num_blocks].zero_()
            v[old:num_blocks].zero_()
        self.num_blocks = max(old, num_blocks)

    def release(self) -> None:
        """Free a reserved cache's memory now (its tensors must no longer be read); others free with their tensors."""
        self.layers = []
        if self.arena is not None:
            torch.cuda.synchronize(self.arena.device_index)
            self.arena.release()


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
    if free_memory is None:
        enough = config.scheduler.max_num_seqs * -(-max_model_len // block_size)
        return max(1, min(CPU_KV_CACHE_BYTES // per_block, enough))
    budget = kv_budget_bytes(arch, config, dtype, total_memory or 0, free_memory)
    if budget < per_block:
        raise GraphbenchError(_shortfall(config, total_memory or 0, free_memory, weights_bytes, budget, dtype, arch))
    return budget // per_block


def kv_budget_bytes(arch: ArchConfig, config, dtype, total_memory: int, free_memory: int, held: int = 0) -> int:
    """The bytes the KV cache may take: utilisation x total memory, minus what is in use (less `held`, memory
    in use that already is KV cache), minus one step's activations."""
    sched = config.scheduler
    reserve = activation_bytes(arch, sched.max_num_batched_tokens, sched.max_num_seqs, dtype)
    return int(total_memory * config.cache.gpu_memory_utilization) - (total_memory - free_memory - held) - reserve


def _shortfall(config, total: int, free: int, weights: int, budget: int, dtype, arch: ArchConfig) -> str:
    """Where the GPU's memory went, when none is left for the KV cache."""
    gib = 2**30
    utilization, in_use = config.cache.gpu_memory_utilization, total - free
    reserve = activation_bytes(arch, config.scheduler.max_num_batched_tokens, config.scheduler.max_num_seqs, dtype)
    others = in_use - weights
    held = f"this engine's weights {weights / gib:.2f} GiB"
    if weights and others > 1 * gib:  # (the CUDA context and torch's own buffers take a few hundred MiB)
        held += (f"; {others / gib:.2f} GiB held by something else: another engine in this process "
                 "(close it and free its memory first) or another process on the GPU")
    return (f"no memory left for the KV cache: gpu_memory_utilization {utilization:.2f} x {total / gib:.2f} GiB "
            f"minus {in_use / gib:.2f} GiB in use ({held}) minus {reserve / gib:.2f} GiB for one step's "
            f"activations leaves {budget / gib:.2f} GiB. Raise --gpu-memory-utilization, lower "
            "--max-num-batched-tokens or use a smaller model")
