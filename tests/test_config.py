"""Config model: presets fill only unset fields, validation, hashing, TOML loading."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphbench.config import (
    CompilationConfig,
    CompileMode,
    CUDAGraphMode,
    EngineConfig,
    SchedulerConfig,
    list_presets,
    load_arch,
    load_engine_config,
)
from graphbench.config.engine_config import SECTIONS
from graphbench.errors import GraphbenchError

SAMPLES = Path(__file__).resolve().parent.parent / "src" / "graphbench" / "sample_configs"


@pytest.mark.parametrize(
    "level, compile_mode, graph_mode, compile_sizes",
    [
        (0, CompileMode.NONE, CUDAGraphMode.NONE, []),
        (1, CompileMode.COMPILE, CUDAGraphMode.PIECEWISE, []),
        (2, CompileMode.COMPILE, CUDAGraphMode.FULL_AND_PIECEWISE, []),
        (3, CompileMode.COMPILE, CUDAGraphMode.FULL_AND_PIECEWISE, [1, 2, 4, 8]),
    ],
)
def test_presets(level, compile_mode, graph_mode, compile_sizes):
    cfg = EngineConfig(optimization_level=level).resolve()
    assert cfg.compilation.mode == compile_mode
    assert cfg.compilation.cudagraph_mode == graph_mode
    assert cfg.compilation.compile_sizes == compile_sizes
    assert len(cfg.compilation.cudagraph_capture_sizes) == 51
    assert cfg.compilation.max_cudagraph_capture_size == 512


def test_default_level_is_2():
    assert EngineConfig().resolve().optimization_level == 2


def test_preset_fills_only_unset_fields():
    cfg = load_engine_config(overrides={"optimization_level": 3, "compilation.cudagraph_mode": "PIECEWISE",
                                        "compilation.compile_sizes": [16]}).resolve()
    assert cfg.compilation.cudagraph_mode == CUDAGraphMode.PIECEWISE
    assert cfg.compilation.compile_sizes == [16]
    assert cfg.compilation.mode == CompileMode.COMPILE


def test_o0_with_full_graphs_keeps_explicit_mode():
    cfg = load_engine_config(overrides={"optimization_level": 0, "compilation.cudagraph_mode": "FULL"}).resolve()
    assert (cfg.compilation.mode, cfg.compilation.cudagraph_mode) == (CompileMode.NONE, CUDAGraphMode.FULL)


def test_piecewise_without_compilation_is_left_to_the_engine_downgrade():
    # The engine records the downgrade (PIECEWISE -> NONE without a compiler) instead of refusing.
    cfg = load_engine_config(overrides={"optimization_level": 0, "compilation.cudagraph_mode": "PIECEWISE"}).resolve()
    assert (cfg.compilation.mode, cfg.compilation.cudagraph_mode) == (CompileMode.NONE, CUDAGraphMode.PIECEWISE)


def test_o3_compile_sizes_follow_the_ladder():
    """-O3 compiles the ladder's power-of-two decode rungs <= 8 (in units of the decode query length)."""
    cfg = load_engine_config(overrides={"optimization_level": 3, "compilation.cudagraph_capture_sizes": [2, 6, 12]})
    assert cfg.resolve().compilation.compile_sizes == [2]
    for ladder in ("default", "interactivity"):
        cfg = load_engine_config(overrides={"optimization_level": 3, "compilation.performance_mode": ladder})
        assert cfg.resolve().compilation.compile_sizes == [1, 2, 4, 8]
    spec = load_engine_config(overrides={"optimization_level": 3, "speculative.num_speculative_tokens": 2,
                                         "compilation.cudagraph_capture_sizes": [3, 6, 9, 12]})
    assert spec.resolve().compilation.compile_sizes == [3, 6]


def test_ladder_follows_scheduler_and_speculative():
    cfg = load_engine_config(overrides={"scheduler.max_num_seqs": 64, "speculative.num_speculative_tokens": 1}).resolve()
    sizes = cfg.compilation.cudagraph_capture_sizes
    assert cfg.compilation.max_cudagraph_capture_size == 256 and sizes[0] == 2
    assert all(s % 2 == 0 for s in sizes)


H200_BYTES, A100_80_BYTES = 143771 << 20, 81920 << 20


@pytest.mark.parametrize(
    "device_name, device_memory, expected",
    [
        (None, None, 2048),  # the CPU, or no device given
        ("NVIDIA H200", H200_BYTES, 8192),
        ("NVIDIA H100 80GB HBM3", 81559 << 20, 8192),
        ("NVIDIA A100-SXM4-80GB", A100_80_BYTES, 2048),  # vLLM keeps 2048 there (larger measured slower)
        ("NVIDIA L40S", 46068 << 20, 2048),
        ("NVIDIA H200", (70 << 30) - 1, 2048),  # just under the 70 GiB line
    ],
)
def test_token_budget_default_follows_the_device(device_name, device_memory, expected):
    cfg = EngineConfig()
    assert cfg.scheduler.max_num_batched_tokens is None
    resolved = cfg.resolve(device_name=device_name, device_memory=device_memory)
    assert resolved.scheduler.max_num_batched_tokens == expected
    assert cfg.scheduler.max_num_batched_tokens is None  # resolve returns a copy


