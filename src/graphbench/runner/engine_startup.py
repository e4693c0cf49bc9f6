"""The engine's start-up steps apart from the order Engine.__init__ runs them in: the resolved config, tensor
parallelism, the model with its weights and LoRA adapters, the dispatcher, speculative decoding, the compiled forward and the capture. Each takes the engine
being started and sets what it makes on it."""

from __future__ import annotations

import atexit
import logging
import time
from typing import TYPE_CHECKING

import torch

from graphbench import env
from graphbench.config import CompileMode, CUDAGraphMode, EngineConfig
from graphbench.config.arch import checkpoint_folder
from graphbench.errors import GraphbenchError
from graphbench.ladders.phases import resolve_mixed_ladder
from graphbench.runner.compile.cache import cache_root
from graphbench.runner.compile.startup import compile_at_startup
from graphbench.runner.compile.variant_choice import choose_static_variants
from graphbench.runner.cudagraph import pay_first_capture
from graphbench.runner.device import (
    device_info,
    dtype_name,
    free_memory,
    pay_cublas_handle,
    resolve_device,
    resolve_dtype,
)
from graphbench.runner.dispatcher import CudagraphDispatcher, resolve_cudagraph_mode
from graphbench.runner.kernels.triton_key import remember_triton_key
from graphbench.runner.loader import build_model, fill_dummy_weights, load_checkpoint
from graphbench.runner.parallel import Shard, init_tensor_parallel, local_arch
from graphbench.runner.speculative.decoding import SpeculativeDecoder

if TYPE_CHECKING:
    from graphbench.runner.engine import Engine

log = logging.getLogger("graphbench.engine")


def resolve_engine_config(engine: Engine, config: EngineConfig) -> None:
    """The device and dtype, and the config resolved for them (engine.config: what this engine runs)."""
    engine.device = resolve_device(config.model.device)
    engine.dtype = resolve_dtype(config.model.dtype, engine.device, config.model.model)
    engine.device_info = info = device_info(engine.device)
    if engine.device.type == "cuda":  # before the first kernel loads (kernels/triton_key.py says why)
        remember_triton_key(cache_root() / "triton-key")
    engine.config = config.resolve(blackwell=info.is_blackwell_datacenter, device_name=info.name,
                                   device_memory=info.total_memory, device_type=engine.device.type)
    engine.config.model.device, engine.config.model.dtype = engine.device.type, dtype_name(engine.dtype)
    for warning in resolve_mixed_ladder(config.compilation.mixed_capture_sizes,
                                        engine.config.scheduler.max_num_batched_tokens).warnings:
        log.warning("%s", warning)  # (the resolved config keeps the sizes that stayed)
    if engine.device.type == "cpu":
        torch.set_num_threads(engine.config.parallel.cpu_threads)
    if engine.device.type != "cuda" and engine.config.compilation.max_autotune:
        # Inductor's autotuning targets GPU kernels; on the CPU it costs minutes and buys little.
        engine.config.compilation.max_autotune = False
        log.info("max_autotune is off on the CPU")


def start_tensor_parallel(engine: Engine) -> None:
    """Join the tensor-parallel group (starting ranks 1.. as workers when this is the driver)."""
    from graphbench.runner.tp_workers import WorkerGroup

    tp_size = engine.config.parallel.tensor_parallel_size
    local_arch(engine.arch, Shard(0, tp_size))  # an unsplittable model fails here, before any process starts
    engine.workers = None
    if tp_size > 1 and not env.is_set("RANK"):
        engine.workers = WorkerGroup(engine.config.to_dict(), tp_size)
        atexit.register(engine.close)
    try:
        engine.shard = init_tensor_parallel(tp_size, engine.device.type)
    except BaseException:
        if engine.workers is not None:
            engine.workers.close()
        raise
    engine.local_arch = local_arch(engine.arch, engine.shard)
    if tp_size > 1:
        log.info("tensor parallel rank %d of %d", engine.shard.rank, tp_size)


def make_dispatcher(engine: Engine) -> CudagraphDispatcher:
    """The dispatcher of the cudagraph mode that applies (resolve_cudagraph_mode says why a mode was lowered)."""
    comp = engine.config.compilation
    resolution = resolve_cudagraph_mode(
        comp.cudagraph_mode, engine.backend.cudagraph_support,
        compiling=comp.mode == CompileMode.COMPILE, attention_split=comp.splits_at_attention(),
        decode_query_len=engine.config.decode_query_len, device_type=engine.device.type,
        backend_name=engine.backend.name)
    if resolution.reason:
        log.warning("cudagraph mode %s -> %s: %s", resolution.requested.value, resolution.resolved.value,
                    resolution.reason)
    engine.mode_resolution = resolution
    engine.report.cudagraph_mode = resolution.to_dict()
    dispatcher = CudagraphDispatcher(resolution.resolved, comp.cudagraph_capture_sizes,
                                     engine.config.scheduler.max_num_seqs, engine.config.decode_query_len,
                                     has_lora=engine.config.lora.enabled,
                                     specialize_lora=engine.config.lora.cudagraph_specialize_lora,
                                     mixed_sizes=comp.mixed_capture_sizes)
    engine.report.num_graphs = dispatcher.num_graphs()
    return dispatcher


def start_speculative(engine: Engine) -> SpeculativeDecoder | None:
    """Speculative decoding (runner/speculative/): the drafter, and synchronous steps (drafting needs
    the last step's tokens on the host, so nothing can be launched ahead)."""
    spec = engine.config.speculative
    if not spec.enabled:
        return None
    if engine.shard.size > 1:
        raise GraphbenchError("speculative decoding with tensor parallelism is not supported")
    engine.report.extra["speculative"] = {"method": spec.method, "num_speculative_tokens": spec.num_speculative_tokens,
                                          "async_scheduling": "off: drafting needs each step's tokens on the host"}
    return SpeculativeDecoder(spec, engine.arch.vocab_size, engine.config.model.seed)


