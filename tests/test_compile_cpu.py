"""torch.compile on the CPU (tiny model): split at attention, no recompiles, compile cache, compile_sizes."""

from __future__ import annotations

import pytest
import torch

from graphbench.config import load_engine_config
from graphbench.runner.engine import Engine
from graphbench.runner.request import SamplingParams

pytestmark = pytest.mark.slow

BASE = {"model.device": "cpu", "model.dtype": "float32", "scheduler.max_num_seqs": 8,
        "scheduler.max_num_batched_tokens": 128, "compilation.max_autotune": False}
PROMPTS = [[1, 2, 3], list(range(10, 40)), [7]]


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("compile_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRAPHBENCH_CACHE_ROOT", str(root))
        yield root


def engine(**overrides) -> Engine:
    return Engine(load_engine_config(overrides=dict(BASE, **overrides)))


@pytest.fixture(scope="module")
def compiled(cache_root):
    return engine(optimization_level=2, **{"compilation.compile_sizes": [8]})


def test_cpu_graph_modes_resolve_to_none_with_reason(compiled):
    assert compiled.report.cudagraph_mode == {
        "requested": "FULL_AND_PIECEWISE", "resolved": "NONE",
        "reason": "CUDA graphs need a CUDA device; running on cpu"}
    assert {r.runtime_mode for r in compiled.records} <= {"NONE"}


def test_graph_is_split_at_every_attention(compiled):
    stats = compiled.compiled.stats
    layers = compiled.arch.num_hidden_layers
    assert stats.num_pieces == 2 * layers + 1  # L attention pieces between L + 1 compiled pieces
    assert stats.num_compiled_pieces == layers + 1
    split_code = (compiled.compiled.backend.artefact_dir / "split_graph.py").read_text()
    assert split_code.count("splitting op") == layers
    # every projection is traced as a graphbench op (it picks the one-row GEMV when it runs)
    pieces = dict(compiled.compiled.backend.split_module.named_children())
    codes = [str(piece.code) for piece in pieces.values()]
    def count(op: str) -> int:
        return sum(c.count(f"torch.ops.graphbench.{op}.default(") for c in codes)

    assert count("linear") == 2 * layers + 1  # o_proj, down, and the first layer's qkv (no residual to add yet)
    assert count("add_rmsnorm_linear") == layers - 1  # the other qkv, with their norm
    assert count("add_rmsnorm_gate_up") == layers  # every gate_up, with its norm and the activation
    assert count("embed_rmsnorm") == count("add_rmsnorm") == 1  # the first norm, the final one (norms.py)
    # (lm_head runs eagerly, outside the graph)


def test_compiled_matches_eager(compiled, cache_root):
    eager = engine(optimization_level=0)
    for a, b in zip(compiled.prompt_logits(PROMPTS), eager.prompt_logits(PROMPTS)):
        assert (a - b).abs().max().item() < 1e-4
    assert compiled.generate(PROMPTS, SamplingParams(max_tokens=10)) == eager.generate(
        PROMPTS, SamplingParams(max_tokens=10))


def test_no_recompilation_for_any_size(compiled):
    """Sizes 1..max_capture_size+50, uniform and mixed: the fail_on_recompile stance never fires."""
    top = compiled.config.compilation.max_cudagraph_capture_size
    assert top == 16
    with torch.compiler.set_stance("fail_on_recompile"):
        for n in range(1, top + 51):
            for num_reqs in {min(n, 8), 1}:
                out = compiled.runner.dummy_run(n, num_reqs)
                assert out.shape == (n, compiled.arch.hidden_size)


def test_compile_sizes_variant_built_at_startup_only(compiled):
    runners = compiled.compiled.backend.runners
    assert all(set(r.static_fns) == {8} for r in runners)
    assert compiled.report.compile_sizes_seconds > 0
    # no CUDA graphs to time the variants with on the CPU: every one is kept, and the report says why
    assert compiled.report.static_variants == {
        "policy": "always", "note": "timing needs CUDA graphs; running on cpu", "seconds": 0.0, "sizes": [],
        "piece_sizes": []}
    assert all(r.static_sizes == {8} for r in runners)
    runner = runners[0]
    runner.static_sizes.add(5)  # a size that was not compiled at start-up
    try:
        with pytest.raises(RuntimeError, match="not compiled at start-up"):
            compiled.runner.dummy_run(5, 1)
    finally:
        runner.static_sizes.discard(5)


