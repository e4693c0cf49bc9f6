"""Real-world checkpoint folders: config.json read with transformers' meaning (defaults, model_type, the
sliding window, biases, rope), unsupported features refused naming the field, and checkpoint weights
that are missing, extra or misshapen refused instead of loaded as a different model."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from graphbench.config.arch import auto_dtype, load_arch
from graphbench.errors import GraphbenchError
from graphbench.runner.loader import build_model, load_checkpoint
from graphbench.runner.parallel import Shard, local_arch
from tests.hf_checkpoints import load_hf, save_tiny_checkpoint
from tests.test_engine_parity import make_engine

# Abridged from the hub's config.json files (the fields graphbench reads, as the hub spells them)
LLAMA32_1B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False, "head_dim": 64,
              "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 8192, "max_position_embeddings": 131072,
              "mlp_bias": False, "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
              "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": True, "vocab_size": 128256,
              "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                               "original_max_position_embeddings": 8192, "rope_type": "llama3"},
              "torch_dtype": "bfloat16"}
LLAMA2_7B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "hidden_size": 4096,
             "intermediate_size": 11008, "max_position_embeddings": 4096, "num_attention_heads": 32,
             "num_hidden_layers": 32, "num_key_value_heads": 32, "rms_norm_eps": 1e-05, "rope_scaling": None,
             "tie_word_embeddings": False, "vocab_size": 32000}
MISTRAL_7B_V01 = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_act": "silu",
                  "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768,
                  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
                  "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": False, "vocab_size": 32000}
MISTRAL_7B_V03 = dict(MISTRAL_7B_V01, rope_theta=1000000.0, sliding_window=None, vocab_size=32768)
QWEN25_05B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu", "hidden_size": 896,
              "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21,
              "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
              "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": True,
              "use_sliding_window": False, "vocab_size": 151936}
SMOLLM2_360M = dict(LLAMA2_7B, hidden_size=960, intermediate_size=2560, num_attention_heads=15, num_key_value_heads=5,
                    head_dim=64, rope_theta=100000, tie_word_embeddings=True, max_position_embeddings=8192)


def folder_with(tmp_path, config) -> str:
    (tmp_path / "config.json").write_text(json.dumps(config))
    return str(tmp_path)


def without(config, *keys):
    return {k: v for k, v in config.items() if k not in keys}


# the YaRN settings Qwen2.5's model cards give for contexts past 32768, and a config without its own context
QWEN25_YARN = {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}


@pytest.mark.parametrize("config", [
    dict(QWEN25_05B, rope_scaling=QWEN25_YARN),
    dict(QWEN25_05B, max_position_embeddings=131072, rope_scaling=dict(QWEN25_YARN, factor=None)),
    dict(LLAMA2_7B, rope_scaling={"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 4096,
                                  "mscale": 1.0, "mscale_all_dim": 0.8, "beta_fast": 24, "truncate": False}),
    dict(LLAMA2_7B, rope_scaling={"rope_type": "yarn", "factor": 2.0, "attention_factor": 1.25}),
    dict(LLAMA2_7B, rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
    LLAMA32_1B,
])
def test_scaled_rope_frequencies_are_transformers_own(tmp_path, config):
    """The table's frequencies and the factor on cos and sin, against transformers' rope functions at the real
    configs' head sizes and contexts (the engine against the whole model: tests/test_engine_parity.py)."""
    import transformers
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from graphbench.runner.rope import inverse_frequencies

    folder = folder_with(tmp_path, config)
    arch = load_arch(folder)
    hf = transformers.AutoConfig.from_pretrained(folder)
    expected, factor = ROPE_INIT_FUNCTIONS[hf.rope_parameters["rope_type"]](hf, "cpu")
    ours, our_factor = inverse_frequencies(arch.head_dim, arch.rope_theta, arch.rope_scaling,
                                           arch.max_position_embeddings)
    assert torch.allclose(ours, expected, rtol=1e-6, atol=0) and our_factor == pytest.approx(factor, rel=1e-12)


