"""A checkpoint's config.json read as transformers reads it (its defaults, its precedence between fields) into an
ArchConfig; what the engine cannot compute is refused with the field named, never run as a different model."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from graphbench.config.arch_shape import SUPPORTED_ARCHITECTURES, ArchConfig, check_architecture
from graphbench.errors import GraphbenchError

MAX_CONFIG_BYTES = 4 << 20  # a config.json is a few KB
# What a decoder of this family can have and still fit a machine (larger values are typos or attacks)
INT_FIELDS = {"hidden_size": 1 << 16, "intermediate_size": 1 << 20, "num_hidden_layers": 1024,
              "num_attention_heads": 1024, "num_key_value_heads": 1024, "head_dim": 1024, "vocab_size": 1 << 22,
              "max_position_embeddings": 1 << 24, "sliding_window": 1 << 24}
ROPE_TYPES = ("default", "linear", "llama3", "yarn", "dynamic")  # what runner/rope.py computes
ACTIVATIONS = ("silu",)  # the MLP computes silu(gate) * up
ACTIVATION_ALIASES = {"swish": "silu"}  # transformers' ACT2FN["swish"] is SiLU too
# transformers builds the model class of config.json's model_type (architectures is only a label)
MODEL_TYPES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "mistral": "MistralForCausalLM"}
# transformers' defaults for fields a config.json may leave out, where they differ by class
DEFAULT_KV_HEADS = {"MistralForCausalLM": 8, "Qwen2ForCausalLM": 32}  # Llama: one KV head per query head
DEFAULT_MAX_POSITIONS = {"LlamaForCausalLM": 2048, "Qwen2ForCausalLM": 32768, "MistralForCausalLM": 131072}
DEFAULT_SLIDING_WINDOW = 4096  # MistralConfig's and Qwen2Config's when the key is absent (null: none)
DEFAULT_RMS_NORM_EPS = 1e-6  # LlamaConfig, Qwen2Config and MistralConfig alike
QWEN2_MAX_WINDOW_LAYERS = 28  # Qwen2Config's default: layers from this index on use the sliding window


def arch_from_hf_dir(path: Path) -> ArchConfig:
    config_file = path / "config.json"
    if not config_file.is_file():
        raise GraphbenchError(f"checkpoint folder {path} has no config.json (or it is not a regular file)")
    if config_file.stat().st_size > MAX_CONFIG_BYTES:
        raise GraphbenchError(f"{config_file} is {config_file.stat().st_size} bytes: not a model config")
    try:
        raw = json.loads(config_file.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise GraphbenchError(f"{config_file} is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise GraphbenchError(f"{config_file} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    except RecursionError:
        raise GraphbenchError(f"{config_file} nests too deeply to be a model config") from None
    if not isinstance(raw, dict):
        raise GraphbenchError(f"{config_file} must hold a JSON object, got a {type(raw).__name__}")
    raw = dict(raw, architecture=_architecture(raw, config_file))
    return arch_from_dict(raw, source=str(path))


def _architecture(raw: dict[str, Any], config_file: Path) -> str:
    """The model class transformers would build: model_type's, once architectures (when given) names a
    supported class; a model_type of another family (qwen3 under a Llama label) is refused."""
    archs = raw.get("architectures") or []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise GraphbenchError(f"{config_file}: architectures must be a list of names, got {archs!r}")
    model_type = raw.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise GraphbenchError(f"{config_file}: model_type must be a name, got {model_type!r}")
    by_lower = {a.lower(): a for a in SUPPORTED_ARCHITECTURES}  # (early LLaMA exports: LLaMAForCausalLM)
    named = by_lower.get(archs[0].lower(), archs[0]) if archs else None
    if named is not None and named not in SUPPORTED_ARCHITECTURES:
        kind = f" (model_type {model_type!r})" if model_type else ""
        raise GraphbenchError(f"unsupported architecture {named!r}{kind} in {config_file}; graphbench supports "
                              f"{', '.join(SUPPORTED_ARCHITECTURES)}")
    if model_type is None:
        if named is None:
            raise GraphbenchError(f"{config_file} names no model: it lacks both architectures and model_type")
        return named
    if model_type not in MODEL_TYPES:
        raise GraphbenchError(f"unsupported model_type {model_type!r} in {config_file} (architectures: {named}); "
                              f"graphbench supports model_type {', '.join(MODEL_TYPES)}")
    return MODEL_TYPES[model_type]


def _int(raw: dict[str, Any], key: str, source: str, default: Any = None) -> int:
    value = default if raw.get(key) is None else raw[key]  # (a null field is an absent one)
    if value is None:
        raise GraphbenchError(f"model config {source} lacks the field {key!r}")
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= INT_FIELDS[key]:
        raise GraphbenchError(f"model config {source}: {key} must be an integer in 1..{INT_FIELDS[key]}, got {value!r}")
    return value


def _float(raw: dict[str, Any], key: str, source: str, default: float, below: float = math.inf) -> float:
    value = default if raw.get(key) is None else raw[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < below):
        limit = f"below {below:g}" if math.isfinite(below) else "finite"
        raise GraphbenchError(f"model config {source}: {key} must be a number > 0 and {limit}, got {value!r}")
    return float(value)


def arch_from_dict(raw: dict[str, Any], *, source: str) -> ArchConfig:
    """Read HF-style fields with transformers' meaning and defaults. Every field is checked for type and
    range, and what the engine cannot compute is refused (never run as a different model)."""
    arch = raw.get("architecture")
    check_architecture(arch, source)  # first: another family's config lacks or misnames the fields below
    act = raw.get("hidden_act") or raw.get("hidden_activation") or "silu"  # (null: transformers' default)
    if not isinstance(act, str) or ACTIVATION_ALIASES.get(act, act) not in ACTIVATIONS:
        raise GraphbenchError(f"model config {source}: hidden_act {act!r} is not supported (graphbench runs "
                              f"{', '.join(ACTIVATIONS)})")
    _refuse_unsupported(raw, arch, source)
    max_positions = _int(raw, "max_position_embeddings", source, default=DEFAULT_MAX_POSITIONS[arch])
    rope_theta, rope_scaling = _rope(raw, max_positions, source)
    heads = _int(raw, "num_attention_heads", source)
    hidden = _int(raw, "hidden_size", source)
    layers = _int(raw, "num_hidden_layers", source)
    window = _sliding_window(raw, arch, layers, source)
    return ArchConfig(
        architecture=arch,
        hidden_size=hidden,
        intermediate_size=_int(raw, "intermediate_size", source),
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=_int(raw, "num_key_value_heads", source, default=DEFAULT_KV_HEADS.get(arch, heads)),
        head_dim=_head_dim(raw, hidden, heads, source),
        vocab_size=_int(raw, "vocab_size", source),
        tie_word_embeddings=_bool(raw, "tie_word_embeddings", source, False),
        # Qwen2 always has q/k/v biases and Mistral never (transformers reads no field for either); a Llama
        # attention_bias (which would bias o_proj too) is refused by _refuse_unsupported
        attention_bias=arch == "Qwen2ForCausalLM",
        rope_theta=rope_theta,
        rope_scaling=rope_scaling,
        rms_norm_eps=_float(raw, "rms_norm_eps", source, DEFAULT_RMS_NORM_EPS, below=1.0),
        # full attention is sliding-window attention for sequences up to the window: cap the context there
        max_position_embeddings=min(max_positions, window or max_positions),
        sliding_window=window,
        source=source,
    )


def _refuse_unsupported(raw: dict[str, Any], arch: str, source: str) -> None:
    """Fields that change the math in ways the engine does not compute."""
    quant = raw.get("quantization_config")
    if quant:
        method = quant.get("quant_method") if isinstance(quant, dict) else quant
        raise GraphbenchError(f"model config {source}: quantization_config ({method!r}) is not supported "
                              "(graphbench runs unquantized weights)")
    if arch == "LlamaForCausalLM":  # (transformers reads these two for Llama only)
        if _bool(raw, "attention_bias", source, False):
            raise GraphbenchError(f"model config {source}: attention_bias true is not supported for {arch} "
                                  "(it puts a bias on o_proj too; graphbench biases only q, k and v)")
        if _bool(raw, "mlp_bias", source, False):
            raise GraphbenchError(f"model config {source}: mlp_bias true is not supported (graphbench's MLP has "
                                  "no biases)")
    rope = raw.get("rope_scaling") or raw.get("rope_parameters")
    for where in (raw, rope if isinstance(rope, dict) else {}):
        partial = where.get("partial_rotary_factor")
        if partial is not None and partial != 1:
            raise GraphbenchError(f"model config {source}: partial_rotary_factor {partial!r} is not supported "
                                  "(graphbench rotates the whole head)")


def _rope(raw: dict[str, Any], max_positions: int, source: str) -> tuple[float, dict[str, Any] | None]:
    """(rope_theta, the scaling runner/rope.py applies or None). transformers 5 nests rope_theta in
    rope_parameters; older configs use rope_scaling, which transformers prefers when both are there.
    max_positions: the model's max_position_embeddings (given or its class's default)."""
    rope = raw.get("rope_scaling") or raw.get("rope_parameters") or {}
    if not isinstance(rope, dict):
        raise GraphbenchError(f"model config {source}: rope_parameters / rope_scaling must be an object, got {rope!r}")
    if any(isinstance(value, dict) for value in rope.values()):
        raise GraphbenchError(f"model config {source}: rope_parameters per layer type (nested objects) are not "
                              "supported")
    rope = dict(rope)
    rope_theta = _float(rope if rope.get("rope_theta") is not None else raw, "rope_theta", source, 10000.0)
    rope.pop("rope_theta", None)
    rope_type = rope.get("rope_type") or rope.get("type") or "default"  # (a null rope_type is an absent one)
    if rope_type not in ROPE_TYPES:
        raise GraphbenchError(f"model config {source}: rope type {rope_type!r} is not supported "
                              f"(supported: {', '.join(ROPE_TYPES)})")
    for key, value in rope.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise GraphbenchError(f"model config {source}: rope {key} must be finite, got {value!r}")
    if rope_type in ("llama3", "yarn"):  # transformers: a top-level value first, the rope's, max_position_embeddings
        rope["original_max_position_embeddings"] = (raw.get("original_max_position_embeddings")
                                                    or rope.get("original_max_position_embeddings")
                                                    or max_positions)
    if rope_type == "yarn" and rope.get("factor") is None:  # transformers: the ratio of the two contexts
        original = rope["original_max_position_embeddings"]
        if isinstance(original, (int, float)) and not isinstance(original, bool) and original > 0:
            rope["factor"] = max_positions / original
    if rope_type == "dynamic":  # where transformers' dynamic NTK begins (runner/rope.py refuses a longer table)
        rope["max_position_embeddings"] = max_positions
    _check_rope_scaling(rope, rope_type, source)
    return rope_theta, (dict(rope, rope_type=rope_type) if rope_type != "default" else None)


def _head_dim(raw: dict[str, Any], hidden: int, heads: int, source: str) -> int:
    if raw.get("head_dim") is not None:
        return _int(raw, "head_dim", source)
    if hidden % heads:  # transformers refuses this too: the heads would not tile the hidden state
        raise GraphbenchError(f"model config {source}: hidden_size {hidden} is not a multiple of "
                              f"num_attention_heads {heads} and head_dim is not given")
    return _int({"head_dim": hidden // heads}, "head_dim", source)


def _sliding_window(raw: dict[str, Any], arch: str, layers: int, source: str) -> int | None:
    """The attention window transformers applies (None: full attention). Mistral slides on every layer
    when sliding_window is set; Qwen2 only with use_sliding_window, on the layers layer_types marks
    (or from max_window_layers on); Llama has no window."""
    if arch == "Qwen2ForCausalLM":
        if not (_bool(raw, "use_sliding_window", source, False) and _qwen2_slides(raw, layers, source)):
            return None
    elif arch != "MistralForCausalLM":
        return None
    if "sliding_window" not in raw:  # the class's default applies; an explicit null is no window
        return DEFAULT_SLIDING_WINDOW
    return None if raw["sliding_window"] is None else _int(raw, "sliding_window", source)


def _qwen2_slides(raw: dict[str, Any], layers: int, source: str) -> bool:
    types = raw.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            raise GraphbenchError(f"model config {source}: layer_types must be a list of names, got {types!r}")
        return "sliding_attention" in types
    first = QWEN2_MAX_WINDOW_LAYERS if raw.get("max_window_layers") is None else raw["max_window_layers"]
    if isinstance(first, bool) or not isinstance(first, int) or first < 0:
        raise GraphbenchError(f"model config {source}: max_window_layers must be an integer >= 0, got {first!r}")
    return first < layers


# What each rope scaling needs (runner/rope.py reads these): a missing, zero or non-numeric factor made
# the rotary tables NaN or raised inside them
ROPE_NEEDS = {"linear": ("factor",),
              "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
              "yarn": ("factor", "original_max_position_embeddings"), "dynamic": ("factor",)}
# numbers a scaling may give (null: its default); yarn's truncate is a bool
ROPE_OPTIONAL = {"yarn": ("attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim")}


def _check_rope_scaling(rope: dict[str, Any], rope_type: Any, source: str) -> None:
    for key in ROPE_NEEDS.get(rope_type, ()):
        value = rope.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise GraphbenchError(f"model config {source}: rope scaling {rope_type!r} needs {key} as a number > 0, "
                                  f"got {value!r}")
    for key in ROPE_OPTIONAL.get(rope_type, ()):
        value = rope.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            raise GraphbenchError(f"model config {source}: rope scaling {rope_type!r}: {key} must be a number > 0 or "
                                  f"null, got {value!r}")
    if rope_type == "yarn" and not isinstance(rope.get("truncate", True), bool):
        raise GraphbenchError(f"model config {source}: rope scaling 'yarn': truncate must be true or false, got "
                              f"{rope['truncate']!r}")
    if rope_type == "llama3" and rope["high_freq_factor"] <= rope["low_freq_factor"]:
        raise GraphbenchError(f"model config {source}: rope high_freq_factor ({rope['high_freq_factor']}) must be "
                              f"above low_freq_factor ({rope['low_freq_factor']})")


def _bool(raw: dict[str, Any], key: str, source: str, default: bool) -> bool:
    value = default if raw.get(key) is None else raw[key]
    if not isinstance(value, bool):
        raise GraphbenchError(f"model config {source}: {key} must be true or false, got {value!r}")
    return value
