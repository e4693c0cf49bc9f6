"""Model architecture: from a built-in preset (sample_configs/models/*.toml) or a checkpoint's config.json.

Pure Python (no torch): the CLI and the config hash read it without starting the engine.
"""

from __future__ import annotations

import json
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
        if self.num_attention_heads % self.num_key_value_heads:
            raise GraphbenchError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )

    @property
    def is_preset(self) -> bool:
        return not Path(self.source).is_dir()

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


@lru_cache(maxsize=None)
def _load_preset(name: str) -> ArchConfig:
    return _arch_from_dict(read_toml(PRESET_DIR / f"{name}.toml"), source=name)


def _arch_from_hf_dir(path: Path) -> ArchConfig:
    config_file = path / "config.json"
    if not config_file.is_file():
        raise GraphbenchError(f"checkpoint folder {path} has no config.json")
    try:
        raw = json.loads(config_file.read_text())
    except json.JSONDecodeError as exc:
        raise GraphbenchError(f"{config_file} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    archs = raw.get("architectures") or []
    raw = dict(raw, architecture=archs[0] if archs else raw.get("model_type", "?"))
    return _arch_from_dict(raw, source=str(path))


def _arch_from_dict(raw: dict[str, Any], *, source: str) -> ArchConfig:
    """Read HF-style fields; transformers 5 nests rope_theta in rope_parameters, older ones use rope_scaling."""
    try:
        heads = int(raw["num_attention_heads"])
        hidden = int(raw["hidden_size"])
        rope = dict(raw.get("rope_parameters") or raw.get("rope_scaling") or {})
        rope_theta = float(rope.pop("rope_theta", raw.get("rope_theta", 10000.0)))
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        arch = raw["architecture"]
        return ArchConfig(
            architecture=arch,
            hidden_size=hidden,
            intermediate_size=int(raw["intermediate_size"]),
            num_hidden_layers=int(raw["num_hidden_layers"]),
            num_attention_heads=heads,
            num_key_value_heads=int(raw.get("num_key_value_heads") or heads),
            head_dim=int(raw.get("head_dim") or hidden // heads),
            vocab_size=int(raw["vocab_size"]),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            attention_bias=bool(raw.get("attention_bias", arch == "Qwen2ForCausalLM")),
            rope_theta=rope_theta,
            rope_scaling=rope if rope_type not in ("default", None) else None,
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-5)),
            max_position_embeddings=int(raw.get("max_position_embeddings", 4096)),
            sliding_window=raw.get("sliding_window") if raw.get("use_sliding_window") else None,
            source=source,
        )
    except KeyError as exc:
        raise GraphbenchError(f"model config {source} lacks the field {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise GraphbenchError(f"model config {source} has a bad value: {exc}") from None
