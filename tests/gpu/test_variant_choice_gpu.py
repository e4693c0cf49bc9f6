"""-O3's measured choice of compile_sizes variants on the GPU (runner/compile/variant_choice.py)."""

from __future__ import annotations

import pytest

from graphbench.config import load_engine_config
from graphbench.runner.compile.variant_choice import choose
from graphbench.runner.engine import Engine
from graphbench.runner.request import SamplingParams

pytestmark = pytest.mark.gpu

# bf16 as served; no autotuning (minutes): the choice is between whatever variants were compiled
BASE = {"model.model": "llama-3.2-1b", "model.device": "cuda", "model.dtype": "bfloat16", "optimization_level": 3,
        "scheduler.max_num_seqs": 16, "scheduler.max_num_batched_tokens": 1024, "scheduler.max_model_len": 1024,
        "cache.num_blocks": 1024, "compilation.max_autotune": False}


def _engine(**overrides) -> Engine:
    return Engine(load_engine_config(overrides=dict(BASE, **overrides)))


def test_variants_that_are_the_traced_pieces_are_not_timed():
    """At 1..8 rows graphbench's kernels run every projection, so each variant is its traced piece."""
    engine = _engine()
    choice = engine.report.static_variants
    assert choice["policy"] == "measured" and choice["sizes"] == []
    assert choice["piece_sizes"] == engine.config.compilation.compile_sizes == [1, 2, 4, 8]
    sized = [r for r in engine.compiled.backend.runners if r.compile_sizes]
    assert sized and all(r.static_sizes == set() for r in sized)  # the dynamic code runs them: the same calls
    outs = engine.generate([[5, 6, 7]] * 4 + [[9] * 20] * 3, SamplingParams(max_tokens=8))
    assert [len(o) for o in outs] == [8] * 7


def test_each_size_is_timed_both_ways_and_the_faster_kept():
    engine = _engine(**{"model.kernels": "torch"})  # torch ops: Inductor compiles every piece and variant
    choice = engine.report.static_variants
    print("\n", choice, flush=True)
    assert choice["policy"] == "measured" and choice["note"] == "" and choice["piece_sizes"] == []
    assert [t["size"] for t in choice["sizes"]] == engine.config.compilation.compile_sizes == [1, 2, 4, 8]
    for t in choice["sizes"]:
        assert 0.05 < t["static_ms"] < 50 and 0.05 < t["dynamic_ms"] < 50  # one llama-3.2-1b forward
        assert t["kept"] == choose(t["static_ms"], t["dynamic_ms"])
    kept = {t["size"] for t in choice["sizes"] if t["kept"] == "static"}
    sized = [r for r in engine.compiled.backend.runners if r.compile_sizes]
    assert sized and all(r.static_sizes == kept for r in sized)
    assert all(set(r.static_fns) == {1, 2, 4, 8} for r in sized)  # all compiled, whichever run
    assert 0 < choice["seconds"] < 30
    # the engine still decodes at every size after the choice (its recordings were made after it)
    outs = engine.generate([[5, 6, 7]] * 4 + [[9] * 20] * 3, SamplingParams(max_tokens=8))
    assert [len(o) for o in outs] == [8] * 7


def test_always_keeps_every_variant_unmeasured():
    engine = _engine(**{"compilation.static_variants": "always"})
    assert engine.report.static_variants == {
        "policy": "always", "note": "compilation.static_variants = always", "seconds": 0.0, "sizes": [],
        "piece_sizes": []}
    assert all(r.static_sizes == {1, 2, 4, 8} for r in engine.compiled.backend.runners if r.compile_sizes)


def test_the_timing_recordings_leave_no_memory_behind(monkeypatch):
    """Their pool is released before the engine's own capture, whose graph memory it would otherwise
    shrink (the default sweep of benchmarks/RESULTS.md, 2026-11-30, 532ff86: -O3 230 MiB against -O2's 300 for
    the same ladder)."""
    import torch

    from graphbench.runner.compile.variant_choice import choose_static_variants

    engine = _engine(**{"model.kernels": "torch"})  # variants Inductor compiled: the choice times them
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved()
    again = choose_static_variants(engine)  # the same timing, on the started engine
    after = torch.cuda.memory_reserved()
    print(f"\nreserved before {before / 2**20:.1f} MiB, after {after / 2**20:.1f} MiB", flush=True)
    assert again.policy == "measured" and len(again.sizes) == 4
    assert after <= before
