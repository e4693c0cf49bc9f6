"""The engine's KV cache at start-up: sized before the CUDA graphs are recorded (the default: the graphs
take memory beyond its budget) or after them (cache.kv_sizing = after_capture: the cache takes what the
recordings left, runner/kv_arena.py)."""

from __future__ import annotations

import logging
import time
from typing import Any

import torch

from graphbench.errors import GraphbenchError
from graphbench.runner.device import free_memory
from graphbench.runner.kv_arena import blocks_fitting
from graphbench.runner.kv_cache import KVCache, bytes_per_block, kv_budget_bytes, num_kv_blocks
from graphbench.runner.parallel import min_over_ranks

log = logging.getLogger(__name__)


def sized_after_capture(engine: Any) -> bool:
    cache = engine.config.cache
    return cache.kv_sizing == "after_capture" and engine.device.type == "cuda" and cache.num_blocks is None


def allocate_kv_cache(engine: Any, block_size: int) -> KVCache:
    """The cache at its budget now, or reserved and backed for a probe's blocks (grown by grow_after_capture)."""
    arch, config = engine.local_arch, engine.config
    if config.cache.kv_sizing == "after_capture" and not sized_after_capture(engine):
        log.warning("kv_sizing after_capture has no effect %s", "with an explicit num_blocks"
                 if config.cache.num_blocks is not None else "on the CPU (no CUDA graphs; the cache is not sized from memory)")
    if sized_after_capture(engine):
        max_blocks = engine.device_info.total_memory // bytes_per_block(arch, block_size, engine.dtype)
        return KVCache.reserve(arch, max_blocks, block_size, engine.dtype, engine.device)
    if engine.device.type == "cuda":
        torch.cuda.empty_cache()  # blocks the allocator caches but nothing holds (loading's) are free for the cache
    free = free_memory(engine.device) if engine.device.type == "cuda" else None
    num_blocks = num_kv_blocks(arch, config, engine.dtype, block_size, engine.max_model_len,
                               engine.device_info.total_memory, free, engine.report.weights_bytes)
    # every rank schedules the same batches, so all must hold the same number of blocks
    num_blocks = min_over_ranks(num_blocks) if engine.shard.size > 1 else num_blocks
    return KVCache.allocate(arch, num_blocks, block_size, engine.dtype, engine.device)


def grow_after_capture(engine: Any) -> float:
    """Back the reserved cache with what the weights, the recordings and one step's activations left of
    the utilisation budget; the seconds it took."""
    started = time.perf_counter()
    cache, arch, config = engine.kv_cache, engine.local_arch, engine.config
    arena = cache.arena
    torch.cuda.empty_cache()  # the warm-ups' cached blocks belong to no one: they go back to the budget
    total = engine.device_info.total_memory
    budget = kv_budget_bytes(arch, config, engine.dtype, total, free_memory(engine.device), held=arena.mapped_bytes)
    num_blocks = min(arena.max_blocks, blocks_fitting(budget, arena.num_regions, arena.region_block_bytes,
                                                      arena.granularity))
    num_blocks = min_over_ranks(num_blocks) if engine.shard.size > 1 else num_blocks
    if num_blocks < cache.num_blocks:
        gib = 2**30
        raise GraphbenchError(
            f"no memory left for the KV cache after capture: gpu_memory_utilization "
            f"{config.cache.gpu_memory_utilization:.2f} x {total / gib:.2f} GiB leaves {budget / gib:.2f} GiB after "
            f"the weights, the CUDA graphs ({engine.report.graph_memory_bytes / gib:.2f} GiB) and one step's "
            "activations. Raise --gpu-memory-utilization, capture fewer sizes or use kv_sizing before_capture")
    cache.grow(num_blocks)
    torch.cuda.synchronize(engine.device)
    return time.perf_counter() - started