def test_warm_start_uses_the_cache_and_factors_change_the_directory(compiled, cache_root):
    assert not compiled.report.compile_from_cache and not compiled.report.compile_loaded
    again = engine(optimization_level=2, **{"compilation.compile_sizes": [8]})
    assert again.report.compile_from_cache
    # the warm start loads the saved split graph and pieces: no Dynamo trace, no Inductor
    assert again.report.compile_loaded
    assert again.report.dynamo_seconds == 0 and again.report.inductor_seconds == 0
    assert again.compiled.stats.num_distinct_pieces == compiled.compiled.stats.num_distinct_pieces
    assert all(set(r.static_fns) == {8} for r in again.compiled.backend.runners)
    for a, b in zip(again.prompt_logits(PROMPTS), compiled.prompt_logits(PROMPTS)):
        assert torch.equal(a, b)
    eight = [[1, 2, 3], [4, 5, 6, 7, 8]]  # 8 tokens: the compile_sizes variant, warm and cold
    for a, b in zip(again.prompt_logits(eight), compiled.prompt_logits(eight)):
        assert torch.equal(a, b)
    assert again.report.compile_cache_dir == compiled.report.compile_cache_dir
    assert again.report.compile_cache_dir.startswith(str(cache_root))
    assert again.report.compile_cache_dir.endswith("rank_0_0")
    other = engine(optimization_level=2, **{"compilation.compile_sizes": [8], "scheduler.max_num_seqs": 4})
    assert other.report.compile_cache_dir != compiled.report.compile_cache_dir
    assert not other.report.compile_from_cache


def test_corrupt_saved_forward_falls_back_to_compiling(compiled, cache_root):
    from pathlib import Path

    aot = Path(compiled.report.compile_cache_dir) / "graphbench_aot"
    (aot / "split_graph.pkl").write_bytes(b"not a pickled graph")
    rebuilt = engine(optimization_level=2, **{"compilation.compile_sizes": [8]})
    assert not rebuilt.report.compile_loaded and rebuilt.report.dynamo_seconds > 0
    assert rebuilt.generate(PROMPTS, SamplingParams(max_tokens=5)) == engine(optimization_level=0).generate(
        PROMPTS, SamplingParams(max_tokens=5))
    # the rebuild wrote a good entry again
    assert engine(optimization_level=2, **{"compilation.compile_sizes": [8]}).report.compile_loaded


def test_pieces_of_graphbench_ops_run_as_traced(compiled):
    """Every piece between attention calls is graphbench's ops only (norms.py): none goes to Inductor,
    and a warm start loads no Inductor artefact for them (their compile_sizes variants are Inductor's)."""
    stats = compiled.compiled.stats
    assert stats.num_traced_pieces == stats.num_compiled_pieces == compiled.arch.num_hidden_layers + 1
    assert stats.num_distinct_pieces == 0 and compiled.report.inductor_seconds == 0
    assert all(r.dynamic_fn is r.graph for r in compiled.compiled.backend.runners)
    split_code = (compiled.compiled.backend.artefact_dir / "split_graph.py").read_text()
    assert split_code.count("runs as traced") == stats.num_traced_pieces


def test_inductor_pieces_are_saved_loaded_and_rebuilt_when_corrupt(cache_root):
    """model.kernels = torch: Inductor compiles every piece (identical layer bodies once), a warm start
    loads them with the compile stack imported, and a corrupt artefact means compiling afresh."""
    from pathlib import Path

    overrides = {"optimization_level": 2, "scheduler.max_num_seqs": 3, "model.kernels": "torch"}
    cold = engine(**overrides)
    stats = cold.compiled.stats
    # first piece (embedding + layer 0 up to attention), middle layer bodies, last piece (+ final norm)
    assert stats.num_traced_pieces == 0 and stats.num_distinct_pieces == min(3, stats.num_compiled_pieces)
    warm = engine(**overrides)
    assert warm.report.compile_loaded and warm.compiled.stats.num_distinct_pieces == stats.num_distinct_pieces
    for a, b in zip(warm.prompt_logits(PROMPTS), cold.prompt_logits(PROMPTS)):
        assert torch.equal(a, b)
    aot = Path(cold.report.compile_cache_dir) / "graphbench_aot"
    pieces = sorted(aot.glob("piece-*.bin"))
    assert len(pieces) == stats.num_distinct_pieces
    pieces[0].write_bytes(b"not a compiled artefact")
    rebuilt = engine(**overrides)
    assert not rebuilt.report.compile_loaded and rebuilt.report.dynamo_seconds > 0
    assert rebuilt.generate(PROMPTS, SamplingParams(max_tokens=5)) == cold.generate(PROMPTS, SamplingParams(max_tokens=5))
    # the kernel set is in the compile hash: the default's entry is another one, of traced pieces (an A/B
    # of the two never makes the default's warm start load the other side's Inductor pieces)
    default = engine(**(overrides | {"model.kernels": "graphbench"}))
    assert default.report.compile_cache_dir != cold.report.compile_cache_dir
    assert default.compiled.stats.num_traced_pieces == default.compiled.stats.num_compiled_pieces


def test_no_split_compiles_one_piece(cache_root):
    e = engine(optimization_level=1, **{"compilation.splitting_ops": []})
    assert (e.compiled.stats.num_pieces, e.compiled.stats.num_compiled_pieces) == (1, 1)
    assert e.generate([[1, 2, 3]], SamplingParams(max_tokens=4)) == engine(optimization_level=0).generate(
        [[1, 2, 3]], SamplingParams(max_tokens=4))


