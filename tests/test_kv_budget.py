"""runner/kv_cache.num_kv_blocks on a GPU's numbers (no GPU needed): the budget, and what a shortfall says."""

from __future__ import annotations

import pytest
import torch

from graphbench.config import load_arch, load_engine_config
from graphbench.errors import GraphbenchError
from graphbench.runner.kv_cache import activation_bytes, bytes_per_block, num_kv_blocks

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
