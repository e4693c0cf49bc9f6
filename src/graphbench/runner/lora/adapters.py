"""Adapters in PEFT's layout (adapter_config.json + adapter_model.safetensors) or seeded dummies.

An adapter is, per layer and target module, A [r, in] and B [out, r] with the scale alpha / r
(alpha / sqrt(r) with use_rslora) folded into B: delta(x) = x A^T B^T.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from graphbench.config.arch import ArchConfig
from graphbench.config.lora import dummy_rank
from graphbench.errors import GraphbenchError

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
PARENT = {"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn", "o_proj": "self_attn",
          "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}
KEY = re.compile(r"layers\.(\d+)\.(self_attn|mlp)\.(\w+)\.lora_([AB])(?:\.\w+)?\.weight$")
# adapter_config.json fields that change what the weights mean: loading them as plain LoRA would be wrong
UNSUPPORTED = ("rank_pattern", "alpha_pattern", "use_dora", "modules_to_save", "lora_bias", "target_parameters")
MAX_ADAPTER_BYTES = 16 << 30


@dataclass
class Adapter:
    name: str
    rank: int
    # (layer, target) -> (A [r, in], B [out, r] * scale), float32 on the CPU
    weights: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]]


def target_shapes(arch: ArchConfig) -> dict[str, tuple[int, int]]:
    """target -> (in, out) features."""
    q, kv = arch.num_attention_heads * arch.head_dim, arch.num_key_value_heads * arch.head_dim
    h, i = arch.hidden_size, arch.intermediate_size
    return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h), "gate_proj": (h, i),
            "up_proj": (h, i), "down_proj": (i, h)}


def dummy_adapter(name: str, rank: int, arch: ArchConfig, seed: int) -> Adapter:
    """Seeded random A and B on all seven targets (B not zero, unlike PEFT's init: the path has an effect)."""
    g = torch.Generator().manual_seed(seed)
    weights = {}
    for layer in range(arch.num_hidden_layers):
        for target, (fan_in, fan_out) in target_shapes(arch).items():
            a = torch.randn(rank, fan_in, generator=g) / math.sqrt(fan_in)
            b = torch.randn(fan_out, rank, generator=g) * (0.02 / math.sqrt(rank))
            weights[(layer, target)] = (a, b)
    return Adapter(name, rank, weights)


def load_adapter(name: str, source: str, arch: ArchConfig, max_rank: int, seed: int) -> Adapter:
    """A dummy (dummy:r=R) or a PEFT adapter folder, checked against the model's shapes."""
    rank = dummy_rank(source)
    if rank is not None:
        return dummy_adapter(name, rank, arch, seed)
    folder = Path(source).expanduser()
    config_file, weights_file = folder / "adapter_config.json", folder / "adapter_model.safetensors"
    if not config_file.is_file() or not weights_file.is_file():
        raise GraphbenchError(f"LoRA adapter {name}: {folder} needs adapter_config.json and adapter_model.safetensors")
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise GraphbenchError(f"LoRA adapter {name}: {config_file} is not a JSON adapter config ({exc})") from None
    if not isinstance(config, dict):
        raise GraphbenchError(f"LoRA adapter {name}: {config_file} must hold a JSON object")
    r, alpha = config.get("r"), config.get("lora_alpha", config.get("r"))
    if isinstance(r, bool) or not isinstance(r, int) or not 1 <= r <= max_rank:
        raise GraphbenchError(f"LoRA adapter {name}: rank r must be an integer in 1..max_lora_rank {max_rank}, got {r!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
        raise GraphbenchError(f"LoRA adapter {name}: lora_alpha must be a number, got {alpha!r}")
    if config.get("bias", "none") != "none" or config.get("fan_in_fan_out"):
        raise GraphbenchError(f"LoRA adapter {name}: only bias 'none' without fan_in_fan_out is supported")
    if used := [k for k in UNSUPPORTED if config.get(k)]:
        raise GraphbenchError(f"LoRA adapter {name}: {', '.join(used)} in {config_file} is not supported "
                              "(graphbench loads plain LoRA: one rank and alpha, A and B per target)")
    targets = config.get("target_modules")
    if isinstance(targets, list) and (lacking := sorted({str(t) for t in targets} - set(TARGETS))):
        raise GraphbenchError(f"LoRA adapter {name}: target_modules {lacking} are not modules of this model "
                              f"(it has {', '.join(TARGETS)})")
    scale = alpha / math.sqrt(r) if config.get("use_rslora") else alpha / r
    if weights_file.stat().st_size > MAX_ADAPTER_BYTES:
        raise GraphbenchError(f"LoRA adapter {name}: {weights_file} is too large for an adapter")
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(weights_file))
    except (SafetensorError, OSError) as exc:
        raise GraphbenchError(f"LoRA adapter {name}: cannot read {weights_file}: {exc}") from None
    halves: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
    shapes = target_shapes(arch)
    for key, tensor in tensors.items():
        match = KEY.search(key)
        if match is None:
            raise GraphbenchError(f"LoRA adapter {name}: tensor {key} is not a LoRA A/B weight of a target module")
        layer, parent, target, half = int(match.group(1)), match.group(2), match.group(3), match.group(4)
        if target not in shapes or PARENT[target] != parent or not 0 <= layer < arch.num_hidden_layers:
            raise GraphbenchError(f"LoRA adapter {name}: {key} targets a module this model does not have")
        halves.setdefault((layer, target), {})[half] = tensor.float()
    weights = {}
    for (layer, target), pair in halves.items():
        fan_in, fan_out = shapes[target]
        a, b = pair.get("A"), pair.get("B")
        if a is None or b is None or tuple(a.shape) != (r, fan_in) or tuple(b.shape) != (fan_out, r):
            raise GraphbenchError(f"LoRA adapter {name}: layer {layer} {target} needs A [{r}, {fan_in}] and "
                                  f"B [{fan_out}, {r}]")
        weights[(layer, target)] = (a, b * scale)
    if not weights:
        raise GraphbenchError(f"LoRA adapter {name}: {weights_file} holds no LoRA weights")
    return Adapter(name, r, weights)