def test_dynamic_rope_past_max_position_embeddings_is_refused(tmp_path):
    from graphbench.runner.rope import RotaryEmbedding

    arch = load_arch(folder_with(tmp_path, dict(LLAMA2_7B, rope_scaling={"rope_type": "dynamic", "factor": 2.0})))
    assert RotaryEmbedding(arch.head_dim, 4096, arch.rope_theta, arch.rope_scaling).cos_sin.shape[0] == 4096
    with pytest.raises(GraphbenchError, match="'dynamic' past max_position_embeddings 4096 .* --max-model-len"):
        RotaryEmbedding(arch.head_dim, 4097, arch.rope_theta, arch.rope_scaling)


@pytest.mark.parametrize("config, expected", [
    # (architecture, head_dim, kv heads, qkv bias, rms_norm_eps, max_position_embeddings, sliding_window, rope type)
    (LLAMA32_1B, ("LlamaForCausalLM", 64, 8, False, 1e-5, 131072, None, "llama3")),
    (SMOLLM2_360M, ("LlamaForCausalLM", 64, 5, False, 1e-5, 8192, None, None)),
    (QWEN25_05B, ("Qwen2ForCausalLM", 64, 2, True, 1e-6, 32768, None, None)),
    (MISTRAL_7B_V03, ("MistralForCausalLM", 128, 8, False, 1e-5, 32768, None, None)),
    # Mistral slides on every layer: full attention is the same model up to the window, and no further
    (MISTRAL_7B_V01, ("MistralForCausalLM", 128, 8, False, 1e-5, 4096, 4096, None)),
    # Qwen2 slides only with use_sliding_window, from layer max_window_layers on
    (dict(QWEN25_05B, use_sliding_window=True, sliding_window=4096),
     ("Qwen2ForCausalLM", 64, 2, True, 1e-6, 4096, 4096, None)),
    (dict(QWEN25_05B, use_sliding_window=True, sliding_window=4096, max_window_layers=24),
     ("Qwen2ForCausalLM", 64, 2, True, 1e-6, 32768, None, None)),
    (dict(QWEN25_05B, use_sliding_window=True, sliding_window=4096, layer_types=["full_attention"] * 24),
     ("Qwen2ForCausalLM", 64, 2, True, 1e-6, 32768, None, None)),
    # transformers gives Qwen2 q/k/v biases and Mistral none whatever attention_bias says
    (dict(QWEN25_05B, attention_bias=False), ("Qwen2ForCausalLM", 64, 2, True, 1e-6, 32768, None, None)),
    (dict(MISTRAL_7B_V03, attention_bias=True), ("MistralForCausalLM", 128, 8, False, 1e-5, 32768, None, None)),
    # transformers' defaults for absent fields: eps 1e-6, Mistral's 8 KV heads
    (without(LLAMA2_7B, "rms_norm_eps"), ("LlamaForCausalLM", 128, 32, False, 1e-6, 4096, None, None)),
    (without(MISTRAL_7B_V03, "num_key_value_heads"), ("MistralForCausalLM", 128, 8, False, 1e-5, 32768, None, None)),
    # Qwen2Config's 32 KV heads; the classes' max_position_embeddings; MistralConfig's window of 4096 when the key is
    # absent (an explicit null, as v0.3 writes it, is none)
    (dict(without(QWEN25_05B, "num_key_value_heads"), num_attention_heads=64, hidden_size=4096),
     ("Qwen2ForCausalLM", 64, 32, True, 1e-6, 32768, None, None)),
    (without(LLAMA2_7B, "max_position_embeddings"), ("LlamaForCausalLM", 128, 32, False, 1e-5, 2048, None, None)),
    (without(QWEN25_05B, "max_position_embeddings"), ("Qwen2ForCausalLM", 64, 2, True, 1e-6, 32768, None, None)),
    (without(MISTRAL_7B_V01, "sliding_window"), ("MistralForCausalLM", 128, 8, False, 1e-5, 4096, 4096, None)),
    (without(dict(QWEN25_05B, use_sliding_window=True), "sliding_window"),
     ("Qwen2ForCausalLM", 64, 2, True, 1e-6, 4096, 4096, None)),
    # model_type decides the class, as in transformers; early LLaMA exports spell the class LLaMA
    (without(LLAMA2_7B, "architectures"), ("LlamaForCausalLM", 128, 32, False, 1e-5, 4096, None, None)),
    (dict(LLAMA2_7B, architectures=["LLaMAForCausalLM"]), ("LlamaForCausalLM", 128, 32, False, 1e-5, 4096, None, None)),
    (dict(MISTRAL_7B_V01, architectures=["LlamaForCausalLM"]),
     ("MistralForCausalLM", 128, 8, False, 1e-5, 4096, 4096, None)),
    # rope_scaling wins over rope_parameters (transformers 5 reads it first); a null rope_type is an absent one
    (dict(LLAMA32_1B, rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
     ("LlamaForCausalLM", 64, 8, False, 1e-5, 131072, None, "llama3")),
    (dict(LLAMA2_7B, rope_scaling={"rope_type": None, "type": "linear", "factor": 4.0}),
     ("LlamaForCausalLM", 128, 32, False, 1e-5, 4096, None, "linear")),
    (dict(LLAMA2_7B, hidden_act="swish"), ("LlamaForCausalLM", 128, 32, False, 1e-5, 4096, None, None)),
])
def test_real_configs_read_as_transformers_reads_them(tmp_path, config, expected):
    a = load_arch(folder_with(tmp_path, config))
    rope_type = a.rope_scaling["rope_type"] if a.rope_scaling else None
    assert (a.architecture, a.head_dim, a.num_key_value_heads, a.attention_bias, a.rms_norm_eps,
            a.max_position_embeddings, a.sliding_window, rope_type) == expected


def test_llama3_rope_without_original_max_position_embeddings_uses_max_position_embeddings(tmp_path):
    rope = without(LLAMA32_1B["rope_scaling"], "original_max_position_embeddings")
    arch = load_arch(folder_with(tmp_path, dict(LLAMA32_1B, rope_scaling=rope)))
    assert arch.rope_scaling["original_max_position_embeddings"] == 131072


@pytest.mark.parametrize("config, said", [
    (dict(LLAMA2_7B, attention_bias=True), "attention_bias true is not supported"),
    (dict(LLAMA2_7B, mlp_bias=True), "mlp_bias true is not supported"),
    (dict(LLAMA2_7B, partial_rotary_factor=0.5), "partial_rotary_factor 0.5 is not supported"),
    (dict(LLAMA2_7B, rope_scaling={"rope_type": "default", "partial_rotary_factor": 0.5}),
     "partial_rotary_factor 0.5 is not supported"),
    (dict(LLAMA32_1B, quantization_config={"quant_method": "fp8", "activation_scheme": "dynamic"}),
     "quantization_config ('fp8') is not supported"),
    (dict(LLAMA2_7B, hidden_size=4100), "hidden_size 4100 is not a multiple of num_attention_heads 32"),
    (dict(QWEN25_05B, use_sliding_window="false"), "use_sliding_window must be true or false"),
    (dict(QWEN25_05B, use_sliding_window=True, max_window_layers=-1), "max_window_layers must be an integer >= 0"),
    (dict(LLAMA2_7B, rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e4}}),
     "rope_parameters per layer type"),
    (dict(LLAMA2_7B, model_type=["llama"]), "model_type must be a name"),
    (dict(LLAMA2_7B, model_type="qwen3"), "unsupported model_type 'qwen3'"),  # q/k norms under a Llama label
    (dict(QWEN25_05B, architectures=["Qwen3ForCausalLM"], model_type="qwen3", head_dim=128),
     "unsupported architecture 'Qwen3ForCausalLM'"),
    ({"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4", "text_config": {}},
     "unsupported architecture 'Llama4ForConditionalGeneration'"),
    (dict(MISTRAL_7B_V03, architectures=["MixtralForCausalLM"], model_type="mixtral", num_local_experts=8),
     "unsupported architecture 'MixtralForCausalLM'"),
    (dict(QWEN25_05B, rope_scaling={"factor": 32.0, "original_max_position_embeddings": 4096, "type": "longrope",
                                     "long_factor": [1.0] * 32, "short_factor": [1.0] * 32}),
     "rope type 'longrope' is not supported"),
    ({"model_type": None, "hidden_size": 64}, "lacks both architectures and model_type"),
])
def test_unsupported_features_are_refused_naming_the_field(tmp_path, config, said):
    with pytest.raises(GraphbenchError, match=said.replace("(", r"\(").replace(")", r"\)")) as error:
        load_arch(folder_with(tmp_path, config))
    assert "\n" not in str(error.value) and str(tmp_path) in str(error.value)


