"""Issue 5: padding measured on the H200 (CUDA graphs recorded, -O2) matches `graphbench ladder`'s prediction."""

from __future__ import annotations

import pytest
import torch

from graphbench.bench.driver import run_engine_workload
from graphbench.bench.workloads import LengthDist, Workload
from graphbench.config import load_engine_config
from graphbench.ladders import waste
from graphbench.runner.engine import Engine

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.fixture(scope="module")
def engine():
    return Engine(load_engine_config(overrides={
        "model.model": "llama-3.2-1b", "model.device": "cuda", "optimization_level": 2,
        "scheduler.max_num_seqs": 64, "scheduler.max_num_batched_tokens": 2048, "scheduler.max_model_len": 1024,
        "cache.gpu_memory_utilization": 0.3}))


@pytest.mark.parametrize("concurrency", [3, 11, 45])
def test_measured_padding_of_uniform_decode_matches_the_ladder(engine, concurrency):
    """Equal prompts and outputs: after one prefill step every step is a uniform decode batch of C."""
    sizes = list(engine.dispatcher.capture_sizes)
    workload = Workload(kind="closed", concurrency=concurrency, num_requests=concurrency,
                        prompt_len=LengthDist("fixed", 32), output_len=LengthDist("fixed", 48), seed=1)
    rep = run_engine_workload(engine, workload)
    hist = {int(k): v for k, v in rep["batch_size_histogram"].items()}
    predicted = 100 * sum(v * (waste(sizes, n) or 0.0) for n, v in hist.items()) / sum(hist.values())
    decode_only = 100 * waste(sizes, concurrency)  # what `graphbench ladder` prints for batch C
    assert abs(rep["padding_waste_pct"] - predicted) < 0.5, (rep["padding_waste_pct"], predicted, hist)
    # against the decode-only figure the one prefill step (of ~48) may move the mean by its share
    steps = sum(hist.values())
    assert abs(rep["padding_waste_pct"] - decode_only) <= 100 / steps + 0.5
    assert rep["runtime_modes"].get("FULL", 0) >= steps - 2  # decode steps replayed FULL recordings
