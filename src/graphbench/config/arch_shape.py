"""The shape of a Llama-family decoder, as HF config names it, checked on construction (pure Python)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from graphbench.errors import GraphbenchError

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
        check_architecture(self.architecture, self.source)
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
                f"num_key_value_heads ({self.num_key_value_heads}) in {self.source or 'model config'}"
            )
        window = self.sliding_window
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
            raise GraphbenchError(f"sliding_window must be a positive integer, got {window!r} in "
                                  f"{self.source or 'model config'}")

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


def check_architecture(arch: Any, source: str) -> None:
    if arch not in SUPPORTED_ARCHITECTURES:
        raise GraphbenchError(f"unsupported architecture {arch!r} in {source or 'model config'}; "
                              f"graphbench supports {', '.join(SUPPORTED_ARCHITECTURES)}")
