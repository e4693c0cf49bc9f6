"""Adapters in PEFT's layout (adapter_config.json + adapter_model.safetensors, or an older adapter_model.bin)
or seeded dummies.

An adapter is, per layer and target module, A [r, in] and B [out, r] with the scale alpha / r
(alpha / sqrt(r) with use_rslora) folded into B: delta(x) = x A^T B^T. What is loaded is what
peft.PeftModel.from_pretrained computes on the same model: the modules it wraps (target_modules,
exclude_modules, layers_to_transform) and its defaults for fields a config leaves out. An adapter that would
make PEFT compute anything else is refused, never loaded as plain LoRA.
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
from graphbench.runner.lora.module_selection import PARENT, selected_modules

# The names PEFT's save_pretrained writes for a *ForCausalLM (the adapter name "default" in them or not). Others,
# e.g. a vision tower's "...encoder.layers.0.self_attn.q_proj", are not this model's modules (and PEFT does not
# load them): matched anywhere in the name they would land in a decoder layer, or overwrite its own weights.
KEY = re.compile(r"base_model\.model\.model\.layers\.(\d+)\.(self_attn|mlp)\.(\w+)\.lora_([AB])(?:\.default)?\.weight")
# adapter_config.json fields that change what the weights mean: loading them as plain LoRA would be wrong
UNSUPPORTED = ("rank_pattern", "alpha_pattern", "use_dora", "modules_to_save", "lora_bias", "target_parameters",
               "layer_replication", "alora_invocation_tokens", "trainable_token_indices")
# LoRA variants PEFT turns on with a config object: an empty {} (falsy here) turns them on too
VARIANT_CONFIGS = ("use_bdlora", "arrow_config", "kasa_config", "monteclora_config")
# init_lora_weights with which PEFT rewrites the base weights when it loads the adapter (the adapter is a delta on
# that residual model, not on the checkpoint graphbench serves)
BASE_REWRITING_INITS = ("pissa", "olora", "corda", "loftq")
# LoraConfig's fields as of PEFT 0.21. A field a newer PEFT added that reads as a variant's switch (use_X true, an
# X_config set) is refused: this PEFT would drop it and compute plain LoRA, not what the adapter was trained with.
KNOWN_FIELDS = frozenset((
    "task_type", "peft_type", "auto_mapping", "peft_version", "base_model_name_or_path", "revision", "inference_mode",
    "r", "target_modules", "exclude_modules", "lora_alpha", "lora_dropout", "fan_in_fan_out", "bias", "use_rslora",
    "modules_to_save", "init_lora_weights", "layers_to_transform", "layers_pattern", "rank_pattern", "alpha_pattern",
    "megatron_config", "megatron_core", "trainable_token_indices", "loftq_config", "eva_config", "corda_config",
    "lora_ga_config", "use_dora", "velora_config", "alora_invocation_tokens", "use_qalora", "qalora_group_size",
    "monteclora_config", "layer_replication", "runtime_config", "lora_bias", "target_parameters", "use_bdlora",
    "arrow_config", "kasa_config", "ensure_weight_tying"))
# tensors PEFT saves beside A and B that change nothing at inference: VeLoRA's projection (its forward outside
# training is plain LoRA)
INFERENCE_UNUSED = {"lora_velora_embed": "velora_config"}
EXTRA = re.compile(r"base_model\.model\.model\.layers\.(\d+)\.(self_attn|mlp)\.(\w+)\.(lora_\w+?)(?:\.default)?")
# full weights of the model's own modules that save_pretrained's save_embedding_layers puts in an adapter
EMBEDDINGS = re.compile(r"base_model\.model\.(model\.embed_tokens|lm_head)\.(?:base_layer\.)?weight")
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin")  # PEFT reads the first one there
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
    try:
        folder = Path(source).expanduser()
    except RuntimeError as exc:  # ~user of a user this machine does not know
        raise GraphbenchError(f"LoRA adapter {name}: cannot resolve the path {source!r} ({exc})") from None
    config_file = folder / "adapter_config.json"
    weights_file = next((folder / f for f in WEIGHT_FILES if (folder / f).is_file()), None)
    if not config_file.is_file() or weights_file is None:
        raise GraphbenchError(f"LoRA adapter {name}: {folder} needs adapter_config.json and "
                              "adapter_model.safetensors (or adapter_model.bin)")
    config = read_config(name, config_file)
    r, scale = check_config(name, config, config_file, max_rank)
    selected = selected_modules(name, config, config_file, arch)
    tensors = drop_unused(name, config, read_tensors(name, weights_file), weights_file, selected)
    return Adapter(name, r, pair_weights(name, tensors, weights_file, arch, r, scale, selected))


def read_config(name: str, config_file: Path) -> dict:
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise GraphbenchError(f"LoRA adapter {name}: {config_file} is not a JSON adapter config ({exc})") from None
    except OSError as exc:
        raise GraphbenchError(f"LoRA adapter {name}: cannot read {config_file}: {exc}") from None
    if not isinstance(config, dict):
        raise GraphbenchError(f"LoRA adapter {name}: {config_file} must hold a JSON object")
    return config


def check_config(name: str, config: dict, config_file: Path, max_rank: int) -> tuple[int, float]:
    """The rank and the scale, once what plain LoRA does not compute is refused."""
    where = f"LoRA adapter {name}: {config_file}"
    if config.get("peft_type", "LORA") != "LORA":  # AdaLoRA, VeRA, LoHa...: other weights, other formulas
        raise GraphbenchError(f"{where}: peft_type {config['peft_type']!r} is not supported (only LORA)")
    r, alpha = config.get("r", 8), config.get("lora_alpha", 8)  # PEFT's LoraConfig defaults when left out
    if isinstance(r, bool) or not isinstance(r, int) or not 1 <= r <= max_rank:
        raise GraphbenchError(f"{where}: r must be an integer in 1..max_lora_rank {max_rank}, got {r!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
        raise GraphbenchError(f"{where}: lora_alpha must be a finite number, got {alpha!r}")
    # (bias all / lora_only adds nothing unless the file holds bias tensors, which pair_weights refuses)
    if config.get("bias", "none") not in ("none", "all", "lora_only"):
        raise GraphbenchError(f"{where}: bias must be 'none', 'all' or 'lora_only', got {config['bias']!r}")
    if used := [k for k in UNSUPPORTED if config.get(k)] + [k for k in VARIANT_CONFIGS
                                                            if config.get(k) not in (None, False)]:
        raise GraphbenchError(f"LoRA adapter {name}: {', '.join(used)} in {config_file} is not supported "
                              "(graphbench loads plain LoRA: one rank and alpha, A and B per target)")
    if newer := [k for k in config if k not in KNOWN_FIELDS and _switches_on(k, config[k])]:
        raise GraphbenchError(f"LoRA adapter {name}: {', '.join(newer)} in {config_file} is not supported (a "
                              "setting of a newer PEFT that graphbench does not compute: it loads plain LoRA)")
    init = config.get("init_lora_weights")
    if isinstance(init, str) and init.lower().startswith(BASE_REWRITING_INITS):
        raise GraphbenchError(f"{where}: init_lora_weights {init!r} is not supported: PEFT rewrites the base "
                              "weights when it loads such an adapter (save it with path_initial_model_for_weight_"
                              "conversion to get plain LoRA)")
    return r, alpha / math.sqrt(r) if config.get("use_rslora") else alpha / r


def _switches_on(field: str, value) -> bool:
    """Whether an unknown field reads as a LoRA variant turned on (PEFT's use_dora, kasa_config, ...); a newer
    PEFT's other fields and their defaults (None, false, {}) are left to be ignored, as this PEFT ignores them."""
    if field.startswith("use_"):
        return value not in (None, False, 0, "", [], {})
    return field.endswith("_config") and value not in (None, False, {})


def read_tensors(name: str, weights_file: Path) -> dict[str, torch.Tensor]:
    if weights_file.stat().st_size > MAX_ADAPTER_BYTES:
        raise GraphbenchError(f"LoRA adapter {name}: {weights_file} is too large for an adapter")
    if weights_file.suffix == ".bin":
        return _read_bin(name, weights_file)
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(str(weights_file))
    except (SafetensorError, OSError) as exc:
        raise GraphbenchError(f"LoRA adapter {name}: cannot read {weights_file}: {exc}") from None


def _read_bin(name: str, weights_file: Path) -> dict[str, torch.Tensor]:
    """An older PEFT adapter's torch.save'd state dict, unpickled with weights_only: no code of the file runs."""
    try:
        tensors = torch.load(weights_file, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001  (a file that is no torch.save fails in many ways: EOF, unpickling, zip)
        # (torch's own messages run over many lines, about trusting the file: the type says enough)
        raise GraphbenchError(f"LoRA adapter {name}: cannot read {weights_file} as a torch.save'd state dict of "
                              f"tensors ({type(exc).__name__})") from None
    if not isinstance(tensors, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                                for k, v in tensors.items()):
        raise GraphbenchError(f"LoRA adapter {name}: {weights_file} must hold a state dict (tensor names to tensors)")
    return tensors


def drop_unused(name: str, config: dict, tensors: dict[str, torch.Tensor], weights_file: Path,
                selected: set[tuple[int, str]]) -> dict[str, torch.Tensor]:
    """The tensors less those PEFT loads but does not compute with outside training (INFERENCE_UNUSED, of a
    selected module, where the config turns their variant on); refuses save_embedding_layers' copies of the
    model's embed_tokens / lm_head weights, which PEFT loads over the model's own."""
    kept = {}
    for key, tensor in tensors.items():
        if embedding := EMBEDDINGS.fullmatch(key):
            raise GraphbenchError(f"LoRA adapter {name}: tensor {key} in {weights_file} is a whole {embedding[1]} "
                                  "weight (save_pretrained's save_embedding_layers), which PEFT loads over the "
                                  "model's own and graphbench does not load: save the adapter with "
                                  "save_embedding_layers=False")
        extra = EXTRA.fullmatch(key)
        variant = INFERENCE_UNUSED.get(extra[4]) if extra else None
        if variant and config.get(variant) is not None and (int(extra[1]), extra[3]) in selected:
            continue
        kept[key] = tensor
    return kept


def pair_weights(name: str, tensors: dict[str, torch.Tensor], weights_file: Path, arch: ArchConfig, r: int,
                 scale: float, selected: set[tuple[int, str]]
                 ) -> dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]]:
    """(layer, target) -> (A, B * scale) as float32, each tensor checked: its name, the module PEFT would load it
    into, its dtype, its values and shape."""
    halves: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
    for key, tensor in tensors.items():
        layer, target, half = _place(name, key, weights_file, arch, selected)
        if half in halves.setdefault((layer, target), {}):  # "lora_A.weight" and "lora_A.default.weight"
            raise GraphbenchError(f"LoRA adapter {name}: {weights_file} holds layer {layer} {target}'s lora_{half} "
                                  f"twice (again as {key})")
        if tensor.dtype not in DTYPES:
            raise GraphbenchError(f"LoRA adapter {name}: tensor {key} in {weights_file} is {tensor.dtype}, not a "
                                  "float16/bfloat16/float32/float64 weight")
        if not torch.isfinite(tensor).all():  # (one NaN would reach every token of a batch with adapters)
            raise GraphbenchError(f"LoRA adapter {name}: tensor {key} in {weights_file} holds NaN or infinity")
        halves[(layer, target)][half] = tensor.float()
    if not halves:
        raise GraphbenchError(f"LoRA adapter {name}: {weights_file} holds no LoRA weights")
    shapes, weights = target_shapes(arch), {}
    for (layer, target), pair in halves.items():
        fan_in, fan_out = shapes[target]
        a, b = pair.get("A"), pair.get("B")
        if a is None or b is None or tuple(a.shape) != (r, fan_in) or tuple(b.shape) != (fan_out, r):
            raise GraphbenchError(f"LoRA adapter {name}: layer {layer} {target} in {weights_file} needs A "
                                  f"[{r}, {fan_in}] and B [{fan_out}, {r}] (r from adapter_config.json)")
        if not torch.isfinite(b := b * scale).all():
            raise GraphbenchError(f"LoRA adapter {name}: lora_alpha / r ({scale:g}) takes layer {layer} {target}'s B "
                                  f"in {weights_file} beyond float32")
        weights[(layer, target)] = (a, b)
    return weights


