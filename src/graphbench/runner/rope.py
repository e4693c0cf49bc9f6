"""Rotary position embedding (neox / rotate-half layout, as HF Llama and Qwen2), with the scalings transformers
computes the same for every position: linear, llama3, yarn, and dynamic NTK up to max_position_embeddings (where
transformers' dynamic scaling has not begun; past it, it rescales by the longest sequence of each forward)."""

from __future__ import annotations

import math
from typing import Any

import torch

from graphbench.errors import GraphbenchError


def inverse_frequencies(head_dim: int, theta: float, scaling: dict[str, Any] | None,
                        max_positions: int = 0) -> tuple[torch.Tensor, float]:
    """(inv_freq[head_dim // 2] in float32 with the configured scaling, the factor on cos and sin) for a
    table of max_positions positions."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    kind = scaling.get("rope_type", scaling.get("type", "default")) if scaling else "default"
    if kind == "default":
        return inv_freq, 1.0
    if kind == "linear":
        return inv_freq / float(scaling["factor"]), 1.0
    if kind == "llama3":
        return _llama3_scaled(inv_freq, scaling), 1.0
    if kind == "yarn":
        return _yarn_scaled(inv_freq, head_dim, theta, scaling), _yarn_attention_factor(scaling)
    if kind == "dynamic":
        if max_positions > scaling["max_position_embeddings"]:
            raise GraphbenchError(
                f"rope scaling 'dynamic' past max_position_embeddings {scaling['max_position_embeddings']} (a "
                f"context of {max_positions}): transformers rescales it by each forward's longest sequence, so "
                "one request's positions would depend on the others in its batch. Keep --max-model-len at or "
                "below max_position_embeddings")
        return inv_freq, 1.0  # below max_position_embeddings transformers' dynamic NTK is the plain rope
    raise GraphbenchError(f"unsupported rope scaling {kind!r} (supported: default, linear, llama3, yarn, dynamic)")


def _yarn_scaled(inv_freq: torch.Tensor, head_dim: int, theta: float, scaling: dict[str, Any]) -> torch.Tensor:
    """YaRN (arXiv 2309.00071): each frequency between the interpolated (inv_freq / factor) and the original,
    by a linear ramp over the dimensions whose wavelengths fit between beta_fast and beta_slow rotations of
    the original context; as transformers' yarn computes it."""
    factor = float(scaling["factor"])
    context = float(scaling["original_max_position_embeddings"])

    def dimension(rotations: float) -> float:  # the dimension whose wavelength turns `rotations` times in context
        return head_dim * math.log(context / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = dimension(float(scaling.get("beta_fast") or 32)), dimension(float(scaling.get("beta_slow") or 1))
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001  # (transformers' guard against a zero-width ramp)
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    return inv_freq / factor * ramp + inv_freq * (1 - ramp)


def _yarn_attention_factor(scaling: dict[str, Any]) -> float:
    """YaRN's factor on cos and sin: attention_factor if given, else 0.1 ln(factor) + 1 (with mscale and
    mscale_all_dim, as DeepSeek's configs give them, the ratio of the two such terms)."""
    if scaling.get("attention_factor") is not None:
        return float(scaling["attention_factor"])
    factor = float(scaling["factor"])

    def mscale(scale: float) -> float:
        return 1.0 if factor <= 1 else 0.1 * scale * math.log(factor) + 1.0

    if scaling.get("mscale") and scaling.get("mscale_all_dim"):
        return mscale(float(scaling["mscale"])) / mscale(float(scaling["mscale_all_dim"]))
    return mscale(1.0)


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
        inv_freq, attention_factor = inverse_frequencies(head_dim, theta, scaling, max_positions)
        freqs = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv_freq)
        # [max_positions, 1, head_dim]: cos of each half, then sin of each half. Computed in float32 (times
        # yarn's attention factor) and stored in the model dtype, as transformers does before applying it.
        cos_sin = torch.cat([freqs.cos(), freqs.sin()], dim=-1).unsqueeze(1) * attention_factor
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
