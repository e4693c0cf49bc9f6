"""Rotary position embedding (neox / rotate-half layout, as HF Llama and Qwen2), incl. Llama-3 scaling."""

from __future__ import annotations

import math
from typing import Any

import torch

from graphbench.errors import GraphbenchError


def inverse_frequencies(head_dim: int, theta: float, scaling: dict[str, Any] | None) -> torch.Tensor:
    """inv_freq[head_dim // 2] in float32, with 'linear' or 'llama3' scaling applied when configured."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    if not scaling:
        return inv_freq
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "linear":
        return inv_freq / float(scaling["factor"])
    if kind == "llama3":
        return _llama3_scaled(inv_freq, scaling)
    raise GraphbenchError(f"unsupported rope scaling {kind!r} (supported: default, linear, llama3)")


def _llama3_scaled(inv_freq: torch.Tensor, scaling: dict[str, Any]) -> torch.Tensor:
    factor = float(scaling["factor"])
    low_freq_factor = float(scaling["low_freq_factor"])
    high_freq_factor = float(scaling["high_freq_factor"])
    old_context_len = float(scaling["original_max_position_embeddings"])
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


class RotaryEmbedding(torch.nn.Module):
    """The RoPE table of a model (its buffer cos_sin), which the attention op applies (apply_rotary,
    rotate_qk, or inside the Triton decode kernel)."""

    def __init__(self, head_dim: int, max_positions: int, theta: float, scaling: dict[str, Any] | None):
        super().__init__()
        self.head_dim = head_dim
        inv_freq = inverse_frequencies(head_dim, theta, scaling)
        freqs = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv_freq)
        # [max_positions, 1, head_dim]: cos of each half, then sin of each half. Computed in float32
        # and stored in the model dtype, as transformers does before applying it.
        cos_sin = torch.cat([freqs.cos(), freqs.sin()], dim=-1).unsqueeze(1)
        self.register_buffer("cos_sin", cos_sin.to(torch.get_default_dtype()), persistent=False)


def apply_rotary(x: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor) -> torch.Tensor:
    """x[T, heads, hd] -> x rotated at positions[T] (cos_sin: RotaryEmbedding's table), in torch ops."""
    cos, sin = cos_sin[positions].chunk(2, dim=-1)  # [T, 1, hd/2] each
    x1, x2 = x.chunk(2, dim=-1)  # [T, heads, hd/2] each
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def rotate_qk(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
              cos_sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, k) [T, heads, hd] rotated: one Triton launch on the GPU (runner/kernels/rotary.py), torch ops
    elsewhere."""
    if q.is_cuda and q.stride(-1) == 1 and k.stride(-1) == 1:
        from graphbench.runner.kernels.rotary import rotary_qk

        return rotary_qk(q, k, positions, cos_sin)
    return apply_rotary(q, positions, cos_sin), apply_rotary(k, positions, cos_sin)
