"""Adapter folders that do not fit the model, or say more than graphbench reads: one line each, never an
adapter loaded into the wrong module or with a scale it ignored (runner/lora/adapters.py)."""

from __future__ import annotations

import json

import pytest
import torch

from graphbench.config import load_arch, load_engine_config
from graphbench.errors import GraphbenchError
from graphbench.runner.lora.adapters import load_adapter, target_shapes

safetensors = pytest.importorskip("safetensors.torch")
ARCH = load_arch("tiny-llama")
RANK = 4


def _write(folder, tensors: dict, **config):
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"r": RANK, "lora_alpha": 8, **config}))
    safetensors.save_file(tensors, str(folder / "adapter_model.safetensors"))
    return str(folder)


def _pair(parent: str, target: str, layer: int = 0) -> dict:
    fan_in, fan_out = target_shapes(ARCH)[target]
    prefix = f"base_model.model.model.layers.{layer}.{parent}.{target}"
    return {f"{prefix}.lora_A.weight": torch.randn(RANK, fan_in), f"{prefix}.lora_B.weight": torch.randn(fan_out, RANK)}


def test_a_plain_adapter_loads(tmp_path):
    adapter = load_adapter("a", _write(tmp_path / "a", _pair("self_attn", "q_proj") | _pair("mlp", "down_proj"),
                                       target_modules=["q_proj", "down_proj"]), ARCH, 16, 0)
    assert sorted(adapter.weights) == [(0, "down_proj"), (0, "q_proj")] and adapter.rank == RANK


@pytest.mark.parametrize("tensors, config, said", [
    # attention's q_proj under mlp: loaded into attention before, silently
    (_pair("mlp", "q_proj"), {}, "targets a module this model does not have"),
    (_pair("self_attn", "down_proj"), {}, "targets a module this model does not have"),
    (_pair("self_attn", "q_proj"), {"target_modules": ["q_proj", "c_attn"]}, r"target_modules \['c_attn'\]"),
    (_pair("self_attn", "q_proj"), {"rank_pattern": {"q_proj": 8}}, "rank_pattern .* is not supported"),
    (_pair("self_attn", "q_proj"), {"alpha_pattern": {"q_proj": 2}}, "alpha_pattern"),
    (_pair("self_attn", "q_proj"), {"use_dora": True}, "use_dora"),
    (_pair("self_attn", "q_proj"), {"modules_to_save": ["lm_head"]}, "modules_to_save"),
    ({}, {}, "holds no LoRA weights"),
])
def test_an_adapter_that_does_not_fit_or_says_more_is_one_line(tmp_path, tensors, config, said):
    with pytest.raises(GraphbenchError, match=said):
        load_adapter("a", _write(tmp_path / "a", tensors, **config), ARCH, 16, 0)


@pytest.mark.parametrize("module", ["a=dummy:r=8,n=3", "a=dummy:r=8,x=1", "a=dummy:r="])
def test_a_lora_module_spec_with_a_field_it_would_drop_is_refused(module):
    with pytest.raises(GraphbenchError, match="named dummy adapter is NAME=dummy:r=RANK"):
        load_engine_config(overrides={"lora.modules": [module]})