def test_engines_in_one_process_keep_their_own_compiled_code(cache_root, monkeypatch):
    """Compiled entries drop their guards: a second engine must never run the first one's code."""
    import torch._dynamo

    monkeypatch.setattr(torch._dynamo.config, "cache_size_limit", 2)  # the limit must not bite either
    for seed in (1, 2, 3):
        compiled = engine(optimization_level=1, **{"model.seed": seed})
        eager = engine(optimization_level=0, **{"model.seed": seed})
        assert compiled.generate([[1, 2, 3]], SamplingParams(max_tokens=4)) == eager.generate(
            [[1, 2, 3]], SamplingParams(max_tokens=4))


def test_close_frees_a_compiled_engine(compiled, cache_root):
    """Neither torch.compile's caches (Dynamo keeps the cold start's backend), the compiled pieces nor a
    logged warning (its exception's frames) keep a closed engine's weights and KV cache alive. Warm
    and cold: the cold one is the module's engine, so this is the module's last test."""
    import gc
    import weakref

    again = engine(optimization_level=2, **{"compilation.compile_sizes": [8]})
    assert again.report.compile_loaded and not compiled.report.compile_loaded
    assert again.generate(PROMPTS, SamplingParams(max_tokens=3)) == compiled.generate(PROMPTS, SamplingParams(max_tokens=3))
    for closing in (again, compiled):
        weight = weakref.ref(closing.model.layers[0].mlp.down_proj.weight)
        kv = weakref.ref(closing.kv_cache.layers[0][0])
        closing.close()
        gc.collect()
        assert weight() is None and kv() is None


def test_a_one_row_variant_of_a_traced_piece_is_the_piece(cache_root):
    """compile_sizes 1 (in -O3's decode<=8): at one row the pieces keep graphbench's ops, so Inductor is
    not asked for a variant that would emit the same calls."""
    e = engine(optimization_level=2, **{"compilation.compile_sizes": [1], "scheduler.max_num_seqs": 5})
    runners = e.compiled.backend.runners
    assert runners and all(r.static_fns[1] is r.graph for r in runners)
    assert e.report.compile_sizes_seconds == 0 and e.compiled.stats.num_static_variants == 0
    assert e.generate([[4, 5, 6]], SamplingParams(max_tokens=4)) == engine(optimization_level=0).generate(
        [[4, 5, 6]], SamplingParams(max_tokens=4))


def test_variants_are_the_pieces_where_graphbench_kernels_run_every_projection(cache_root, monkeypatch):
    """On the GPU the skinny GEMM has measured blocks for llama's projections at 2..64 rows: a compile_sizes
    variant there would give Inductor nothing of its own (as runs_own_kernel says here, patched)."""
    from graphbench.runner import linear

    monkeypatch.setattr(linear, "runs_own_kernel", lambda rows, weight, op="linear": True)
    e = engine(optimization_level=2, **{"compilation.compile_sizes": [2, 8], "scheduler.max_num_seqs": 6})
    runners = e.compiled.backend.runners
    assert runners and all(r.static_fns[2] is r.static_fns[8] is r.graph for r in runners)
    assert e.compiled.stats.num_static_variants == 0 and e.compiled.backend.variants_are_pieces(8)
    # compilation.static_variants = always: Inductor gets the matmuls regardless (vLLM's -O3)
    vllm_like = engine(optimization_level=2, **{"compilation.compile_sizes": [8], "scheduler.max_num_seqs": 7,
                                                "compilation.static_variants": "always"})
    assert vllm_like.compiled.stats.num_static_variants > 0
    assert not any(r.static_fns[8] is r.graph for r in vllm_like.compiled.backend.runners)


def test_cache_diff_predicts_the_entry_a_compiling_start_wrote(compiled, cache_root, tmp_path):
    """`cache diff`'s config side is computed without torch, the way the engine computes its hash: a config
    written as the compiled engine's overrides names that engine's entry, with the factors it recorded."""
    from pathlib import Path

    from graphbench.runner.compile.cache_diff import Machine, config_factor_set, diff_factors, entry_factor_set

    entry = Path(compiled.report.compile_cache_dir).parent
    config = tmp_path / "compiled.toml"
    config.write_text("optimization_level = 2\n[model]\ndevice = \"cpu\"\ndtype = \"float32\"\n"
                      "[scheduler]\nmax_num_seqs = 8\nmax_num_batched_tokens = 128\n"
                      "[compilation]\nmax_autotune = false\ncompile_sizes = [8]\n")
    predicted = config_factor_set(config, Machine("cpu", "x86_64"))
    recorded = entry_factor_set(entry)
    assert f"compiles to entry {entry.name} here" in predicted.notes[-1]
    assert recorded.factors and diff_factors(predicted, recorded) == []
    other = tmp_path / "other.toml"
    other.write_text(config.read_text().replace("max_num_seqs = 8", "max_num_seqs = 4"))
    assert [d.name for d in diff_factors(config_factor_set(other, Machine("cpu", "x86_64")), recorded)] \
        == ["scheduler.max_num_seqs"]
