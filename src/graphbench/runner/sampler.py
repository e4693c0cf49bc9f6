"""Token sampling: greedy, or temperature + top-p, per request, without host synchronisation."""

from __future__ import annotations

import torch

from graphbench.runner.kernels.util import triton_interpreting


def greedy(logits: torch.Tensor) -> torch.Tensor:  # [R, V] any float dtype -> [R] int64
    """argmax per row (ties: the first index). On the GPU, for a large vocabulary, two Triton launches
    with a program per chunk of the row (runner/kernels/argmax.py): PyTorch's one block per row is slow there."""
    if (logits.is_cuda or triton_interpreting()) and logits.shape[-1] >= MIN_TRITON_VOCAB and logits.stride(-1) == 1:
        from graphbench.runner.kernels.argmax import triton_argmax

        return triton_argmax(logits)
    return logits.argmax(dim=-1)


MIN_TRITON_VOCAB = 8192


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
    safe_temp = torch.where(temperatures > 0, temperatures, torch.ones_like(temperatures))
    probs = (logits / safe_temp[:, None]).softmax(dim=-1)
    sorted_probs, sorted_ids = probs.sort(dim=-1, descending=True)
    cumulative = sorted_probs.cumsum(dim=-1)
    # keep the smallest prefix whose mass reaches top_p (the first token always stays)
    drop = (cumulative - sorted_probs) >= top_ps[:, None]
    sorted_probs = sorted_probs.masked_fill(drop, 0.0)
    choice = torch.multinomial(sorted_probs, 1, generator=generator).squeeze(-1)
    sampled = sorted_ids.gather(-1, choice[:, None]).squeeze(-1)
    return torch.where(temperatures > 0, sampled, greedy_ids)