def _place(name: str, key: str, weights_file: Path, arch: ArchConfig,
           selected: set[tuple[int, str]]) -> tuple[int, str, str]:
    """(layer, target, "A" or "B") of a tensor name, or one line on why it is not a weight to load."""
    match = KEY.fullmatch(key)
    if match is None and key.endswith(".bias"):
        raise GraphbenchError(f"LoRA adapter {name}: tensor {key} in {weights_file} is a bias (bias 'all' or "
                              "'lora_only' in adapter_config.json saves them), which graphbench does not load")
    if match is None:
        raise GraphbenchError(f"LoRA adapter {name}: tensor {key} in {weights_file} is not a LoRA A/B weight of a "
                              "target module (graphbench reads base_model.model.model.layers.N.<self_attn|mlp>."
                              "<proj>.lora_A|lora_B.weight)")
    layer, parent, target, half = int(match.group(1)), match.group(2), match.group(3), match.group(4)
    if target not in PARENT or PARENT[target] != parent or not 0 <= layer < arch.num_hidden_layers:
        raise GraphbenchError(f"LoRA adapter {name}: tensor {key} in {weights_file} targets a module this model "
                              "does not have")
    if (layer, target) not in selected:  # PEFT would not load it: serving it would differ from PEFT
        raise GraphbenchError(f"LoRA adapter {name}: tensor {key} in {weights_file} is for a module that "
                              "target_modules / exclude_modules / layers_to_transform in adapter_config.json do "
                              "not select")
    return layer, target, half
