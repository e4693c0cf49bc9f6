"""Token sampling: greedy, or temperature + top-p, per request, without host synchronisation."""

from __future__ import annotations

import torch

from graphbench.runner.kernels.util import triton_interpreting


def greedy(logits: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:  # [R, V] float -> [R] int64
    """argmax per row (ties: the first index), into `out` ([R] int64, contiguous) when given. On the GPU, for
    a large vocabulary, two Triton launches with a program per chunk of the row (runner/kernels/argmax.py):
    PyTorch's one block per row is slow there."""
    if (logits.is_cuda or triton_interpreting()) and logits.shape[-1] >= MIN_TRITON_VOCAB and logits.stride(-1) == 1:
        from graphbench.runner.kernels.argmax import triton_argmax

        return triton_argmax(logits, out)
    return logits.argmax(dim=-1) if out is None else torch.argmax(logits, dim=-1, out=out)


MIN_TRITON_VOCAB = 8192


def _sorted_nucleus(logits: torch.Tensor, temperatures: torch.Tensor, top_ps: torch.Tensor):
    """softmax(logits / T) sorted descending, zero past the top-p nucleus; and the sorted token ids."""
    safe_temp = torch.where(temperatures > 0, temperatures, torch.ones_like(temperatures))
    probs = (logits / safe_temp[:, None]).softmax(dim=-1)
    sorted_probs, sorted_ids = probs.sort(dim=-1, descending=True)
    cumulative = sorted_probs.cumsum(dim=-1)
    # keep the smallest prefix whose mass reaches top_p (the first token always stays)
    drop = (cumulative - sorted_probs) >= top_ps[:, None]
    return sorted_probs.masked_fill(drop, 0.0), sorted_ids


def probabilities(
    logits: torch.Tensor,  # [R, V] float32
    temperatures: torch.Tensor,  # [R] float32, 0 = greedy
    top_ps: torch.Tensor,  # [R] float32
) -> torch.Tensor:  # [R, V]: the distribution `sample` draws from (one-hot at the argmax where T = 0)
    sorted_probs, sorted_ids = _sorted_nucleus(logits, temperatures, top_ps)
    nucleus = torch.zeros_like(sorted_probs).scatter(-1, sorted_ids, sorted_probs)
    nucleus = nucleus / nucleus.sum(dim=-1, keepdim=True)
    one_hot = torch.zeros_like(nucleus).scatter(-1, greedy(logits)[:, None], 1.0)
    return torch.where(temperatures[:, None] > 0, nucleus, one_hot)


def sample(
    logits: torch.Tensor,  # [R, V] float32
    temperatures: torch.Tensor,  # [R] float32, 0 = greedy
    top_ps: torch.Tensor,  # [R] float32
    generator: torch.Generator | None,
    all_greedy: bool,
) -> torch.Tensor:  # [R] int64
    greedy_ids = greedy(logits)
    if all_greedy:
        return greedy_ids
    sorted_probs, sorted_ids = _sorted_nucleus(logits, temperatures, top_ps)
    choice = torch.multinomial(sorted_probs, 1, generator=generator).squeeze(-1)
    sampled = sorted_ids.gather(-1, choice[:, None]).squeeze(-1)
    return torch.where(temperatures > 0, sampled, greedy_ids)
