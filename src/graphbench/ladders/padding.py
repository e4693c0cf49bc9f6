"""Padding a batch up to the next captured size, and what that costs on average (docs/MACHINERY.md §1.5).

A batch of ``n`` tokens runs the graph of the smallest captured size ``>= n`` (bisect on the
ladder); above the top rung it runs eager, unpadded. The waste of a padded batch is
``(pad(n) - n) / pad(n)``: the fraction of the graph's work spent on padding.

Averages are taken over a batch-size distribution; by default every size in ``1..top`` (or
``1..max_size``) is equally likely. Eager batches count as zero waste. `average_waste` weighs every
step alike; `token_waste` weighs each by its padded tokens (the share of all the tokens the graphs
computed that were padding: what the result files record as `padding_token_pct`). Pure Python, no torch.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence

from graphbench.errors import GraphbenchError
from graphbench.ladders.distributions import BatchSizeDistribution, as_distribution
from graphbench.ladders.sizes import Ladder


def pad_to(sizes: Sequence[int] | Ladder, n: int) -> int | None:
    """The smallest captured size >= n, or None when n is above the top rung (eager)."""
    rungs = _check_ladder(sizes)
    _check_batch(n)
    return _pad(rungs, n)


def waste(sizes: Sequence[int] | Ladder, n: int) -> float | None:
    """Fraction of the padded batch that is padding, (pad - n) / pad; None when n runs eager."""
    padded = pad_to(sizes, n)
    return None if padded is None else (padded - n) / padded


def padding_tokens(sizes: Sequence[int] | Ladder, distribution: Mapping[int, float]) -> float:
    """Expected padding tokens per step, sum of p * (pad - n); eager batches count zero. (The ladder is
    checked once: tuning evaluates ladders over tens of thousands of sizes.)"""
    rungs, dist = _distribution(sizes, distribution, None)
    return math.fsum(p * (padded - n) for n, p in dist.items() if (padded := _pad(rungs, n)) is not None)


def average_waste(
    sizes: Sequence[int] | Ladder,
    distribution: Mapping[int, float] | None = None,
    max_size: int | None = None,
) -> float:
    """Expected waste fraction over batch sizes; eager batches count zero.

    Without a distribution every size in 1..max_size is equally likely (max_size defaults to the
    ladder's top rung). Give a distribution or max_size, not both.
    """
    rungs, dist = _distribution(sizes, distribution, max_size)
    total = []
    for n, p in dist.items():
        padded = _pad(rungs, n)
        if padded is not None:
            total.append(p * (padded - n) / padded)
    return math.fsum(total)


def eager_fraction(
    sizes: Sequence[int] | Ladder,
    distribution: Mapping[int, float] | None = None,
    max_size: int | None = None,
) -> float:
    """Probability that a batch is above the top rung and runs without a graph."""
    rungs, dist = _distribution(sizes, distribution, max_size)
    top = rungs[-1] if rungs else 0
    return math.fsum(p for n, p in dist.items() if n > top)


def padding_overhead(
    sizes: Sequence[int] | Ladder,
    distribution: Mapping[int, float] | None = None,
    max_size: int | None = None,
) -> float:
    """Expected padded tokens / expected real tokens (>= 1; eager batches are not padded)."""
    rungs, dist = _distribution(sizes, distribution, max_size)
    padded = math.fsum(p * (_pad(rungs, n) or n) for n, p in dist.items())
    real = math.fsum(p * n for n, p in dist.items())
    return padded / real


def token_waste(
    sizes: Sequence[int] | Ladder,
    distribution: Mapping[int, float] | None = None,
    max_size: int | None = None,
) -> float:
    """Share of the padded tokens that are padding: sum p * (pad(n) - n) / sum p * pad(n).

    Eager batches count pad(n) = n (they compute no padding, but their tokens are in the total). A
    histogram of step counts works as the distribution (only the proportions matter). Equals
    1 - 1 / padding_overhead; e.g. {9: 3, 16: 1} over [8, 16]: 21 padded of 64 tokens, 32.8%.
    """
    rungs, dist = _distribution(sizes, distribution, max_size)
    padded = [(p, _pad(rungs, n) or n, n) for n, p in dist.items()]
    return math.fsum(p * (pad - n) for p, pad, n in padded) / math.fsum(p * pad for p, pad, _ in padded)


def _pad(sizes: Sequence[int], n: int) -> int | None:
    i = bisect.bisect_left(sizes, n)
    return sizes[i] if i < len(sizes) else None


def _distribution(
    sizes: Sequence[int] | Ladder, distribution: Mapping[int, float] | None, max_size: int | None
) -> tuple[tuple[int, ...], BatchSizeDistribution]:
    rungs = _check_ladder(sizes)
    if distribution is not None and max_size is not None:
        raise GraphbenchError("give either a distribution or max_size, not both")
    if max_size is not None:
        _check_batch(max_size, "max_size")
    default_max = max_size if max_size is not None else (rungs[-1] if rungs else None)
    return rungs, as_distribution(distribution, default_max)


def _check_ladder(sizes: Sequence[int] | Ladder) -> tuple[int, ...]:
    """The rungs as a tuple; a Ladder is accepted for its sizes."""
    rungs = tuple(sizes.sizes if isinstance(sizes, Ladder) else sizes)
    prev = 0
    for s in rungs:
        if isinstance(s, bool) or not isinstance(s, int) or s <= 0:
            raise GraphbenchError(f"capture sizes must be positive integers, got {s!r}")
        if s <= prev:
            raise GraphbenchError(f"capture sizes must be sorted ascending without duplicates, got {list(rungs)}")
        prev = s
    return rungs


def _check_batch(n: int, name: str = "batch size") -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise GraphbenchError(f"{name} must be a positive integer, got {n!r}")