def test_a_null_dtype_leaves_torch_dtype_to_say_the_dtype(tmp_path):
    assert auto_dtype(folder_with(tmp_path, {"dtype": None, "torch_dtype": "float16"}), "cuda") == "float16"


def _parity(folder, prompts, **engine):
    ours = make_engine(folder, **engine).prompt_logits(prompts)
    hf = load_hf(folder)
    with torch.no_grad():
        return max((o - hf(torch.tensor([p])).logits[0]).abs().max().item() for p, o in zip(prompts, ours))


def _save_mistral(folder, **overrides):
    import transformers

    config = dict(vocab_size=256, hidden_size=64, intermediate_size=112, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64, head_dim=32)
    torch.manual_seed(2)
    model = transformers.MistralForCausalLM(transformers.MistralConfig(**dict(config, **overrides)))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    model.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("kind", ["mistral", "qwen2"])
def test_a_sliding_window_model_runs_exactly_up_to_its_window_and_refuses_more(tmp_path, kind):
    if kind == "mistral":
        folder = _save_mistral(tmp_path, sliding_window=8)
    else:
        folder = save_tiny_checkpoint(tmp_path, "qwen2", seed=2, use_sliding_window=True, sliding_window=8,
                                      max_window_layers=1, max_position_embeddings=64)
    assert _parity(folder, [[5, 17, 99, 3], [1, 2, 3, 4, 5, 6, 7]]) < 1e-4
    with pytest.raises(GraphbenchError, match="max_model_len 9 .* is above the sliding_window 8"):
        make_engine(folder, **{"scheduler.max_model_len": 9})


