"""Steady-state decode step time for benchmarks/decode.py: graphbench's engine, Hugging Face transformers
and gpt-fast peers, and the device's copy bandwidth (the weight-bandwidth floor).

A decode step is timed on the host around a whole engine step (schedule, inputs, forward,
sampling, the sampled tokens back on the host), so it is what a server would see. Inputs are
seeded random prompts (never zeros).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch

from graphbench.bench.peer_models import random_prompts
from graphbench.config.arch import ArchConfig


def _summary(samples_s: list[float], batch: int) -> dict[str, Any]:
    ms = sorted(s * 1e3 for s in samples_s)
    median = statistics.median(ms)
    return {
        "batch": batch,
        "step_ms": median,
        "step_ms_p10": ms[len(ms) // 10],
        "step_ms_p90": ms[(len(ms) * 9) // 10],
        "tokens_per_s": batch / (median / 1e3),
        "num_samples": len(ms),
    }


def measure_engine_decode(engine, batch: int, prompt_len: int = 128, warmup_steps: int = 8,
                          timed_steps: int = 64, seed: int = 0) -> dict[str, Any]:
    """Median wall time of pure-decode steps of `batch` requests after prefill and warm-up."""
    from graphbench.runner.request import SamplingParams

    prompts = random_prompts(batch, prompt_len, engine.arch.vocab_size, seed)
    params = SamplingParams(max_tokens=warmup_steps + timed_steps + 1)
    requests = [engine.add_request(p, params) for p in prompts]
    while any(not r.output_token_ids for r in requests):  # prefill (possibly chunked)
        engine.step()
    for _ in range(warmup_steps):
        engine.step()
    first = len(engine.records)
    samples = []
    for _ in range(timed_steps):
        started = time.perf_counter()
        engine.step()
        samples.append(time.perf_counter() - started)
    records = engine.records[first:]
    while engine.has_unfinished():
        engine.step()
    result = _summary(samples, batch)
    # the host's part of a step: scheduling and launching it. Where it is about the step, the host is the
    # bound (with asynchronous scheduling the rest of a step is waiting for the previous step's tokens)
    result["launch_ms"] = statistics.median(r.launch_seconds for r in records) * 1e3
    result["runtime_modes"] = sorted({r.runtime_mode for r in records})
    result["uniform"] = all(r.descriptor.uniform and r.descriptor.num_reqs == batch for r in records)
    return result


def measure_hf_decode(model, batch: int, prompt_len: int = 128, short: int = 8, long: int = 72,
                      repeats: int = 3, static_cache: bool = False, seed: int = 0) -> dict[str, Any]:
    """Decode step time of model.generate: (time(long) - time(short)) / (long - short), median of repeats.

    static_cache=True is transformers' static cache, which makes generate compile the forward
    (its auto-compile on CUDA); the first call compiles and is reported as compile_seconds.
    """
    device = next(model.parameters()).device
    ids = torch.tensor(random_prompts(batch, prompt_len, model.config.vocab_size, seed), device=device)
    mask = torch.ones_like(ids)
    extra = {"cache_implementation": "static"} if static_cache else {}

    def run(n: int) -> float:
        torch.cuda.synchronize()
        started = time.perf_counter()
        with torch.inference_mode():
            model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                           pad_token_id=0, **extra)
        torch.cuda.synchronize()
        return time.perf_counter() - started

    first = run(long)  # warm-up (compiles with the static cache)
    steps = []
    for _ in range(repeats):
        steps.append((run(long) - run(short)) / (long - short))
    result = _summary(steps, batch)
    result["first_call_seconds"] = first
    return result


def build_gpt_fast_model(source_dir: str, arch: ArchConfig, device: str, seed: int = 0):
    """gpt-fast's Transformer (its model.py, unmodified, from a checkout at source_dir) with the
    architecture's shapes, seeded random bf16 weights (nn.Linear's default init), tied as the arch says."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(source_dir) / "model.py"
    if not path.is_file():
        raise FileNotFoundError(f"no gpt-fast model.py under {source_dir} (a checkout of pytorch-labs/gpt-fast)")
    spec = importlib.util.spec_from_file_location("gpt_fast_model", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # Dynamo re-imports the module of the code it traces by name
    spec.loader.exec_module(module)
    args = module.ModelArgs(
        block_size=arch.max_position_embeddings, vocab_size=arch.vocab_size, n_layer=arch.num_hidden_layers,
        n_head=arch.num_attention_heads, dim=arch.hidden_size, intermediate_size=arch.intermediate_size,
        n_local_heads=arch.num_key_value_heads, rope_base=arch.rope_theta, norm_eps=arch.rms_norm_eps,
        rope_scaling=dict(arch.rope_scaling) if arch.rope_scaling else None)
    torch.manual_seed(seed)
    with torch.device(device):
        model = module.Transformer(args)
    if arch.tie_word_embeddings:
        model.output.weight = model.tok_embeddings.weight
    return model.to(dtype=torch.bfloat16).eval().requires_grad_(False)


def measure_gpt_fast_decode(model, batch: int, prompt_len: int = 128, warmup_steps: int = 8,
                            timed_steps: int = 64, seed: int = 0, sdpa: str = "math") -> dict[str, Any]:
    """Greedy decode steps as gpt-fast's generate.py runs them: the one-token forward compiled with
    mode="reduce-overhead" (CUDA graphs), under math SDPA as its generate.py forces (sdpa="math") or
    PyTorch's own choice of SDPA backend ("default"); each step host-timed with its token read back, as
    measure_engine_decode times graphbench's."""
    import contextlib

    from torch.nn.attention import SDPBackend, sdpa_kernel

    device = next(model.parameters()).device
    total = prompt_len + warmup_steps + timed_steps + 2
    with torch.device(device):
        model.setup_caches(max_batch_size=batch, max_seq_length=total)
    ids = torch.tensor(random_prompts(batch, prompt_len, model.config.vocab_size, seed), device=device)

    def next_token(x: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        return model(x, input_pos)[:, -1].argmax(-1, keepdim=True)

    decode_one = torch.compile(next_token, mode="reduce-overhead", fullgraph=True)
    started = time.perf_counter()
    backend = sdpa_kernel(SDPBackend.MATH) if sdpa == "math" else contextlib.nullcontext()
    with torch.inference_mode(), backend:
        token = next_token(ids, torch.arange(prompt_len, device=device))  # prefill, eager
        input_pos = torch.tensor([prompt_len], device=device)
        samples = []
        for i in range(warmup_steps + timed_steps):
            step_started = time.perf_counter()
            token = decode_one(token, input_pos).clone()
            input_pos += 1  # on the GPU, as gpt-fast's decode_n_tokens does
            token.tolist()  # the sampled tokens on the host, as a server needs them
            if i >= warmup_steps:
                samples.append(time.perf_counter() - step_started)
            if i == 0:
                first_call = time.perf_counter() - started
    result = _summary(samples, batch)
    result["first_call_seconds"] = first_call
    return result


def copy_bandwidth_gbs(device: str = "cuda", num_bytes: int = 2 << 30, repeats: int = 20) -> float:
    """Device-to-device copy bandwidth (bytes read + written per second), median of CUDA-event timings."""
    src = torch.randn(num_bytes // 4, device=device)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return 2 * num_bytes / statistics.median(times) / 1e9
