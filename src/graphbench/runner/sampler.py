"""Token sampling: greedy, or temperature + top-p, per request, without host synchronisation."""

from __future__ import annotations

import torch

from graphbench.errors import GraphbenchError
from graphbench.runner.kernels.util import NAN_MARK, triton_interpreting


def greedy(logits: torch.Tensor, out: torch.Tensor | None = None,  # [R, V] float -> [R] int64
           marked: torch.Tensor | None = None, workspace=None) -> torch.Tensor:
    """argmax per row (ties: the first index), into `out` ([R] int64, contiguous) when given; `marked` gets
    the ids + NAN_MARK for rows holding a NaN (what the host reads: mark_nan_rows). On the GPU, for a large
    vocabulary, two Triton launches with a program per chunk of the row (runner/kernels/argmax.py):
    PyTorch's one block per row is slow there; workspace: their buffers where a recording must own them."""
    if triton_argmax_applies(logits.device, logits.shape[-1]) and logits.stride(-1) == 1:
        from graphbench.runner.kernels.argmax import triton_argmax

        return triton_argmax(logits, out, marked, workspace)
    ids = logits.argmax(dim=-1) if out is None else torch.argmax(logits, dim=-1, out=out)
    if marked is not None:
        mark_nan_rows(logits, ids, marked)
    return ids


def raise_nan_logits(requests: list) -> None:
    """A NaN in the logits is an error, never a token: which requests, and what usually causes it."""
    ids = ", ".join(str(r.request_id) for r in requests[:8]) + (" ..." if len(requests) > 8 else "")
    raise GraphbenchError(f"the model's logits hold a NaN{f' for request(s) {ids}' if ids else ''}: no token was "
                          "sampled. Usually "
                          "weights that are NaN or overflow the dtype (try --dtype float32) or a config whose "
                          "shapes do not match the checkpoint")


def mark_nan_rows(logits: torch.Tensor, ids: torch.Tensor, marked: torch.Tensor) -> None:
    """marked = ids, + NAN_MARK where the row of logits holds a NaN (no host synchronisation)."""
    torch.add(ids, logits.isnan().any(dim=-1).to(torch.int64), alpha=NAN_MARK, out=marked)


MIN_TRITON_VOCAB = 8192


def triton_argmax_applies(device: torch.device, vocab: int) -> bool:
    """Whether the greedy pick of contiguous logits on `device` runs runner/kernels/argmax.py's kernels."""
    return (device.type == "cuda" or triton_interpreting()) and vocab >= MIN_TRITON_VOCAB


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
    # a row holding a NaN draws from finite logits (multinomial rejects NaN); the caller marks it (mark_nan_rows)
    logits = logits.nan_to_num(nan=0.0)
    sorted_probs, sorted_ids = _sorted_nucleus(logits, temperatures, top_ps)
    choice = torch.multinomial(sorted_probs, 1, generator=generator).squeeze(-1)
    sampled = sorted_ids.gather(-1, choice[:, None]).squeeze(-1)
    return torch.where(temperatures > 0, sampled, greedy_ids)
