"""Config values past what a machine can hold are refused at the edge, naming the field and its range
(10**12 sequences, a seed of 10**20, ...: allocator errors and overflows before)."""

from __future__ import annotations

import pytest

from graphbench.config import load_engine_config
from graphbench.errors import GraphbenchError


@pytest.mark.parametrize("override, message", [
    ({"scheduler.max_num_seqs": 10**12}, "max_num_seqs must be at most 65536, got 1000000000000"),
    ({"scheduler.max_num_batched_tokens": 10**12}, "max_num_batched_tokens must be at most 1048576"),
    ({"scheduler.max_model_len": 10**20}, "max_model_len must be at most 16777216"),
    ({"model.seed": 10**20}, r"seed must be in 0\.\.2\*\*63-1, got 100000000000000000000"),
    ({"model.seed": -1}, r"seed must be in 0\.\.2\*\*63-1, got -1"),
    ({"cache.num_blocks": 10**12}, "num_blocks must be at most 16777216"),
    ({"cache.block_size": 2**40}, "block_size must be at most 1024"),
    ({"cache.gpu_memory_utilization": float("nan")}, r"gpu_memory_utilization must be in \(0, 1\], got nan"),
    ({"compilation.cudagraph_capture_sizes": [1, 10**12]}, "cudagraph_capture_sizes must be at most 1048576"),
    ({"compilation.cudagraph_capture_sizes": list(range(1, 5000))}, "must hold at most 4096 sizes"),
    ({"compilation.max_cudagraph_capture_size": 10**12}, "max_cudagraph_capture_size must be at most 1048576"),
    ({"speculative.num_speculative_tokens": 10**6}, r"num_speculative_tokens must be in 0\.\.32"),
    ({"parallel.tensor_parallel_size": 10**6}, "tensor_parallel_size must be at most 64"),
])
def test_out_of_range_values_are_refused(override, message):
    with pytest.raises(GraphbenchError, match=message):
        load_engine_config(overrides=override)