def test_token_budget_set_by_the_user_is_kept_and_checked():
    cfg = load_engine_config(overrides={"scheduler.max_num_batched_tokens": 512})
    assert cfg.resolve(device_name="NVIDIA H200", device_memory=H200_BYTES).scheduler.max_num_batched_tokens == 512
    # unset with more sequences than the device's default budget: one token per sequence still fits
    many = load_engine_config(overrides={"scheduler.max_num_seqs": 4096}).resolve()
    assert many.scheduler.max_num_batched_tokens == 4096
    # the budget is hashed: an H200's default compiles other code than a CPU's
    assert (EngineConfig().resolve().compute_hash()
            != EngineConfig().resolve(device_name="NVIDIA H200", device_memory=H200_BYTES).compute_hash())


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"scheduler.max_num_seqs": 0}, "max_num_seqs must be positive"),
        ({"scheduler.max_num_seqs": -3}, "max_num_seqs must be positive"),
        ({"scheduler.max_num_batched_tokens": 8, "scheduler.max_num_seqs": 16}, "must be >= max_num_seqs"),
        ({"compilation.cudagraph_mode": "FULLL"}, "did you mean 'FULL'"),
        ({"compilation.performance_mode": "fast"}, "unknown performance mode"),
        ({"compilation.cudagraph_capture_sizes": [1, 0]}, "positive sizes"),
        ({"cache.block_size": 12}, "power of two"),
        ({"cache.gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
        ({"model.dtype": "fp8"}, "unknown dtype"),
        ({"optimization_level": 4}, "optimization level"),
        ({"speculative.num_speculative_tokens": -1}, "num_speculative_tokens"),
    ],
)
def test_validation(overrides, message):
    with pytest.raises(GraphbenchError, match=message):
        load_engine_config(overrides=overrides)


@pytest.mark.parametrize("text, message", [
    ("[scheduler]\nmax_num_seq = 4\n", r"scheduler.max_num_seq.*did you mean 'max_num_seqs'"),
    ("[schedular]\n", "did you mean 'scheduler'"),
    # a section's key written above every section: named with the section it belongs in
    ("max_num_seq = 4\n[model]\n", r"unknown key 'max_num_seq' \(did you mean 'max_num_seqs' in \[scheduler\]\?\)"),
    ("optimisation_level = 2\n", "did you mean 'optimization_level'"),
])
def test_unknown_toml_key_names_the_closest(tmp_path, text, message):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(GraphbenchError, match=message):
        load_engine_config(path)


def test_malformed_toml(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[scheduler\nmax_num_seqs = ")
    with pytest.raises(GraphbenchError, match="malformed TOML"):
        load_engine_config(path)
    with pytest.raises(GraphbenchError, match="not found"):
        load_engine_config(tmp_path / "missing.toml")


def test_sample_engine_configs_load():
    for path in sorted((SAMPLES / "engines").glob("*.toml")):
        cfg = load_engine_config(path).resolve()
        assert cfg.compilation.cudagraph_capture_sizes


def test_cli_overrides_win_over_toml(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("optimization_level = 1\n[scheduler]\nmax_num_seqs = 8\n")
    cfg = load_engine_config(path, {"scheduler.max_num_seqs": 32, "optimization_level": None})
    assert cfg.scheduler.max_num_seqs == 32 and cfg.optimization_level == 1


def test_hash_changes_with_code_factors_only():
    base = EngineConfig().resolve().compute_hash()
    assert EngineConfig().resolve().compute_hash() == base
    assert load_engine_config(overrides={"scheduler.max_num_seqs": 64}).resolve().compute_hash() != base
    assert load_engine_config(overrides={"model.dtype": "bfloat16"}).resolve().compute_hash() != base
    assert load_engine_config(overrides={"optimization_level": 0}).resolve().compute_hash() != base
    assert load_engine_config(overrides={"model.model": "tiny-qwen2"}).resolve().compute_hash() != base
    # fields that do not change generated code stay out of the hash
    assert load_engine_config(overrides={"model.seed": 7}).resolve().compute_hash() == base
    assert load_engine_config(overrides={"cache.gpu_memory_utilization": 0.5}).resolve().compute_hash() == base
    assert load_engine_config(overrides={"model.load_format": "dummy"}).resolve().compute_hash() == base


def test_every_section_has_compute_hash():
    for cls in SECTIONS.values():
        assert isinstance(cls().compute_hash(), str)


def test_slotted():
    with pytest.raises(AttributeError):
        SchedulerConfig().not_a_field = 1  # type: ignore[attr-defined]
    assert hasattr(CompilationConfig, "__slots__")


def test_presets_match_spec_shapes():
    assert {"llama-3.2-1b", "llama-3.1-8b", "qwen2.5-0.5b", "qwen2.5-7b", "smollm2-135m", "tiny-llama"} <= set(list_presets())
    a = load_arch("llama-3.2-1b")
    assert (a.hidden_size, a.intermediate_size, a.num_hidden_layers, a.num_attention_heads,
            a.num_key_value_heads, a.head_dim, a.vocab_size, a.tie_word_embeddings, a.rope_theta) == (
        2048, 8192, 16, 32, 8, 64, 128256, True, 500000.0)
    assert a.rope_scaling["rope_type"] == "llama3"
    q = load_arch("qwen2.5-7b")
    assert (q.hidden_size, q.num_key_value_heads, q.attention_bias, q.vocab_size, q.tie_word_embeddings) == (
        3584, 4, True, 152064, False)
    # 1.24B parameters for Llama 3.2 1B (tied embeddings)
    assert round(a.num_params() / 1e9, 2) == 1.24


def test_unknown_model():
    with pytest.raises(GraphbenchError, match="did you mean 'llama-3.2-1b'"):
        load_arch("llama-3.2-1")