def test_transformers_defaults_and_fixed_biases_give_transformers_logits(tmp_path):
    # rms_norm_eps left out (transformers: 1e-6), and attention_bias false on Qwen2 (transformers keeps the biases)
    llama = save_tiny_checkpoint(tmp_path / "llama", "llama", seed=4)
    qwen = save_tiny_checkpoint(tmp_path / "qwen", "qwen2", seed=4, tie_word_embeddings=False)
    for folder, change in ((llama, lambda c: c.pop("rms_norm_eps")), (qwen, lambda c: c.update(attention_bias=False))):
        config = json.loads((folder / "config.json").read_text())
        change(config)
        (folder / "config.json").write_text(json.dumps(config))
        assert _parity(folder, [list(range(1, 30))]) < 1e-4


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt")
    return {"llama": save_tiny_checkpoint(root / "llama", "llama", seed=5),
            "qwen2": save_tiny_checkpoint(root / "qwen2", "qwen2", seed=5)}


def _variant(checkpoints, tmp_path, kind, change):
    folder = tmp_path / kind
    shutil.copytree(checkpoints[kind], folder)
    tensors = load_file(folder / "model.safetensors")
    change(tensors, folder)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def _load(folder, tp: int = 1):
    arch, shard = load_arch(str(folder)), Shard(0, tp)
    model = build_model(local_arch(arch, shard), 64, torch.float32, torch.device("cpu"), shard)
    load_checkpoint(model, folder, arch)
    return model


@pytest.mark.parametrize("kind, name", [
    ("llama", "model.layers.0.self_attn.v_proj.weight"),  # was: qkv_proj's v rows left at their random init
    ("llama", "model.layers.1.mlp.up_proj.weight"),
    ("qwen2", "model.layers.0.self_attn.k_proj.bias"),
])
def test_a_missing_part_of_a_fused_projection_is_named(checkpoints, tmp_path, kind, name):
    folder = _variant(checkpoints, tmp_path, kind, lambda tensors, _: tensors.pop(name))
    with pytest.raises(GraphbenchError, match=f"lacks 1 weight\\(s\\), e.g. {name.removeprefix('model.')}"):
        _load(folder)


def test_a_tied_models_lm_head_must_be_the_embedding(checkpoints, tmp_path):
    def same(tensors, _):
        tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].clone()

    _load(_variant(checkpoints, tmp_path / "same", "qwen2", same))  # an exporter's copy of the tied matrix

    def other(tensors, _):
        tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"] + 1.0

    with pytest.raises(GraphbenchError, match="lm_head.weight unlike embed_tokens.weight .* tie_word_embeddings"):
        _load(_variant(checkpoints, tmp_path / "other", "qwen2", other))


