"""Token sampling: greedy, or temperature + top-p, per request, without host synchronisation."""

from __future__ import annotations

import functools

import torch


def greedy(logits: torch.Tensor) -> torch.Tensor:  # [R, V] any float dtype -> [R] int64
    """argmax per row, in two stages for a large vocabulary: one row's argmax is one thread block in
    PyTorch (28 us for 128k logits on an H200); a max over chunks, then over the chunk maxima, is a few us.
    Ties resolve to the first index, as argmax does."""
    num_rows, vocab = logits.shape
    num_chunks = _num_chunks(vocab)
    if num_chunks == 1:
        return logits.argmax(dim=-1)
    values, inner = logits.view(num_rows, num_chunks, vocab // num_chunks).max(dim=-1)  # [R, C]
    chunk = values.argmax(dim=-1, keepdim=True)  # [R, 1]
    return (chunk * (vocab // num_chunks) + inner.gather(-1, chunk)).squeeze(-1)


@functools.cache  # called every decode step: the search runs once per vocabulary size
def _num_chunks(vocab: int) -> int:
    """The largest divisor of vocab in [64, 1024] whose chunks hold >= 128 logits, else 1 (plain argmax)."""
    if vocab < 64 * 128:
        return 1
    return next((c for c in range(min(1024, vocab // 128), 63, -1) if vocab % c == 0), 1)


def sample(
    logits: torch.Tensor,  # [R, V] float32
    temperatures: torch.Tensor,  # [R] float32, 0 = greedy
    top_ps: torch.Tensor,  # [R] float32
    generator: torch.Generator | None,
    all_greedy: bool,
) -> torch.Tensor:  # [R] int64
    greedy = logits.argmax(dim=-1)
    if all_greedy:
        return greedy
    safe_temp = torch.where(temperatures > 0, temperatures, torch.ones_like(temperatures))
    probs = (logits / safe_temp[:, None]).softmax(dim=-1)
    sorted_probs, sorted_ids = probs.sort(dim=-1, descending=True)
    cumulative = sorted_probs.cumsum(dim=-1)
    # keep the smallest prefix whose mass reaches top_p (the first token always stays)
    drop = (cumulative - sorted_probs) >= top_ps[:, None]
    sorted_probs = sorted_probs.masked_fill(drop, 0.0)
    choice = torch.multinomial(sorted_probs, 1, generator=generator).squeeze(-1)
    sampled = sorted_ids.gather(-1, choice[:, None]).squeeze(-1)
    return torch.where(temperatures > 0, sampled, greedy)
