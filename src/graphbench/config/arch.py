"""Model architecture: from a built-in preset (sample_configs/models/*.toml) or a checkpoint's config.json.

Pure Python (no torch): the CLI and the config hash read it without starting the engine.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from graphbench.config.tomlio import read_toml
from graphbench.config.validate import suggest
from graphbench.errors import GraphbenchError

PRESET_DIR = Path(__file__).resolve().parent.parent / "sample_configs" / "models"
SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM")


@dataclass(frozen=True, slots=True)
class ArchConfig:
    """The shape of a Llama-family decoder (HF config names)."""

    architecture: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool = False
    attention_bias: bool = False  # Qwen2: bias on q, k, v
    rope_theta: float = 10000.0
    rope_scaling: dict[str, Any] | None = field(default=None, hash=False)
    rms_norm_eps: float = 1e-5
    max_position_embeddings: int = 4096
    sliding_window: int | None = None
    source: str = ""  # preset name or folder; not a code factor

    def __post_init__(self) -> None:
        if self.architecture not in SUPPORTED_ARCHITECTURES:
            raise GraphbenchError(
                f"unsupported architecture {self.architecture!r} in {self.source or 'model config'}; "
                f"graphbench supports {', '.join(SUPPORTED_ARCHITECTURES)}"
            )
        for name in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                     "num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise GraphbenchError(f"model config field {name} must be a positive integer, got {value!r}")
        if self.head_dim % 2:  # rotary embedding turns pairs of dimensions
            raise GraphbenchError(f"head_dim must be even for rotary embedding, got {self.head_dim} in "
                                  f"{self.source or 'model config'} (hidden_size / num_attention_heads when not given)")
        if self.num_attention_heads % self.num_key_value_heads:
            raise GraphbenchError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )

    def code_factors(self) -> dict[str, Any]:
        """Everything but the source: two folders with the same shapes compile to the same code."""
        factors = asdict(self)
        factors.pop("source")
        return factors

    def num_params(self) -> int:
        """Parameter count (for weight-bytes and bandwidth-floor estimates)."""
        h, q, kv, d = self.hidden_size, self.num_attention_heads, self.num_key_value_heads, self.head_dim
        attn = h * (q + 2 * kv) * d + q * d * h + (((q + 2 * kv) * d) if self.attention_bias else 0)
        mlp = 3 * h * self.intermediate_size
        per_layer = attn + mlp + 2 * h
        embed = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return self.num_hidden_layers * per_layer + embed + h


def list_presets() -> list[str]:
    """Names of the built-in model presets."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def load_arch(model: str) -> ArchConfig:
    """Resolve a preset name or a checkpoint folder to its architecture (folders are read afresh)."""
    path = Path(model).expanduser()
    if path.is_dir():
        return _arch_from_hf_dir(path)
    if (PRESET_DIR / f"{model}.toml").is_file():
        return _load_preset(model)
    if path.exists() or "/" in model:
        raise GraphbenchError(f"model {model!r} is not a checkpoint folder (expected a folder with config.json)")
    raise GraphbenchError(
        f"unknown model {model!r}{suggest(model, list_presets())}; built-in presets: {', '.join(list_presets())}, "
        "or pass a checkpoint folder"
    )


def auto_dtype(model: str, device_type: str) -> str:
    """What --dtype auto means for this model on this device. On a GPU a checkpoint's own 16-bit dtype
    (config.json's dtype / torch_dtype), as vLLM keeps it; bfloat16 for float32 checkpoints and presets.
    On the CPU float32 (what the CPU path is tested and compiled in)."""
    if device_type != "cuda":
        return "float32"
    config = Path(model).expanduser() / "config.json"
    try:
        data = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else {}
    except (OSError, ValueError):
        data = {}  # (the architecture's own reading of the file says what is wrong with it)
    named = data.get("dtype", data.get("torch_dtype")) if isinstance(data, dict) else None
    return named if named in ("bfloat16", "float16") else "bfloat16"


@lru_cache(maxsize=None)
def _load_preset(name: str) -> ArchConfig:
    return _arch_from_dict(read_toml(PRESET_DIR / f"{name}.toml"), source=name)


MAX_CONFIG_BYTES = 4 << 20  # a config.json is a few KB
# What a decoder of this family can have and still fit a machine (larger values are typos or attacks)
INT_FIELDS = {"hidden_size": 1 << 16, "intermediate_size": 1 << 20, "num_hidden_layers": 1024,
              "num_attention_heads": 1024, "num_key_value_heads": 1024, "head_dim": 1024, "vocab_size": 1 << 22,
              "max_position_embeddings": 1 << 24}