def test_other_safetensors_beside_model_safetensors_are_not_loaded(checkpoints, tmp_path):
    # Mistral's repos ship consolidated.safetensors (its own names), PEFT folders adapter_model.safetensors
    def extra(_, folder):
        save_file({"layers.0.attention.wq.weight": torch.zeros(64, 64)}, folder / "consolidated.safetensors")

    _load(_variant(checkpoints, tmp_path, "llama", extra))


@pytest.mark.parametrize("tp, name, tensor, said", [
    (1, "model.norm.weight", torch.ones(64, dtype=torch.int32), "has dtype torch.int32, not a floating-point"),
    # under tensor parallelism each rank took its rows of a misshapen tensor (or raised IndexError)
    (2, "model.embed_tokens.weight", torch.zeros(300, 64), r"has shape \(300, 64\), expected \(256, 64\)"),
    (2, "model.layers.0.self_attn.k_proj.weight", torch.zeros(48, 64), r"has shape \(48, 64\), expected \(32, 64\)"),
    (2, "model.layers.0.self_attn.o_proj.weight", torch.zeros(64), r"has shape \(64,\), expected \(64, 64\)"),
])
def test_a_misshapen_or_non_float_weight_is_refused(checkpoints, tmp_path, tp, name, tensor, said):
    folder = _variant(checkpoints, tmp_path, "llama", lambda tensors, _: tensors.update({name: tensor}))
    with pytest.raises(GraphbenchError, match=said) as error:
        _load(folder, tp)
    assert str(error.value).endswith(f"(in {folder / 'model.safetensors'})")  # the file, as a shard would be named


def _resaved(folder, first, second):
    """save_pretrained of `first`, then of `second` (either may be {"max_shard_size": ...}) into one folder:
    transformers leaves the other form's files behind."""
    for kwargs, seed in ((first, 6), (second, 7)):
        load_hf(save_tiny_checkpoint(folder.parent / f"src{seed}", "llama", seed=seed)).save_pretrained(folder, **kwargs)
    return folder


def test_a_stale_index_beside_model_safetensors_loads_model_safetensors_as_transformers_does(tmp_path):
    # sharded, then saved whole: the index is left, its shards deleted (was: refused, "missing shard(s)")
    folder = _resaved(tmp_path / "ckpt", {"max_shard_size": "100KB"}, {})
    assert (folder / "model.safetensors.index.json").is_file() and not list(folder.glob("model-*.safetensors"))
    assert _parity(folder, [list(range(1, 30))]) < 1e-4


def test_model_safetensors_and_an_indexs_shards_together_are_refused(tmp_path):
    # saved whole, then sharded: model.safetensors is left beside the shards; transformers loads the stale
    # model.safetensors, vLLM the shards (was: the shards, silently another model than transformers')
    folder = _resaved(tmp_path / "ckpt", {}, {"max_shard_size": "100KB"})
    with pytest.raises(GraphbenchError, match="holds both model.safetensors and the shards of "
                                              "model.safetensors.index.json"):
        make_engine(folder)


def test_a_hub_cache_snapshot_whose_shards_are_links_loads(tmp_path):
    # the hub cache links snapshots/REV/FILE to ../../blobs/HASH (was: refused, shards "outside the checkpoint folder")
    import os

    sharded = tmp_path / "sharded"
    load_hf(save_tiny_checkpoint(tmp_path / "src", "qwen2", seed=8)).save_pretrained(sharded, max_shard_size="100KB")
    snapshot, blobs = tmp_path / "hub" / "snapshots" / "rev", tmp_path / "hub" / "blobs"
    snapshot.mkdir(parents=True)
    blobs.mkdir()
    for i, file in enumerate(sorted(sharded.iterdir())):
        file.rename(blobs / f"blob{i}")
        os.symlink(f"../../blobs/blob{i}", snapshot / file.name)
    assert len(list(snapshot.glob("model-*.safetensors"))) > 1
    assert _parity(snapshot, [list(range(1, 30)), [7, 3]]) < 1e-4
