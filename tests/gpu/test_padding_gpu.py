"""Padding measured on the H200 (CUDA graphs recorded, -O2) matches the ladder's prediction.

Issue 5: uniform decode batches, step-weighted (`graphbench ladder`'s figure). The report's Padding table:
a closed loop with drawn output lengths (batch sizes drift as requests finish), token-weighted
(`padding_token_pct` against ladders.padding.token_waste of the repeat's own batch-size histogram).
"""

from __future__ import annotations

import pytest
import torch

from graphbench.bench.driver import run_engine_workload
from graphbench.bench.workloads import LengthDist, Workload
from graphbench.config import load_engine_config
from graphbench.ladders import waste
from graphbench.ladders.padding import token_waste
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


@pytest.mark.parametrize("concurrency", [5, 23])
def test_measured_token_padding_of_drawn_lengths_matches_the_prediction_for_its_histogram(engine, concurrency):
    """Outputs of 16..64 tokens: requests finish apart, the batch shrinks and refills, and new prompts join
    decode steps as mixed batches (those above the top rung, 128 here, run eager and count unpadded)."""
    sizes = list(engine.dispatcher.capture_sizes)
    workload = Workload(kind="closed", concurrency=concurrency, num_requests=4 * concurrency,
                        prompt_len=LengthDist("fixed", 32), output_len=LengthDist("uniform", 16, 64), seed=2)
    rep = run_engine_workload(engine, workload)
    hist = {int(k): v for k, v in rep["batch_size_histogram"].items()}
    predicted = 100 * token_waste(sizes, hist)
    assert abs(rep["padding_token_pct"] - predicted) < 0.5, (rep["padding_token_pct"], predicted, hist)
    assert len(hist) > 3, hist  # the lengths were drawn: more than one decode batch size
