"""PEFT adapter folders as people have them (peft's save_pretrained on a tiny Llama, some edited by hand): the engine
computes what transformers + peft compute, or refuses the folder in one GraphbenchError; never a delta that PEFT
would not apply, nor a traceback (runner/lora/adapters.py)."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch

from graphbench.config import load_arch, load_engine_config
from graphbench.errors import GraphbenchError
from graphbench.runner.engine import Engine
from graphbench.runner.lora.adapters import load_adapter
from tests.hf_checkpoints import load_hf, save_peft_adapter, save_tiny_checkpoint

peft = pytest.importorskip("peft")
safetensors = pytest.importorskip("safetensors.torch")
PROMPT = [5, 17, 99, 3, 42, 7]
ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
DROP = object()  # an adapter_config.json field to leave out
Q0 = "base_model.model.model.layers.0.self_attn.q_proj"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return save_tiny_checkpoint(tmp_path_factory.mktemp("variants") / "model", "llama")


def _edit(folder, config: dict | None = None, tensors=None):
    """Change adapter_config.json's fields (DROP: leave one out) and/or the tensors (a function of the dict)."""
    if config:
        file = folder / "adapter_config.json"
        data = json.loads(file.read_text()) | config
        file.write_text(json.dumps({k: v for k, v in data.items() if v is not DROP}))
    if tensors:
        file = str(folder / "adapter_model.safetensors")
        safetensors.save_file({k: v.contiguous() for k, v in tensors(safetensors.load_file(file)).items()}, file)
    return folder


def _logits(checkpoint, folder, rank: int = 8):
    engine = Engine(load_engine_config(overrides={
        "model.model": str(checkpoint), "model.device": "cpu", "model.dtype": "float32", "optimization_level": 0,
        "scheduler.max_num_seqs": 2, "scheduler.max_num_batched_tokens": 32,
        "lora.modules": [f"a={folder}"], "lora.max_lora_rank": rank}))
    (ours,) = engine.prompt_logits([PROMPT], ["a"])
    with torch.no_grad():
        expected = peft.PeftModel.from_pretrained(load_hf(checkpoint), str(folder)).eval()(torch.tensor([PROMPT]))
        base = load_hf(checkpoint)(torch.tensor([PROMPT])).logits[0]
    return ours, expected.logits[0], base


@pytest.mark.parametrize("config, edit, safe", [
    # refused before: PEFT saves "all-linear" as the full names of the modules it wrapped
    ({"target_modules": "all-linear"}, None, True),
    ({"target_modules": ["self_attn.q_proj", "model.layers.1.mlp.down_proj"]}, None, True),  # suffixes, as PEFT
    ({}, None, False),  # an older adapter_model.bin (torch.save): refused before
    ({"lora_alpha": 16}, {"lora_alpha": DROP}, True),  # PEFT's default alpha is 8: graphbench took r (4) before
    ({"r": 8}, {"r": DROP}, True),  # PEFT's default r is 8: refused before
    ({"bias": "lora_only"}, None, True),  # Llama has no biases: nothing more to load; refused before
    ({}, {"fan_in_fan_out": True}, True),  # PEFT ignores it on nn.Linear; refused before
    # pinned: the ways PEFT chooses its modules, and its scales
    ({"target_modules": r".*\.layers\.1\.(self_attn\.o_proj|mlp\.up_proj)"}, None, True),
    ({"target_modules": ALL, "layers_to_transform": [1], "layers_pattern": "layers"}, None, True),
    ({"target_modules": ALL, "exclude_modules": ["k_proj", "gate_proj"]}, None, True),
    ({"r": 8, "lora_alpha": 3, "use_rslora": True}, None, True),
    # VeLoRA saves a lora_velora_embed per module, which only its training backward reads: refused before
    ({"velora_config": {"num_groups": 4}}, None, True),
    # a newer PEFT's fields left at their defaults (this PEFT drops them)
    ({}, {"use_newer_thing": False, "newer_config": None, "newer_group_size": 32}, True),
], ids=["all-linear", "suffixes", "bin", "no-alpha", "no-r", "bias-lora-only", "fan-in-fan-out", "regex",
        "layers-to-transform", "exclude-modules", "rslora", "velora", "newer-defaults"])
def test_the_engine_computes_what_peft_computes(checkpoint, tmp_path, config, edit, safe):
    folder = _edit(save_peft_adapter(checkpoint, tmp_path / "a", safe=safe, **config), edit)
    ours, expected, base = _logits(checkpoint, folder)
    assert (expected - base).abs().max() > 1e-3  # the adapter does change the logits
    assert torch.allclose(ours, expected, atol=1e-4), (ours - expected).abs().max()


