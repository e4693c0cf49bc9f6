"""Compilation at engine start-up: trace and compile once (or load the saved compiled forward), then
the compile_sizes variants, all before the first request, under the cache entry's lock.

A damaged or unreadable cache entry is rebuilt once; the engine's start-up report gets the
seconds of each phase (imports, Dynamo, Inductor, compile_sizes, loading).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import torch

from graphbench.errors import GraphbenchError
from graphbench.runner.compile.aot_store import AotStore, standalone_available
from graphbench.runner.compile.splitting import SplittingBackend
from graphbench.runner.compile.cache import (
    COMPLETE_MARKER, cache_lock, cache_root, compile_hash, entry_factors, rank_dir, write_meta)
from graphbench.runner.compile.cache_trust import admit_entry, check_private_root, signing_key, write_manifest
from graphbench.runner.compile.compiler import (
    CompiledForward, start_compile_workers, use_cache_dir)
from graphbench.runner.compile.compile_stack import import_compile_stack

log = logging.getLogger("graphbench.engine")


def compile_at_startup(engine) -> None:
    """Compile, or load from the cache, under the cache directory's lock. An entry is loaded only when its
    signed manifest checks out (cache_trust.py); anything else in the directory is deleted first, so that
    neither graphbench nor Inductor loads what it did not write; a corrupt entry is rebuilt once."""
    check_private_root(cache_root())
    key = signing_key(cache_root())
    hash_ = compile_hash(engine.config.compute_hash(), torch.__version__)
    directory = rank_dir(hash_, engine.shard.rank)
    if engine._fresh_compile:
        shutil.rmtree(directory, ignore_errors=True)  # this rank's entry (other ranks clear theirs)
    engine.report.compile_cache_dir = str(directory)
    log.info("Using cache directory: %s for torch.compile", directory)
    with cache_lock(directory):  # concurrent starts of one config: one compiles, the others then load
        if (directory / COMPLETE_MARKER).is_file():
            problem = admit_entry(directory, key)
            if problem:
                log.warning("compile cache entry %s is damaged or untrusted (%s); rebuilding it", directory, problem)
                shutil.rmtree(directory, ignore_errors=True)
                engine.report.compile_cache_rebuilt = True
        elif directory.exists():  # a start that died while compiling, or files nobody signed
            shutil.rmtree(directory, ignore_errors=True)
        try:
            _compile_into(engine, directory)
        except GraphbenchError:
            raise
        except Exception as exc:
            if not engine.report.compile_from_cache:
                raise
            log.warning("compile cache entry %s looks corrupt (%s: %s); rebuilding it", directory,
                        type(exc).__name__, str(exc))
            shutil.rmtree(directory, ignore_errors=True)
            engine.report.compile_cache_rebuilt = True
            _compile_into(engine, directory)
        write_manifest(directory, key)  # this start's files (a warm start may add compile_sizes pieces)


def sign_cache_entry(engine) -> None:
    """Sign the entry again once start-up is over: kernels first compiled for the capture (Triton's cache
    is in the entry) are then loaded, not compiled, by the next start."""
    directory = Path(engine.report.compile_cache_dir)
    with cache_lock(directory):
        write_manifest(directory, signing_key(cache_root()))


def _compile_into(engine, directory: Path) -> None:
    comp = engine.config.compilation
    engine.report.compile_from_cache = (directory / COMPLETE_MARKER).is_file()
    use_cache_dir(directory)
    imported = 0.0
    if not engine.report.compile_from_cache:  # a cold start compiles: the stack is needed (compile_stack.py)
        imported = import_compile_stack()
        # Inductor's workers, started early for the compile_sizes variants (2-core CI: they only compete).
        # Without variants Inductor has little or nothing to compile (pieces.runs_as_traced); with the
        # workers started anyway (importing torch, writing its bytecode) -O2's cold capture took 18.8 s
        # against 8.7 s before traced pieces (benchmarks/RESULTS.md, 2026-12-01, "a warm start that does not
        # import the compile stack"), its Triton compiles short of CPUs. Not yet measured without them.
        # Inductor starts its pool itself if it does compile.
        if engine.device.type == "cuda" and comp.compile_sizes:
            log.info("Inductor compile_threads: %d", start_compile_workers())
    write_meta(directory, engine.config.summary(), {"config": engine.config.to_dict(), "device_name": engine.device_info.name,
                                                     "hash_factors": entry_factors(engine.config, torch.__version__)})
    backend = SplittingBackend(comp.effective_splitting_ops, list(comp.compile_sizes or []), comp.max_autotune,
                               engine.dispatcher.mode.has_piecewise_graphs(), directory / "graphbench",
                               model=engine.model, aot=AotStore(directory) if standalone_available() else None,
                               static_variants=comp.static_variants)
    engine.compiled = CompiledForward(engine.model.forward, backend)
    engine.report.compile_import_seconds = imported + engine.compiled.times.import_seconds
    engine.runner.forward_fn = engine.compiled
    if engine.device.type == "cuda" and engine.config.model.kernels == "graphbench":
        # before anything is traced or recorded: the projections pick their kernels from these
        from graphbench.runner.kernel_timing import load_or_measure

        # a start that cleared its entry (a measured cold start) times them again: a first start, whole
        engine.report.kernel_choices = load_or_measure(engine.model, directory, engine.device_info.name,
                                                       engine.config.scheduler.max_num_batched_tokens,
                                                       shared=not engine._fresh_compile,
                                                       search=engine.config.model.kernel_search)
    _compile(engine)


def largest_step_tokens(max_num_batched_tokens: int, max_num_seqs: int, max_model_len: int) -> int:
    """The most tokens one step can hold: no step holds more than its requests' contexts, so with few
    sequences and a short max_model_len (1 x 4096 under an 8192-token budget) the dummy batch that
    traces the forward must not either (its requests must fit their block tables)."""
    return min(max_num_batched_tokens, max_num_seqs * max_model_len)


def _compile(engine) -> None:
    """Trace and compile once (largest step), then each compile_sizes variant: all before any request. A
    loaded forward is not traced: the largest step would only run."""
    sched = engine.config.scheduler
    if not engine.compiled.times.loaded:
        num_tokens = largest_step_tokens(sched.max_num_batched_tokens, sched.max_num_seqs, engine.max_model_len)
        engine.runner.dummy_run(num_tokens, min(num_tokens, sched.max_num_seqs))
    for size in engine.config.compilation.compile_sizes or []:
        engine.runner.dummy_run(size, min(size, sched.max_num_seqs))
    engine.compiled.finish_startup()
    (Path(engine.report.compile_cache_dir) / COMPLETE_MARKER).write_text("ok\n")
    times = engine.compiled.times
    engine.report.dynamo_seconds = times.dynamo_seconds
    engine.report.inductor_seconds = times.inductor_seconds
    engine.report.compile_sizes_seconds = times.static_inductor_seconds
    engine.report.compile_import_seconds += engine.compiled.stats.variant_import_seconds
    engine.report.compile_loaded_seconds = times.loaded_seconds
    engine.report.compile_loaded = times.loaded
    if times.loaded:
        log.info("torch.compile: loaded the compiled forward from %s in %.2f s (no Dynamo, no Inductor)",
                 engine.report.compile_cache_dir, times.loaded_seconds)
    else:
        log.info("torch.compile took %.2f s (Dynamo %.2f s, Inductor %.2f s%s)", engine.report.compile_seconds,
                 times.dynamo_seconds, times.inductor_seconds,
                 ", from cache" if engine.report.compile_from_cache else "")

