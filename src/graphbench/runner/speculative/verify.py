"""Verification of drafted tokens against the target model's distributions.

For a request with drafts x_1..x_d the step computed logits at d + 1 positions: row i is the
target distribution p_i for the token after input i (input 0 is the last accepted token, inputs
1..d the drafts). Greedy requests accept the longest prefix with x_{i+1} == argmax p_i, then add
argmax at the first mismatch (or after the last draft: the bonus token). Requests with a
temperature use rejection sampling as vLLM's rejection sampler does for drafters without draft
probabilities (q is one-hot on the proposal): x_{i+1} is accepted with probability p_i(x_{i+1});
on the first rejection the token is drawn from p_i without x_{i+1} (renormalised), and after d
acceptances the bonus is drawn from p_d. Every request's output is then exactly distributed as
sampling from the target alone. Greedy rows are the one-hot case of the same rule.
"""

from __future__ import annotations

import torch

from graphbench.runner.sampler import greedy, probabilities, raise_nan_logits


def verify(
    logits: torch.Tensor,  # [N, V] float32: every request's rows, in batch order
    drafts: list[list[int]],  # per request its d drafts (rows = d + 1)
    temperatures: list[float],
    top_ps: list[float],
    generator: torch.Generator | None,
) -> list[list[int]]:
    """Per request the tokens it gains this step: the accepted drafts, then one more."""
    if bool(logits.isnan().any()):  # (this step waits for its tokens anyway)
        raise_nan_logits([])
    if all(t == 0 for t in temperatures):
        return accept_greedy(greedy(logits).tolist(), drafts)
    device = logits.device
    rows_per_req = [len(d) + 1 for d in drafts]
    temps = torch.tensor(temperatures, dtype=torch.float32, device=device).repeat_interleave(
        torch.tensor(rows_per_req, device=device))
    tops = torch.tensor(top_ps, dtype=torch.float32, device=device).repeat_interleave(
        torch.tensor(rows_per_req, device=device))
    probs = probabilities(logits, temps, tops)  # [N, V]; one-hot at the argmax where the temperature is 0
    # the draft each row judges (the next input); the last row of a request judges none
    judged = torch.tensor([t for d in drafts for t in (*d, 0)], dtype=torch.int64, device=device)
    p_draft = probs.gather(1, judged[:, None]).squeeze(1)  # [N]
    u = torch.rand(len(judged), generator=generator, device=device)
    accepted = (u < p_draft).tolist()
    residual = probs.scatter(1, judged[:, None], 0.0)
    empty = residual.sum(dim=1, keepdim=True) <= 0  # p put all its mass on the draft: never rejected
    residual = torch.where(empty, probs, residual)
    recovered = torch.multinomial(residual, 1, generator=generator).squeeze(1).tolist()
    bonus = torch.multinomial(probs, 1, generator=generator).squeeze(1).tolist()
    out, row = [], 0
    for d in drafts:
        tokens = []
        for i, token in enumerate(d):
            if not accepted[row + i]:
                tokens.append(recovered[row + i])
                break
            tokens.append(token)
        else:
            tokens.append(bonus[row + len(d)])
        out.append(tokens)
        row += len(d) + 1
    return out


def accept_greedy(targets: list[int], drafts: list[list[int]]) -> list[list[int]]:
    """targets: argmax of every row in batch order. Accept while the draft equals the target."""
    out, row = [], 0
    for d in drafts:
        tokens = []
        for i, token in enumerate(d):
            tokens.append(targets[row + i])
            if token != targets[row + i]:
                break
        else:
            tokens.append(targets[row + len(d)])
        out.append(tokens)
        row += len(d) + 1
    return out