def _rename(old: str, new: str):
    return lambda t: {k.replace(old, new): v for k, v in t.items()}


def _set_first(value):
    def change(tensors):
        first = next(iter(tensors))
        tensors[first] = tensors[first].clone().fill_(value)
        return tensors
    return change


VISION = "base_model.model.vision_tower.encoder.layers.0.self_attn.q_proj"


@pytest.mark.parametrize("config, tensors, said", [
    # each loaded before as plain LoRA unless noted; the first nine are tensors PEFT does not apply (it leaves out
    # what it does not wrap, and names it does not know)
    ({"target_modules": ["q_proj"]}, None, "do not select"),
    ({"layers_to_transform": [0]}, None, "do not select"),
    ({"exclude_modules": ["v_proj"]}, None, "do not select"),
    ({"target_modules": DROP}, _rename("v_proj", "k_proj"), "do not select"),  # PEFT's default: q_proj, v_proj
    ({"target_modules": "q_proj"}, None, "do not select"),  # a string is a regular expression over full names
    ({}, _rename("base_model.model.model.", "model."), "not a LoRA A/B weight"),  # PEFT does not load these names
    ({}, lambda t: t | {k.replace(Q0, VISION): 3 * v for k, v in t.items() if Q0 in k}, "not a LoRA A/B weight"),
    ({}, _rename(".weight", ".other.weight"), "not a LoRA A/B weight"),  # another adapter's name: PEFT skips it
    ({}, lambda t: t | {k.replace(".weight", ".default.weight"): 2 * v for k, v in t.items()}, "twice"),
    ({"alora_invocation_tokens": [17, 99]}, None, "alora_invocation_tokens in .* is not supported"),
    ({"layer_replication": [[0, 2], [1, 2]]}, None, "layer_replication"),
    ({"use_bdlora": {"nblocks": 2}}, None, "use_bdlora"),
    ({"kasa_config": {}}, None, "kasa_config"),  # PEFT turns KaSA on with its defaults
    ({"init_lora_weights": "pissa"}, None, "PEFT rewrites the base weights"),
    ({"init_lora_weights": "olora"}, None, "PEFT rewrites the base weights"),
    # a newer PEFT's variant switches: this PEFT drops them (plain LoRA), the adapter was trained with them (loaded
    # as plain LoRA before)
    ({"use_newer_variant": True}, None, "use_newer_variant in .*setting of a newer PEFT"),
    ({"newer_config": {"groups": 2}}, None, "newer_config in .*setting of a newer PEFT"),
    ({"peft_type": "VERA"}, None, "peft_type 'VERA' is not supported"),
    ({"target_modules": ".*(q_proj|v_proj|lm_head)"}, None, "wraps lm_head, whose LoRA is not supported"),
    ({"target_modules": "(q_proj"}, None, "not a valid regular expression"),
    ({"target_modules": {"q_proj": 1}}, None, "target_modules must be"),
    ({"layers_to_transform": "0"}, None, "layers_to_transform must be"),
    ({"bias": "some"}, None, "bias must be"),  # (refused before, for any bias but 'none')
    ({"bias": "lora_only"}, lambda t: t | {f"{Q0}.base_layer.bias": torch.zeros(64)}, "is a bias"),  # (likewise)
    ({"lora_alpha": 1e308}, None, "beyond float32"),
    # (a NaN slot turns every token of a batch with adapters to NaN on the CPU path, other adapters' too)
    ({}, _set_first(float("nan")), "holds NaN or infinity"),
    ({}, lambda t: {k: (v * 100).to(torch.int32) for k, v in t.items()}, "is torch.int32, not a float"),  # (PEFT casts)
    # float4: a NotImplementedError traceback before
    ({}, lambda t: {k: torch.zeros(v.numel() // 2, dtype=torch.uint8).view(torch.float4_e2m1fn_x2) for k, v in t.items()},
     "float4_e2m1fn_x2, not a float"),
])
def test_an_adapter_peft_would_not_compute_as_plain_lora_is_refused(checkpoint, tmp_path, config, tensors, said):
    folder = _edit(save_peft_adapter(checkpoint, tmp_path / "a"), config, tensors)
    with pytest.raises(GraphbenchError, match=said) as caught:
        load_adapter("a", str(folder), load_arch(str(checkpoint)), 16, 0)
    assert "\n" not in str(caught.value)


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (self.marker,)


@pytest.mark.parametrize("content, said", [
    (b"", r"as a torch.save'd state dict of tensors \(EOFError\)"),
    (b"\x80\x04garbage", r"as a torch.save'd state dict of tensors \(UnpicklingError\)"),
    ([1, 2], "must hold a state dict"),
    ({"a": {"b": torch.zeros(1)}}, "must hold a state dict"),
    ("payload", r"\(UnpicklingError\)"),  # weights_only: the file's code never runs
])
def test_an_unreadable_adapter_model_bin_is_one_line(checkpoint, tmp_path, content, said):
    folder = save_peft_adapter(checkpoint, tmp_path / "a")
    (folder / "adapter_model.safetensors").unlink()  # PEFT reads adapter_model.bin then
    marker = str(tmp_path / "ran")
    if isinstance(content, bytes):
        (folder / "adapter_model.bin").write_bytes(content)
    else:
        torch.save({"x": _Payload(marker)} if content == "payload" else content, folder / "adapter_model.bin")
    with pytest.raises(GraphbenchError, match=said):
        load_adapter("a", str(folder), load_arch(str(checkpoint)), 16, 0)
    assert not os.path.exists(marker)


def test_an_unknown_home_is_one_line():
    # Path.expanduser raised RuntimeError (a traceback) before
    with pytest.raises(GraphbenchError, match="cannot resolve the path '~no_such_user_q/a'"):
        load_adapter("a", "~no_such_user_q/a", load_arch("tiny-llama"), 16, 0)


def test_a_folder_named_dummy_something_is_a_path(checkpoint, tmp_path, monkeypatch):
    # refused before as "a named dummy adapter is NAME=dummy:r=RANK"
    shutil.copytree(save_peft_adapter(checkpoint, tmp_path / "a"), tmp_path / "dummy-lora")
    monkeypatch.chdir(tmp_path)
    assert load_engine_config(overrides={"lora.modules": ["a=dummy-lora"]}).lora.adapters() == [("a", "dummy-lora")]
    assert len(load_adapter("a", "dummy-lora", load_arch(str(checkpoint)), 16, 0).weights) == 4
    with pytest.raises(GraphbenchError, match="named dummy adapter"):
        load_engine_config(overrides={"lora.modules": ["a=dummy:r=4,n=2"]})


def test_one_adapters_inf_reaches_no_other_token():
    """The torch path's delta (runner/lora/weights.lora_delta): each token takes its own slot's delta; a slot whose
    weights are inf in the model's dtype must not turn the other tokens into NaN (a one-hot product did: 0 x inf)."""
    from graphbench.runner.lora.weights import lora_delta

    torch.manual_seed(0)
    x, a, b = torch.randn(3, 8), torch.randn(2, 4, 8), torch.randn(2, 6, 4)
    b[1, 0, 0] = float("inf")
    index = torch.tensor([0, -1, 1], dtype=torch.int32)
    delta = lora_delta(x, a, b, index)
    assert torch.allclose(delta[0], (x[0] @ a[0].T) @ b[0].T) and torch.equal(delta[1], torch.zeros(6))
    assert not delta[2].isfinite().all()  # the slot's own token does see its inf


def test_an_adapter_beyond_float16s_range_is_refused_for_a_float16_model(checkpoint, tmp_path):
    """Finite in float32, inf once in a float16 model's slot buffers: refused naming the adapter and the dtype."""
    folder = _edit(save_peft_adapter(checkpoint, tmp_path / "big"),
                   tensors=lambda t: {k: (v * 1e6 if "lora_B" in k else v) for k, v in t.items()})
    with pytest.raises(GraphbenchError, match="overflow torch.float16"):
        Engine(load_engine_config(overrides={
            "model.model": str(checkpoint), "model.device": "cpu", "model.dtype": "float16", "optimization_level": 0,
            "lora.modules": [f"big={folder}"], "lora.max_lora_rank": 8}))


def test_an_adapter_saved_with_its_embedding_layers_is_refused_naming_the_tensor(checkpoint, tmp_path):
    """save_embedding_layers=True writes whole embed_tokens / lm_head weights, which PEFT loads over the model's own:
    refused as such (before: "not a LoRA A/B weight of a target module")."""
    torch.manual_seed(0)
    model = peft.get_peft_model(load_hf(checkpoint), peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj"]))
    model.save_pretrained(tmp_path / "a", save_embedding_layers=True)
    with pytest.raises(GraphbenchError, match=r"tensor base_model\.model\.(model\.embed_tokens|lm_head)\.weight .* "
                                              "save_embedding_layers=False") as caught:
        load_adapter("a", str(tmp_path / "a"), load_arch(str(checkpoint)), 16, 0)
    assert "\n" not in str(caught.value)
