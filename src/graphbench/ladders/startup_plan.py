"""Capture on demand, planned from traffic: which rungs of a ladder to record at start-up.

A step of n tokens replays the smallest rung >= n (above the top it runs eager). Given the step sizes a
server is expected to see (a distribution, a previous run's steps, a server log: the sources `tune` reads),
the rungs are ranked by the share of steps that replay them; start-up records the fewest that cover the
asked share of the replayed steps, and leaves the others for their first use (each a one-time stall, see
compilation.deferred_capture). Rungs no step reaches are listed apart: on first use they would never be
recorded at all. Pure Python; no torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from graphbench.errors import GraphbenchError
from graphbench.ladders.padding import pad_to


@dataclass(frozen=True, slots=True)
class StartupPlan:
    sizes: tuple[int, ...]  # recorded at start-up
    deferred: tuple[int, ...]  # reached by the traffic, recorded on first use
    unused: tuple[int, ...]  # reached by no step of the traffic
    covered_pct: float  # share of all steps that replay a recording made at start-up
    deferred_pct: float  # share of all steps whose recording is made on first use
    eager_pct: float  # share of all steps above the top (eager either way)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def flag(self) -> str:
        return startup_flag(self.sizes)


def startup_flag(sizes) -> str:
    """The run/sweep option for these start-up sizes ('none': every recording left for its first use)."""
    return "--startup-capture-sizes " + (",".join(map(str, sizes)) or "none")


def check_coverage(coverage: float) -> float:
    if isinstance(coverage, bool) or not isinstance(coverage, (int, float)) or not 0 < coverage <= 1:
        raise GraphbenchError(f"--startup-coverage must be a share of the steps in (0, 1], e.g. 0.99; got {coverage!r}")
    return float(coverage)


def rung_shares(ladder: Sequence[int], distribution: Mapping[int, float]) -> tuple[dict[int, float], float]:
    """Each rung's weight (the steps that pad to it) and the weight of the steps above the top."""
    rungs = sorted(set(ladder))
    shares: dict[int, float] = {}
    eager = 0.0
    for size, weight in distribution.items():
        if (rung := pad_to(rungs, size)) is None:
            eager += weight
        else:
            shares[rung] = shares.get(rung, 0.0) + weight
    return shares, eager


def startup_plan(ladder: Sequence[int], distribution: Mapping[int, float], coverage: float) -> StartupPlan:
    """The fewest rungs whose steps make up `coverage` of the replayed steps (ties: the smaller rung first)."""
    check_coverage(coverage)
    shares, eager = rung_shares(ladder, distribution)
    total = sum(shares.values()) + eager
    if total <= 0:
        raise GraphbenchError("the distribution has no steps: nothing to plan the start-up's recordings from")
    replayed = sum(shares.values())
    chosen: list[int] = []
    taken = 0.0
    for rung in sorted(shares, key=lambda r: (-shares[r], r)):
        if taken >= coverage * replayed * (1 - 1e-12):
            break
        chosen.append(rung)
        taken += shares[rung]
    deferred = sorted(set(shares) - set(chosen))
    unused = sorted(set(ladder) - set(shares))
    return StartupPlan(tuple(sorted(chosen)), tuple(deferred), tuple(unused), 100 * taken / total,
                       100 * (replayed - taken) / total, 100 * eager / total)
