"""Drafters: what each decoding request proposes for the next k positions (pure Python, no torch).

- NgramDrafter (prompt lookup, vLLM's "ngram" method): the longest suffix of the request's tokens,
  between min_n and max_n tokens long, that occurred earlier in the same request; it proposes the
  tokens that followed the most recent earlier occurrence. An index per request (n-gram -> where
  its last occurrence ended) is updated as tokens arrive, so a step costs O(max_n^2) a request,
  not a scan of the whole sequence.
- ReplayDrafter: the tokens an earlier greedy run of the same prompt produced (`remember`), each
  corrupted with probability 1 - acceptance (seeded, so a run is repeatable). A measurement tool:
  the machinery at a known acceptance.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class _NgramIndex:
    tokens: list[int] = field(default_factory=list)
    last_end: dict[tuple[int, ...], int] = field(default_factory=dict)  # n-gram -> end index of its latest occurrence
    indexed: int = 0  # n-grams ending before this index are in last_end


class NgramDrafter:
    def __init__(self, min_n: int, max_n: int):
        self.min_n, self.max_n = min_n, max_n
        self._index: dict[int, _NgramIndex] = {}

    def propose(self, request_id: int, token_ids: list[int], k: int) -> list[int]:
        """Up to k tokens that followed the longest earlier match of the sequence's suffix."""
        index = self._index.setdefault(request_id, _NgramIndex())
        tokens = index.tokens
        if token_ids[: len(tokens)] != tokens:
            index = self._index[request_id] = _NgramIndex()  # not the sequence indexed so far: start over
            tokens = index.tokens
        tokens.extend(token_ids[len(tokens):])
        end = len(tokens) - 1  # the suffix ends here; index every n-gram that ends before it
        for stop in range(index.indexed, end):
            for n in range(self.min_n, self.max_n + 1):
                if stop - n + 1 >= 0:
                    index.last_end[tuple(tokens[stop - n + 1: stop + 1])] = stop
        index.indexed = max(index.indexed, end)
        for n in range(self.max_n, self.min_n - 1, -1):
            if end - n + 1 < 0:
                continue
            match = index.last_end.get(tuple(tokens[end - n + 1: end + 1]))
            if match is not None:
                return tokens[match + 1: match + 1 + k]
        return []

    def forget(self, request_id: int) -> None:
        self._index.pop(request_id, None)


class ReplayDrafter:
    def __init__(self, acceptance: float, vocab_size: int, seed: int = 0):
        self.acceptance, self.vocab_size, self.seed = acceptance, vocab_size, seed
        self._outputs: dict[tuple[int, ...], list[int]] = {}

    def remember(self, prompt_token_ids: list[int], output_token_ids: list[int]) -> None:
        """The tokens a greedy run produced for this prompt: what later runs of it are proposed."""
        self._outputs[tuple(prompt_token_ids)] = list(output_token_ids)

    def propose(self, prompt_token_ids: list[int], num_output_tokens: int, k: int) -> list[int]:
        """The next k tokens of the reference after num_output_tokens, each kept with probability acceptance."""
        reference = self._outputs.get(tuple(prompt_token_ids))
        if reference is None:
            return []
        proposal = reference[num_output_tokens: num_output_tokens + k]
        if self.acceptance >= 1.0:
            return proposal
        out = []
        for offset, token in enumerate(proposal):
            # one draw per (prompt, position): the same run corrupts the same proposals
            rng = random.Random(hash((self.seed, len(prompt_token_ids), prompt_token_ids[-1], num_output_tokens + offset)))
            out.append(token if rng.random() < self.acceptance else (token + 1) % self.vocab_size)
        return out
