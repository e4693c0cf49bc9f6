"""Whether the two sides of a comparison ran the same projection kernels (no torch).

A cold start on a GPU times graphbench's projection kernels and keeps the fastest per shape and row class
(runner/kernel_timing.py); every later start on that machine loads them. The processes of one run therefore
share one search's choices, and the noise a run measures leaves out how another search would have chosen.
Two runs on two fresh machines (a CI baseline and its current run) each search, and a search can land on
other blocks or on cuBLAS for the same shape: llama-3.2-1b's qkv at 64 rows took cuBLAS at 7.58 us where
another search found the skinny GEMM at 6.81, a step 4.7% slower (benchmarks/RESULTS.md, 2026-12-06, the
skinny GEMM's block grid). compare and gate say where the sides' choices differ, so that a verdict there is
read as possibly start-up's and not only the code's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Shape = tuple[str, int, int, int]  # (op, n, k, rows)
Kernel = tuple[str, tuple[int, ...]]  # (kernel, blocks)


def choices_by_shape(results: Iterable[Mapping[str, Any]]) -> dict[Shape, set[Kernel]]:
    """Every kernel the results' starts chose for each (op, n, k, rows); a malformed entry is passed over."""
    out: dict[Shape, set[Kernel]] = {}
    for result in results:
        for start in _starts(result):
            record = start.get("kernel_choices")
            choices = record.get("choices") if isinstance(record, Mapping) else None
            for choice in choices if isinstance(choices, list) else []:
                parsed = _parse(choice)
                if parsed is not None:
                    out.setdefault(parsed[0], set()).add(parsed[1])
    return out


def choices_differ(baseline: Iterable[Mapping[str, Any]], current: Iterable[Mapping[str, Any]]) -> str | None:
    """One line on the shapes both sides timed whose chosen kernels differ, or None (none differ, or a side
    chose nothing: the CPU, -O0, model.kernels = torch). A shape whose processes on one side chose differently
    is left out: that side's noise has sampled the search already."""
    base, cur = choices_by_shape(baseline), choices_by_shape(current)
    shared = sorted(base.keys() & cur.keys(), key=lambda s: (-s[3], s))
    differ = [shape for shape in shared if len(base[shape]) == len(cur[shape]) == 1 and base[shape] != cur[shape]]
    if not differ:
        return None
    # the example: another kernel (cuBLAS for the skinny GEMM) before other blocks of one, then the most rows
    shape = min(differ, key=lambda s: (next(iter(base[s]))[0] == next(iter(cur[s]))[0], shared.index(s)))
    op, n, k, rows = shape
    example = (f"{op} {n}x{k} at {rows} row{'s' if rows > 1 else ''}: baseline {_kernels(base[shape])}, "
               f"current {_kernels(cur[shape])}")
    return (f"start-up's kernel choices differ on {len(differ)} of {len(shared)} projection shapes (e.g. "
            f"{example}): a difference there may be start-up's search, not the code (one run's processes share "
            "its choices, so its noise leaves that out); to compare the code alone, start both runs from the same "
            "kernel choices (one GRAPHBENCH_CACHE_ROOT; a change to the kernels' sources times them again)")


def _starts(result: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every start a result records: a merged point's `startups` (each process's), else its `startup`."""
    starts = [s for s in result.get("startups") or [] if isinstance(s, Mapping)] \
        if isinstance(result.get("startups"), list) else []
    return starts or ([result["startup"]] if isinstance(result.get("startup"), Mapping) else [])


def _parse(choice: Any) -> tuple[Shape, Kernel] | None:
    if not isinstance(choice, Mapping):
        return None
    try:
        shape = (str(choice["op"]), int(choice["n"]), int(choice["k"]), int(choice["rows"]))
        blocks = choice.get("blocks") or ()
        return shape, (str(choice["kernel"]), tuple(int(b) for b in blocks))
    except (KeyError, TypeError, ValueError, OverflowError):
        return None


def _kernels(kernels: set[Kernel]) -> str:
    """'skinny (32, 128, 1, 4, 5)' or 'cuBLAS' (kernels: one side's one choice for a shape)."""
    (name, blocks), = kernels
    if name == "torch":
        return "cuBLAS"
    return f"{name} {blocks}" if blocks else name