def load_engine_adapters(engine: Engine) -> dict[str, int]:
    """LoRA adapters into their slots (runner/lora/): adapter name -> slot (1..); {} without adapters."""
    if not engine.config.lora.enabled:
        return {}
    if engine.shard.size > 1:
        raise GraphbenchError("LoRA adapters with tensor parallelism are not supported")
    from graphbench.runner.lora.weights import load_adapters

    slots = load_adapters(engine.model, engine.arch, engine.config.lora, engine.config.scheduler.max_num_batched_tokens,
                          engine.config.model.seed)
    lora = engine.config.lora
    engine.report.extra["lora"] = {"adapters": list(slots), "slots": lora.num_slots, "max_lora_rank": lora.max_lora_rank,
                                   "cudagraph_specialize_lora": lora.cudagraph_specialize_lora}
    return slots


def start_compiled(engine: Engine) -> None:
    """Compile (or load from the on-disk cache) before any request: see compile/startup.py; then
    keep each compile_sizes variant only where it is faster (compile/variant_choice.py)."""
    compile_at_startup(engine)
    choice = choose_static_variants(engine)
    engine.report.static_variants = choice.to_dict()
    for timing in choice.sizes:
        log.info("compile_sizes %d: variants %.3f ms, dynamic %.3f ms a step: %s kept", timing.size,
                 timing.static_ms, timing.dynamic_ms, timing.kept)


def pay_cublas_setup(engine: Engine) -> None:
    """On CUDA, pay cuBLAS's handle and the current stream's workspace (device.pay_cublas_handle) before the
    KV cache takes what is left: a warm start without graphs had paid them at its first prefill, so its
    cache counted on ~100 MiB it would not have, and graphs against none differed by more than graph memory
    (benchmarks/RESULTS.md, 2026-12-07)."""
    if engine.device.type == "cuda":
        embed = engine.model.embed_tokens.weight  # (the model's dtype and hidden size)
        pay_cublas_handle(engine.device, embed.dtype, embed.shape[1])


def pay_graph_setup(engine: Engine) -> None:
    """Pay the recordings' stream's first cuBLAS call (cudagraph.pay_first_capture) before anything of this
    start records a graph or times a kernel (a cold start's kernel-choice timing, -O3's variant choice), and
    count it: every start then reads it alike in its graph memory, where a cold start had read ~100 MiB
    less than a warm one."""
    if engine.device.type == "cuda" and engine.dispatcher.mode != CUDAGraphMode.NONE:
        embed = engine.model.embed_tokens.weight  # (the model's dtype and hidden size)
        engine.report.graph_setup_bytes = pay_first_capture(engine.runner.capture_stream, embed.dtype, embed.shape[1])


def capture_graphs(engine: Engine) -> None:
    """Record the dispatcher's keys (those start-up asks for, with capture on demand) and report what it cost."""
    comp = engine.config.compilation
    engine.runner.record_deferred = comp.deferred_capture == "first_use"
    asked = comp.startup_capture_sizes
    if asked is not None and (unknown := sorted(set(asked) - {d.num_tokens for _, d in engine.dispatcher.capture_list()})):
        log.warning("startup_capture_sizes %s are no captured size (the ladders' rungs): nothing is recorded "
                    "for them", ", ".join(map(str, unknown)))
    report = engine.runner.capture(lambda: free_memory(engine.device), asked, cold=not engine.report.compile_from_cache)
    engine.report.deferred_recordings = report.deferred
    engine.report.capture_seconds = report.seconds
    engine.report.capture_precompiled = report.precompiled
    engine.report.graph_memory_bytes = report.memory_bytes + engine.report.graph_setup_bytes
    engine.report.graph_pool_bytes = report.pool_bytes
    engine.report.capture_log = report.per_key
    engine.report.num_recordings = report.num_graphs
    log.info("Graph capturing finished in %.0f secs, took %.2f GiB", report.seconds, engine.report.graph_memory_bytes / 2**30)


def load_model(engine: Engine) -> None:
    """Build the model, load its weights and adapters; the seconds and bytes in the start-up report."""
    started = time.perf_counter()
    engine.model = build_model(engine.local_arch, engine.max_model_len, engine.dtype, engine.device, engine.shard,
                               engine.config.model.kernels)
    load_weights(engine)
    engine.lora_slots = load_engine_adapters(engine)
    if engine.device.type == "cuda":
        torch.cuda.synchronize()
    engine.report.load_seconds = time.perf_counter() - started
    engine.report.weights_bytes = sum(p.numel() * p.element_size() for p in engine.model.parameters())


def load_weights(engine: Engine) -> None:
    """The checkpoint's weights, or seeded random ones (load_format dummy, or "auto" with a preset)."""
    fmt = engine.config.model.load_format
    folder = checkpoint_folder(engine.config.model.model)
    if fmt == "auto":
        fmt = "safetensors" if folder is not None else "dummy"
    if fmt == "dummy":
        fill_dummy_weights(engine.model, engine.config.model.seed, engine.arch)
    elif folder is None:
        raise GraphbenchError(
            f"--load-format safetensors needs a checkpoint folder; {engine.config.model.model!r} is a preset "
            "(presets have no weights here: use --load-format dummy)")
    else:
        load_checkpoint(engine.model, folder, engine.arch)
