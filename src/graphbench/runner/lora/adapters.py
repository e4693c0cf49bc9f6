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

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
PARENT = {"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn", "o_proj": "self_attn",
          "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}
# The names PEFT's save_pretrained writes for a *ForCausalLM (the adapter name "default" in them or not). Others,
# e.g. a vision tower's "...encoder.layers.0.self_attn.q_proj", are not this model's modules (and PEFT does not
# load them): matched anywhere in the name they would land in a decoder layer, or overwrite its own weights.
KEY = re.compile(r"base_model\.model\.model\.layers\.(\d+)\.(self_attn|mlp)\.(\w+)\.lora_([AB])(?:\.default)?\.weight")
OTHERS = ("model.embed_tokens", "lm_head")  # modules PEFT can wrap whose LoRA graphbench does not compute
DEFAULT_TARGETS = ["q_proj", "v_proj"]  # PEFT's target_modules for llama, mistral and qwen2 when none is given
# adapter_config.json fields that change what the weights mean: loading them as plain LoRA would be wrong
UNSUPPORTED = ("rank_pattern", "alpha_pattern", "use_dora", "modules_to_save", "lora_bias", "target_parameters",
               "layer_replication", "alora_invocation_tokens", "trainable_token_indices")
# LoRA variants PEFT turns on with a config object: an empty {} (falsy here) turns them on too
VARIANT_CONFIGS = ("use_bdlora", "arrow_config", "kasa_config", "monteclora_config")
# init_lora_weights with which PEFT rewrites the base weights when it loads the adapter (the adapter is a delta on
# that residual model, not on the checkpoint graphbench serves)
BASE_REWRITING_INITS = ("pissa", "olora", "corda", "loftq")
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
    return Adapter(name, r, pair_weights(name, read_tensors(name, weights_file), weights_file, arch, r, scale,
                                         selected))


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
    init = config.get("init_lora_weights")
    if isinstance(init, str) and init.lower().startswith(BASE_REWRITING_INITS):
        raise GraphbenchError(f"{where}: init_lora_weights {init!r} is not supported: PEFT rewrites the base "
                              "weights when it loads such an adapter (save it with path_initial_model_for_weight_"
                              "conversion to get plain LoRA)")
    return r, alpha / math.sqrt(r) if config.get("use_rslora") else alpha / r


def _names(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_selection_types(where: str, config: dict) -> None:
    """The fields PEFT chooses the wrapped modules with, as the types it reads them as."""
    names, indices = "a name (regular expression) or a list of names", "a layer index or a list of them"
    fields = {"target_modules": (names, lambda v: isinstance(v, str) or _names(v)),
              "exclude_modules": (names, lambda v: isinstance(v, str) or _names(v)),
              "layers_pattern": (names, lambda v: isinstance(v, str) or _names(v)),
              "layers_to_transform": (indices, lambda v: _integer(v) or isinstance(v, list) and all(map(_integer, v)))}
    for field, (what, fits) in fields.items():
        if config.get(field) is not None and not fits(config[field]):
            raise GraphbenchError(f"{where}: {field} must be {what}, got {config[field]!r}")


def module_name(layer: int, target: str) -> str:
    """The module's name in the HF *ForCausalLM, which PEFT matches target_modules against."""
    return f"model.layers.{layer}.{PARENT[target]}.{target}"


def selected_modules(name: str, config: dict, config_file: Path, arch: ArchConfig) -> set[tuple[int, str]]:
    """The (layer, target) modules PEFT wraps; refuses target_modules naming a module this model lacks, or
    lm_head / embed_tokens (whose LoRA graphbench does not compute)."""
    where = f"LoRA adapter {name}: {config_file}"
    check_selection_types(where, config)
    targets = config.get("target_modules")
    if targets is None:
        targets = DEFAULT_TARGETS
    elif isinstance(targets, str) and targets.lower() == "all-linear":
        targets = list(TARGETS)  # PEFT: every linear layer but the output layer
    rule = {**config, "target_modules": targets}
    ours = {(layer, t): module_name(layer, t) for layer in range(arch.num_hidden_layers) for t in TARGETS}
    try:
        lacking = [t for t in ([] if isinstance(targets, str) else targets)
                   if not any(_listed([t], n) for n in [*ours.values(), *OTHERS])]
        if lacking:
            raise GraphbenchError(f"LoRA adapter {name}: target_modules {sorted(lacking)} in {config_file} are not "
                                  f"modules of this model (it has {', '.join(TARGETS)})")
        if others := [n for n in OTHERS if _selects(rule, n)]:
            raise GraphbenchError(f"{where}: target_modules wraps {', '.join(others)}, whose LoRA is not "
                                  f"supported (only {', '.join(TARGETS)})")
        return {key for key, module in ours.items() if _selects(rule, module)}
    except (re.error, OverflowError, RecursionError) as exc:
        raise GraphbenchError(f"{where}: target_modules, exclude_modules or layers_pattern is not a valid "
                              f"regular expression ({exc})") from None


def _listed(names: list[str], key: str) -> bool:
    return key in names or any(key.endswith(f".{n}") for n in names)


def _selects(config: dict, key: str) -> bool:
    """Whether PEFT wraps the module named key: peft's check_target_module_exists (modules_to_save, which it
    also reads, is refused before)."""
    exclude = config.get("exclude_modules")
    if exclude and (re.fullmatch(exclude, key) if isinstance(exclude, str) else _listed(exclude, key)):
        return False
    targets = config["target_modules"]
    if isinstance(targets, str):
        return re.fullmatch(targets, key) is not None
    if key in targets:
        return True  # named in full: PEFT does not apply layers_to_transform then
    if not _listed(targets, key):
        return False
    layers = config.get("layers_to_transform")
    if layers is None or layers == []:
        return True
    index = _layer_index(key, config.get("layers_pattern"))
    return index is not None and (index == layers if isinstance(layers, int) else index in layers)


def _layer_index(key: str, patterns) -> int | None:
    """The layer index in a module's name as PEFT finds it (the first numbered part, or the one after a
    layers_pattern; an empty pattern means any)."""
    if not patterns:
        match = re.match(r".*?\.[^.]*\.(?P<idx>\d+)\.", key)
        return int(match["idx"]) if match else None
    for pattern in [patterns] if isinstance(patterns, str) else patterns:
        if match := re.match(rf"(?:^|.*?\.){pattern}\.(?P<idx>\d+)\.", key):
            return int(match["idx"])
    return None


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
