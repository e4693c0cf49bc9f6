"""A checkpoint's config.json is read strictly: wrong types, out-of-range sizes and features the engine
cannot compute are one-line errors naming the field, never a traceback or a silently different model."""

from __future__ import annotations

import json
import math

import pytest

from graphbench.config.arch import load_arch
from graphbench.errors import GraphbenchError

GOOD = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "max_position_embeddings": 2048, "hidden_act": "silu", "head_dim": None}


def folder(tmp_path, config) -> str:
    (tmp_path / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    return str(tmp_path)


def test_a_good_config_reads(tmp_path):
    arch = load_arch(folder(tmp_path, GOOD))
    assert (arch.hidden_size, arch.head_dim, arch.num_key_value_heads, arch.rope_theta) == (64, 16, 2, 10000.0)


@pytest.mark.parametrize("change, message", [
    ({"num_attention_heads": 0}, "num_attention_heads must be an integer in 1..1024, got 0"),
    ({"hidden_size": 64.7}, "hidden_size must be an integer in 1..65536, got 64.7"),
    ({"num_hidden_layers": 10**12}, "num_hidden_layers must be an integer in 1..1024, got 1000000000000"),
    ({"vocab_size": "512"}, "vocab_size must be an integer in 1..4194304, got '512'"),
    ({"hidden_act": "gelu"}, "hidden_act 'gelu' is not supported (graphbench runs silu)"),
    ({"rms_norm_eps": math.nan}, "rms_norm_eps must be a number > 0 and below 1, got nan"),
    ({"rope_theta": math.inf}, "rope_theta must be a number > 0 and finite, got inf"),
    ({"rope_scaling": {"rope_type": "longrope", "factor": 4.0}}, "rope type 'longrope' is not supported"),
    ({"rope_scaling": "linear"}, "rope_parameters / rope_scaling must be an object"),
    ({"tie_word_embeddings": "yes"}, "tie_word_embeddings must be true or false"),
    ({"architectures": "LlamaForCausalLM"}, "architectures must be a list of names"),
    ({"architectures": ["GPT2LMHeadModel"]}, "unsupported architecture 'GPT2LMHeadModel'"),
])
def test_bad_fields_are_one_line_errors_naming_them(tmp_path, change, message):
    with pytest.raises(GraphbenchError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        load_arch(folder(tmp_path, dict(GOOD, **change)))


@pytest.mark.parametrize("text, message", [
    ("[1, 2]", "must hold a JSON object, got a list"),
    (b"\xff\xfe{}", "is not UTF-8 text"),
    ("{", "is not valid JSON"),
])
def test_a_config_that_is_not_an_object_is_refused(tmp_path, text, message):
    path = tmp_path / "config.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(GraphbenchError, match=message):
        load_arch(str(tmp_path))


@pytest.mark.parametrize("rope, said", [
    ({"rope_type": "linear"}, "needs factor"),
    ({"rope_type": "linear", "factor": 0}, "needs factor"),
    ({"rope_type": "linear", "factor": "2"}, "needs factor"),
    ({"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
     "needs low_freq_factor"),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192}, "must be above low_freq_factor"),
    ({"rope_type": "yarn", "factor": 4.0, "beta_fast": "32"}, "beta_fast must be a number > 0 or null, got '32'"),
    ({"rope_type": "yarn", "factor": 4.0, "attention_factor": -1.0}, "attention_factor must be a number > 0"),
    ({"rope_type": "yarn", "factor": 4.0, "truncate": "yes"}, "truncate must be true or false"),
    ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": -5}, "needs original_max_position"),
    ({"rope_type": "dynamic"}, "'dynamic' needs factor"),
])
def test_impossible_rope_scaling_is_one_line(rope, said):
    from graphbench.config.hf_config import arch_from_dict
    from graphbench.errors import GraphbenchError

    raw = {"architectures": ["LlamaForCausalLM"], "architecture": "LlamaForCausalLM", "hidden_size": 64,
           "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
           "rope_scaling": rope}
    with pytest.raises(GraphbenchError, match=said):
        arch_from_dict(raw, source="t")


def test_an_odd_head_size_is_one_line():
    from graphbench.config.hf_config import arch_from_dict
    from graphbench.errors import GraphbenchError

    raw = {"architecture": "LlamaForCausalLM", "hidden_size": 99, "intermediate_size": 128,
           "num_hidden_layers": 2, "num_attention_heads": 3, "vocab_size": 100}
    with pytest.raises(GraphbenchError, match="head_dim must be even"):
        arch_from_dict(raw, source="t")
