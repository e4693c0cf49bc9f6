"""Input checks of ladder tuning: the objective, positive integers, the batch-size distribution,
rounding up to a multiple. Pure Python; no torch."""

from __future__ import annotations

from collections.abc import Mapping

from graphbench.errors import GraphbenchError
from graphbench.ladders.distributions import BatchSizeDistribution

OBJECTIVES = ("tokens", "waste")


def as_dist(distribution: Mapping[int, float]) -> BatchSizeDistribution:
    """A BatchSizeDistribution as it is, a mapping size -> weight as one."""
    if isinstance(distribution, BatchSizeDistribution):
        return distribution
    if not isinstance(distribution, Mapping):
        raise GraphbenchError(f"a batch-size distribution must be a mapping size -> weight, got {distribution!r}")
    return BatchSizeDistribution(distribution)


def check_objective(objective: str) -> None:
    if objective not in OBJECTIVES:
        raise GraphbenchError(f"unknown objective {objective!r}; choose from {', '.join(OBJECTIVES)}")


def check_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise GraphbenchError(f"{name} must be a positive integer, got {value!r}")
    return value


def ceil_multiple(n: int, m: int) -> int:
    """n rounded up to a multiple of m."""
    return -(-n // m) * m
