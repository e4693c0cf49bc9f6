"""Side-by-side comparison of capture ladders: what `graphbench ladder` prints (the seed's program).

Always the default and the interactivity ladder for the same settings, plus a "custom" ladder
when the user gives a list of sizes. The selected ladder is the one vLLM would use: the custom
list when given, else the ladder of the chosen performance mode.

Averages are over a batch-size distribution: by default every size in 1..R equally likely, R the
largest top rung of the ladders shown (the max capture size unless a custom ladder goes higher; the
cap itself when no ladder has a rung, e.g. 1 + k above it); eager batches count zero waste. Pure Python, no torch import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from graphbench.errors import GraphbenchError
from graphbench.ladders.distributions import BatchSizeDistribution
from graphbench.ladders.graphs import graphs_per_mode
from graphbench.ladders.padding import average_waste, eager_fraction, pad_to, padding_overhead
from graphbench.ladders.sizes import PERFORMANCE_MODES, Ladder, capture_sizes, default_max_capture_size

DEFAULT_BATCHES: tuple[int, ...] = (1, 3, 5, 9, 17, 33, 100, 250, 300, 600)


@dataclass(frozen=True, slots=True)
class PaddingRow:
    """One batch size on one ladder: the padded size and the waste (None when eager)."""

    batch: int
    padded: int | None
    waste: float | None


@dataclass(frozen=True, slots=True)
class LadderSummary:
    """One ladder with its padding rows, averages and graph counts."""

    name: str
    ladder: Ladder
    selected: bool
    rows: tuple[PaddingRow, ...]
    average_waste: float
    eager_fraction: float
    padding_overhead: float
    num_graphs: dict[str, int] = field(default_factory=dict)

    @property
    def sizes(self) -> tuple[int, ...]:
        return self.ladder.sizes


@dataclass(frozen=True, slots=True)
class LadderComparison:
    """Everything `graphbench ladder` shows, in every output format."""

    max_num_seqs: int
    max_capture_size: int
    decode_query_len: int
    performance_mode: str
    averaged_over: str
    ladders: tuple[LadderSummary, ...]

    @property
    def selected(self) -> LadderSummary:
        return next(s for s in self.ladders if s.selected)

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(f"{s.name} ladder: {w}" for s in self.ladders for w in s.ladder.warnings)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document: max_num_seqs, max_capture_size, ladders[...] plus extra context."""
        return {
            "max_num_seqs": self.max_num_seqs,
            "max_capture_size": self.max_capture_size,
            "ladders": [
                {
                    "name": s.name,
                    "sizes": list(s.sizes),
                    "average_padding_pct": pct(s.average_waste),
                    "rows": [
                        {"batch": r.batch, "padded": r.padded, "waste_pct": None if r.waste is None else pct(r.waste)}
                        for r in s.rows
                    ],
                    "selected": s.selected,
                    "num_sizes": len(s.sizes),
                    "max_capture_size": s.ladder.max_capture_size,
                    "eager_fraction_pct": pct(s.eager_fraction),
                    "padding_overhead": round(s.padding_overhead, 4),
                    "num_graphs": dict(s.num_graphs),
                    "warnings": list(s.ladder.warnings),
                }
                for s in self.ladders
            ],
            "selected": self.selected.name,
            "performance_mode": self.performance_mode,
            "decode_query_len": self.decode_query_len,
            "averaged_over": self.averaged_over,
        }

    def csv_rows(self) -> list[dict[str, Any]]:
        """One row per (ladder, batch): ladder, batch, padded, waste_pct (empty when eager)."""
        return [
            {
                "ladder": s.name,
                "batch": r.batch,
                "padded": "" if r.padded is None else r.padded,
                "waste_pct": "" if r.waste is None else pct(r.waste),
            }
            for s in self.ladders
            for r in s.rows
        ]


def pct(fraction: float) -> float:
    """A fraction as a percentage rounded to 2 decimals."""
    return round(100 * fraction, 2)


def compare_ladders(
    max_num_seqs: int = 256,
    *,
    performance_mode: str = "default",
    num_speculative_tokens: int = 0,
    max_num_batched_tokens: int | None = None,
    max_capture_size: int | None = None,
    blackwell: bool = False,
    user_sizes: Sequence[int] | None = None,
    batches: Sequence[int] = DEFAULT_BATCHES,
    distribution: BatchSizeDistribution | None = None,
) -> LadderComparison:
    """Build the default, interactivity (and custom) ladders and their padding statistics."""
    if performance_mode not in PERFORMANCE_MODES:
        raise GraphbenchError(
            f"unknown performance mode {performance_mode!r}; choose from {', '.join(PERFORMANCE_MODES)}"
        )
    batches = list(batches)
    if not batches:
        raise GraphbenchError("give at least one batch size to tabulate")
    for n in batches:
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise GraphbenchError(f"batch sizes must be positive integers, got {n!r}")
    if max_num_batched_tokens is not None and not isinstance(max_num_seqs, bool) and isinstance(max_num_seqs, int) \
            and max_num_batched_tokens < max_num_seqs:  # (vLLM's SchedulerConfig and the engine refuse it alike)
        raise GraphbenchError(f"max_num_batched_tokens ({max_num_batched_tokens}) must be >= max_num_seqs "
                              f"({max_num_seqs}): a decode step holds a token of every running request")
    common = dict(
        num_speculative_tokens=num_speculative_tokens,
        max_num_batched_tokens=max_num_batched_tokens,
        blackwell=blackwell,
    )
    named: list[tuple[str, Ladder]] = [
        (mode, capture_sizes(max_num_seqs, performance_mode=mode, max_capture_size=max_capture_size, **common))
        for mode in PERFORMANCE_MODES
    ]
    if user_sizes is not None:
        named.append(("custom", capture_sizes(max_num_seqs, user_sizes=list(user_sizes), **common)))
    selected = "custom" if user_sizes is not None else performance_mode
    decode_query_len = 1 + num_speculative_tokens
    top = named[0][1].max_capture_size
    if distribution is None:
        span = max(ladder.max_capture_size for _, ladder in named)
        if span == 0:  # every ladder empty (no multiple of 1 + k within the cap): average up to the cap
            span = max_capture_size or default_max_capture_size(max_num_seqs, decode_query_len=decode_query_len,
                                                                blackwell=blackwell)
            span = min(span, max_num_batched_tokens or span)
        dist = BatchSizeDistribution.uniform(span)
        averaged_over = f"batch sizes 1..{span} equally likely"
    else:
        dist = distribution
        averaged_over = f"distribution {distribution.source or '(given)'} ({len(distribution)} sizes)"
    summaries = []
    for name, ladder in named:
        rows = []
        for n in batches:
            padded = pad_to(ladder.sizes, n)
            rows.append(PaddingRow(n, padded, None if padded is None else (padded - n) / padded))
        summaries.append(
            LadderSummary(
                name=name,
                ladder=ladder,
                selected=name == selected,
                rows=tuple(rows),
                average_waste=average_waste(ladder.sizes, dist),
                eager_fraction=eager_fraction(ladder.sizes, dist),
                padding_overhead=padding_overhead(ladder.sizes, dist),
                num_graphs={
                    m.value: c for m, c in graphs_per_mode(ladder.sizes, max_num_seqs, decode_query_len).items()
                },
            )
        )
    return LadderComparison(
        max_num_seqs=max_num_seqs,
        max_capture_size=top,
        decode_query_len=decode_query_len,
        performance_mode=performance_mode,
        averaged_over=averaged_over,
        ladders=tuple(summaries),
    )
