"""A kernel search apart from any start: the projection kernels of a config's model timed on this GPU and
stored under a name, which a start with config.model.kernel_search = that name then loads as shared choices.

A sweep runs one before each round after its first (bench/round_searches.py), so that every round's
processes run the choices of a search of their own, as a fresh machine would: cold searches of one commit
choose differently (3-7 of qwen2.5-0.5b's 22 shapes in three searches) and step 1-2% apart at batch 1 on an
H100 (benchmarks/RESULTS.md, 2026-12-07), which rounds sharing one search would leave out of the noise a
verdict is judged against. No start is measured here, so a round's warm starts stay warm.

The model is built with one layer and seeded random weights: every layer has layer 0's projection shapes,
and a kernel's time does not depend on the weights' values. The GPU's other state differs from a start's
(no KV cache, no recordings), as it does for the search at a cold start, which also runs before them.
"""

from __future__ import annotations

import dataclasses
import types

from graphbench.config import CompileMode, EngineConfig, load_arch


def search_apart_for(config: EngineConfig, name: str, done: set[str]) -> dict | None:
    """Time the projection kernels config's engine would time at a cold start and store them under name,
    unless done holds its model shapes' signature (searched in this process already; added here).
    -> {seconds, choices}, or None where nothing was timed (no CUDA, model.kernels = torch, -O0, done)."""
    from graphbench.runner.engine_startup import resolve_engine_config
    from graphbench.runner.kernel_timing import search_apart, store_key
    from graphbench.runner.loader import build_model, fill_dummy_weights
    from graphbench.runner.parallel import Shard, local_arch

    engine = types.SimpleNamespace()  # what resolve_engine_config sets: device, dtype, device_info, config
    resolve_engine_config(engine, config)
    resolved = engine.config
    arch = load_arch(resolved.model.model)  # (a model the round's starts cannot build fails its search too)
    if (engine.device.type != "cuda" or resolved.model.kernels != "graphbench"
            or resolved.compilation.mode != CompileMode.COMPILE):
        return None
    shard = Shard(0, resolved.parallel.tensor_parallel_size)  # rank 0's shapes: every rank's are alike
    one_layer = dataclasses.replace(local_arch(arch, shard), num_hidden_layers=1)
    max_positions = resolved.scheduler.max_model_len or arch.max_position_embeddings
    model = build_model(one_layer, max_positions, engine.dtype, engine.device, shard, resolved.model.kernels)
    max_rows = resolved.scheduler.max_num_batched_tokens
    key = store_key(model, max_rows)
    if key in done:
        return None
    done.add(key)
    fill_dummy_weights(model, resolved.model.seed, dataclasses.replace(arch, num_hidden_layers=1))
    return search_apart(model, engine.device_info.name, max_rows, name)
