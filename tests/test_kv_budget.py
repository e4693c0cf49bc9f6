"""runner/kv_cache.num_kv_blocks on a GPU's numbers (no GPU needed): the budget, and what a shortfall says."""

from __future__ import annotations

import pytest
import torch

from graphbench.config import load_arch, load_engine_config
from graphbench.errors import GraphbenchError
from graphbench.runner.kv_arena import blocks_fitting, probe_blocks, round_up
from graphbench.runner.kv_cache import activation_bytes, bytes_per_block, kv_budget_bytes, num_kv_blocks

GIB = 2**30
ARCH = load_arch("llama-3.2-1b")
CONFIG = load_engine_config(overrides={"model.model": "llama-3.2-1b", "scheduler.max_num_batched_tokens": 8192,
                                       "scheduler.max_num_seqs": 256})
WEIGHTS = 2 * ARCH.num_params()


def blocks(free: int, total: int = 140 * GIB) -> int:
    return num_kv_blocks(ARCH, CONFIG, torch.bfloat16, 16, 4096, total, free, WEIGHTS)


def test_budget_is_utilisation_minus_in_use_minus_one_steps_activations():
    in_use = WEIGHTS + GIB // 2  # the weights and the CUDA context
    reserve = activation_bytes(ARCH, 8192, 256, torch.bfloat16)
    expected = (int(140 * GIB * 0.9) - in_use - reserve) // bytes_per_block(ARCH, 16, torch.bfloat16)
    assert blocks(140 * GIB - in_use) == expected > 0


def test_a_shortfall_names_another_holder_of_the_memory():
    """A second engine in one process (its KV cache still allocated): say so, not just 'raise utilisation'."""
    in_use = WEIGHTS + 125 * GIB
    with pytest.raises(GraphbenchError) as caught:
        blocks(140 * GIB - in_use)
    message = str(caught.value)
    assert message.startswith("no memory left for the KV cache: gpu_memory_utilization 0.90 x 140.00 GiB minus "
                              f"{in_use / GIB:.2f} GiB in use (this engine's weights {WEIGHTS / GIB:.2f} GiB; "
                              "125.00 GiB held by something else: another engine in this process")
    assert message.endswith("Raise --gpu-memory-utilization, lower --max-num-batched-tokens or use a smaller model")


def test_a_shortfall_of_the_model_alone_blames_no_one_else():
    with pytest.raises(GraphbenchError) as caught:
        blocks(total=4 * GIB, free=4 * GIB - WEIGHTS - GIB // 4)
    assert "held by something else" not in str(caught.value)
    assert f"(this engine's weights {WEIGHTS / GIB:.2f} GiB)" in str(caught.value)


def test_after_capture_the_cache_already_backed_counts_as_budget_not_as_use():
    """kv_sizing after_capture: the probe's blocks mapped before capture are KV cache, not memory in use."""
    total, free, held = 140 * GIB, 100 * GIB, 64 << 20
    reserve = activation_bytes(ARCH, 8192, 256, torch.bfloat16)
    assert kv_budget_bytes(ARCH, CONFIG, torch.bfloat16, total, free, held) == \
        int(total * 0.9) - (total - free - held) - reserve
    assert kv_budget_bytes(ARCH, CONFIG, torch.bfloat16, total, free, held) - \
        kv_budget_bytes(ARCH, CONFIG, torch.bfloat16, total, free) == held


def test_blocks_fitting_rounds_each_region_down_to_whole_granules():
    two_mib = 2 << 20
    # 32 regions (16 layers' K and V) of 16 KiB blocks: 1 GiB is 32 MiB a region, 2048 blocks
    assert blocks_fitting(GIB, 32, 16 << 10, two_mib) == 2048
    # a budget one byte short of it loses a whole granule a region (128 blocks), never backs past the budget
    assert blocks_fitting(GIB - 1, 32, 16 << 10, two_mib) == 2048 - 128
    # blocks that straddle granules: 3 MiB blocks, 7 MiB a region -> 6 MiB of whole granules -> 2 blocks
    assert blocks_fitting(2 * (7 << 20), 2, 3 << 20, two_mib) == 2
    assert blocks_fitting(0, 32, 16 << 10, two_mib) == 0


def test_probe_blocks_fill_one_granule_and_are_never_zero():
    assert probe_blocks(16 << 10, 2 << 20) == 128
    assert probe_blocks(3 << 20, 2 << 20) == 1


def test_kv_sizing_takes_one_of_two_orders():
    from graphbench.config.parts import CacheConfig

    assert CacheConfig(kv_sizing="after_capture").kv_sizing == "after_capture"
    with pytest.raises(GraphbenchError, match="kv_sizing"):
        CacheConfig(kv_sizing="after")


def test_round_up():
    assert [round_up(v, 4) for v in (0, 1, 4, 5)] == [0, 4, 4, 8]