ROPE_TYPES = ("default", "linear", "llama3")  # what runner/rope.py computes
ACTIVATIONS = ("silu",)  # the MLP computes silu(gate) * up


def _arch_from_hf_dir(path: Path) -> ArchConfig:
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
    archs = raw.get("architectures") or []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise GraphbenchError(f"{config_file}: architectures must be a list of names, got {archs!r}")
    raw = dict(raw, architecture=archs[0] if archs else raw.get("model_type", "?"))
    return _arch_from_dict(raw, source=str(path))


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


def _arch_from_dict(raw: dict[str, Any], *, source: str) -> ArchConfig:
    """Read HF-style fields; transformers 5 nests rope_theta in rope_parameters, older ones use rope_scaling.
    Every field is checked for type and range, and what the engine cannot compute is refused."""
    act = raw.get("hidden_act", raw.get("hidden_activation", "silu"))
    if act not in ACTIVATIONS:
        raise GraphbenchError(f"model config {source}: hidden_act {act!r} is not supported (graphbench runs "
                              f"{', '.join(ACTIVATIONS)})")
    rope = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
    if not isinstance(rope, dict):
        raise GraphbenchError(f"model config {source}: rope_parameters / rope_scaling must be an object, got {rope!r}")
    rope = dict(rope)
    theta_from = rope if "rope_theta" in rope else raw
    rope_theta = _float(theta_from, "rope_theta", source, 10000.0)
    rope.pop("rope_theta", None)
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type not in (*ROPE_TYPES, None):
        raise GraphbenchError(f"model config {source}: rope type {rope_type!r} is not supported "
                              f"(supported: {', '.join(ROPE_TYPES)})")
    for key, value in rope.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise GraphbenchError(f"model config {source}: rope {key} must be finite, got {value!r}")
    _check_rope_scaling(rope, rope_type, source)
    heads = _int(raw, "num_attention_heads", source)
    hidden = _int(raw, "hidden_size", source)
    arch = raw.get("architecture")
    window = raw.get("sliding_window") if raw.get("use_sliding_window") else None
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise GraphbenchError(f"model config {source}: sliding_window must be a positive integer, got {window!r}")
    return ArchConfig(
        architecture=arch if isinstance(arch, str) else repr(arch),
        hidden_size=hidden,
        intermediate_size=_int(raw, "intermediate_size", source),
        num_hidden_layers=_int(raw, "num_hidden_layers", source),
        num_attention_heads=heads,
        num_key_value_heads=_int(raw, "num_key_value_heads", source, default=raw.get("num_key_value_heads") or heads),
        head_dim=_int(raw, "head_dim", source, default=raw.get("head_dim") or max(1, hidden // heads)),
        vocab_size=_int(raw, "vocab_size", source),
        tie_word_embeddings=_bool(raw, "tie_word_embeddings", source, False),
        attention_bias=_bool(raw, "attention_bias", source, arch == "Qwen2ForCausalLM"),
        rope_theta=rope_theta,
        rope_scaling=rope if rope_type not in ("default", None) else None,
        rms_norm_eps=_float(raw, "rms_norm_eps", source, 1e-5, below=1.0),
        max_position_embeddings=_int(raw, "max_position_embeddings", source, default=4096),
        sliding_window=window,
        source=source,
    )


# What each rope scaling needs (runner/rope.py reads these): a missing, zero or non-numeric factor made
# the rotary tables NaN or raised inside them
ROPE_NEEDS = {"linear": ("factor",),
              "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")}


def _check_rope_scaling(rope: dict[str, Any], rope_type: Any, source: str) -> None:
    for key in ROPE_NEEDS.get(rope_type, ()):
        value = rope.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise GraphbenchError(f"model config {source}: rope scaling {rope_type!r} needs {key} as a number > 0, "
                                  f"got {value!r}")
    if rope_type == "llama3" and rope["high_freq_factor"] <= rope["low_freq_factor"]:
        raise GraphbenchError(f"model config {source}: rope high_freq_factor ({rope['high_freq_factor']}) must be "
                              f"above low_freq_factor ({rope['low_freq_factor']})")


def _bool(raw: dict[str, Any], key: str, source: str, default: bool) -> bool:
    value = default if raw.get(key) is None else raw[key]
    if not isinstance(value, bool):
        raise GraphbenchError(f"model config {source}: {key} must be true or false, got {value!r}")
    return value
