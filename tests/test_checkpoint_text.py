"""What a checkpoint folder says beyond its shapes: its dtype (--dtype auto), its stop tokens, and its
weights for the transformers peers."""

from __future__ import annotations

import json

import pytest
import torch

from graphbench.checkpoints.text import stop_tokens
from graphbench.config.arch import auto_dtype
from tests.hf_checkpoints import load_hf, save_tiny_checkpoint


def _config_with(tmp_path, **fields):
    (tmp_path / "config.json").write_text(json.dumps(fields))
    return str(tmp_path)


@pytest.mark.parametrize("fields, cuda", [({"dtype": "float16"}, "float16"), ({"torch_dtype": "bfloat16"}, "bfloat16"),
                                          ({"dtype": "float32"}, "bfloat16"), ({}, "bfloat16"),
                                          ({"dtype": ["x"]}, "bfloat16")])
def test_dtype_auto_keeps_a_checkpoints_16_bit_dtype_on_the_gpu_and_float32_on_the_cpu(tmp_path, fields, cuda):
    model = _config_with(tmp_path, **fields)
    assert auto_dtype(model, "cuda") == cuda and auto_dtype(model, "cpu") == "float32"
    assert auto_dtype("tiny-llama", "cuda") == "bfloat16"


def test_stop_tokens_come_from_generation_config_and_config_as_ints_or_lists(tmp_path):
    model = _config_with(tmp_path, eos_token_id=2)
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [7, 2, -1]}))
    assert stop_tokens(model) == (7, 2)
    assert stop_tokens("tiny-llama") == ()
    # another type (a string, a float, a flag) would have run past the eos the checkpoint means: refused by name
    from graphbench.errors import GraphbenchError

    for bad in ([7, "x"], "2", 2.0, True, {"id": 2}):
        (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": bad}))
        with pytest.raises(GraphbenchError, match="generation_config.json: eos_token_id .* is not a token id"):
            stop_tokens(model)
    (tmp_path / "generation_config.json").write_text("[2]")
    with pytest.raises(GraphbenchError, match="generation_config.json holds a JSON list, not an object"):
        stop_tokens(model)


def test_the_transformers_peer_loads_a_checkpoints_own_weights(tmp_path):
    from graphbench.bench.peer_models import build_hf_model
    from graphbench.config import load_arch

    folder = save_tiny_checkpoint(tmp_path / "model")
    arch = load_arch(str(folder))
    peer, weights = build_hf_model(arch, torch.float32, "cpu", checkpoint=str(folder))
    ids = torch.tensor([[5, 17, 99]])
    with torch.no_grad():
        assert weights == "safetensors" and torch.equal(peer(ids).logits, load_hf(folder)(ids).logits)
    dummy, weights = build_hf_model(arch, torch.float32, "cpu", checkpoint="tiny-llama")
    assert weights == "dummy"


def test_generation_config_defaults_sample_only_with_do_sample_and_are_checked(tmp_path, monkeypatch):
    from graphbench.checkpoints import text
    from graphbench.errors import GraphbenchError

    (tmp_path / "tokenizer.json").write_text("{}")
    monkeypatch.setattr("transformers.AutoTokenizer.from_pretrained", lambda *a, **k: type("T", (), {"eos_token_id": 5})())
    cases = [({"temperature": 0.7}, {}), ({"do_sample": True}, {"temperature": 1.0}),
             ({"do_sample": True, "temperature": 0.6, "top_p": 0.9}, {"temperature": 0.6, "top_p": 0.9})]
    for generation, defaults in cases:
        (tmp_path / "generation_config.json").write_text(json.dumps(generation))
        loaded = text.load_text(str(tmp_path))
        assert loaded.defaults == defaults and loaded.stop_token_ids == (5,), generation
    (tmp_path / "generation_config.json").write_text(json.dumps({"do_sample": True, "top_p": 7}))
    with pytest.raises(GraphbenchError, match="generation_config.json: temperature .* top_p 7 is out of range"):
        text.load_text(str(tmp_path))
    (tmp_path / "generation_config.json").write_text(json.dumps({"do_sample": True, "temperature": "hot"}))
    with pytest.raises(GraphbenchError, match="generation_config.json: temperature 'hot' is not a number"):
        text.load_text(str(tmp_path))
