"""Whether the two sides of a comparison ran the same projection kernels (no torch).

A cold start on a GPU times graphbench's projection kernels and keeps the fastest per shape and row class
(runner/kernel_timing.py); every later start on that machine loads them. The processes of one `graphbench run`
(or of a sweep's first round) therefore share one search's choices, and their noise leaves out how another
search would have chosen; a sweep's later rounds each run on a search of their own (bench/round_searches.py),
and a shape they chose differently is left out here, since that side's noise has sampled it.
Two runs on two fresh machines (a CI baseline and its current run) each search, and a search can land on
other blocks or on cuBLAS for the same shape: llama-3.2-1b's qkv at 64 rows took cuBLAS at 7.58 us where
another search found the skinny GEMM at 6.81, a step 4.7% slower (benchmarks/RESULTS.md, 2026-12-06, the
skinny GEMM's block grid). compare and gate say where the sides' choices differ, so that a verdict there is
read as possibly start-up's and not only the code's. Choices that time alike alone are said too: qwen2.5-0.5b's
folded add-norm GEMVs had candidates within a few percent of each other alone that moved its batch-1 step by
1.2% (H100) to ~5% (H200; benchmarks/RESULTS.md, 2026-12-07).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from graphbench.env import CACHE_ROOT
from graphbench.reports.rounds import startups_of

Shape = tuple[str, int, int, int]  # (op, n, k, rows)
Kernel = tuple[str, tuple[int, ...]]  # (kernel, blocks)
NEAR_TIE = 0.03  # two choices' times against cuBLAS's this close: a timing tie, whichever a search kept


def choices_by_shape(results: Iterable[Mapping[str, Any]]) -> dict[Shape, set[Kernel]]:
    """Every kernel the results' starts chose for each (op, n, k, rows); a malformed entry is passed over."""
    return _read(results)[0]


def choices_differ(baseline: Iterable[Mapping[str, Any]], current: Iterable[Mapping[str, Any]]) -> str | None:
    """One line on the shapes both sides timed whose chosen kernels differ, or None (none do, or a side chose
    nothing: the CPU, -O0, model.kernels = torch). A choice's time is read against cuBLAS's on its own machine
    (both recorded by start-up), so two machines' speeds cancel; the example is the widest gap, and choices
    within NEAR_TIE of each other alone are counted beside it, or named where they are all that differs (alike
    alone is not alike in the step). A shape whose processes on one side chose differently is left out: that
    side's noise has sampled the search already."""
    (base, base_rel), (cur, cur_rel) = _read(baseline), _read(current)
    shared = sorted(base.keys() & cur.keys(), key=lambda s: (-s[3], s))
    differ = [shape for shape in shared if len(base[shape]) == len(cur[shape]) == 1 and base[shape] != cur[shape]]

    def gap(shape: Shape) -> float:  # how far apart the two choices' times against cuBLAS are (inf: unknown)
        b, c = base_rel.get(shape), cur_rel.get(shape)
        return abs(b / c - 1.0) if b and c else math.inf

    if not differ:
        return None
    material = sorted((s for s in differ if gap(s) > NEAR_TIE), key=lambda s: -gap(s))  # (stable: rows first)
    shape = (material or differ)[0]
    op, n, k, rows = shape
    times = (f", {base_rel[shape]:.2f} against {cur_rel[shape]:.2f} of cuBLAS's time"
             if math.isfinite(gap(shape)) else "")
    example = (f"{op} {n}x{k} at {rows} row{'s' if rows > 1 else ''}: baseline {_kernels(base[shape])}, "
               f"current {_kernels(cur[shape])}{times}")
    ties = len(differ) - len(material)
    if material:
        also = f"; {ties} more within {NEAR_TIE:.0%} alone" if ties else ""
        head = (f"start-up's kernel choices differ on {len(material)} of {len(shared)} projection shapes "
                f"(e.g. {example}{also})")
    else:
        head = (f"start-up's kernel choices differ on {ties} of {len(shared)} projection shapes, each within "
                f"{NEAR_TIE:.0%} of the other alone (e.g. {example}), which has moved a one-row step by up to 5%")
    return (f"{head}: a difference there may be start-up's search, not the code (processes that share a search "
            "leave it out of their noise); to compare the code alone, start both runs from the same "
            f"kernel choices (one {CACHE_ROOT}; a change to the kernels' sources times them again)")


def round_searches_note(results: Iterable[Mapping[str, Any]], name: Callable[[Mapping[str, Any]], str]) -> str | None:
    """One line on the points whose later rounds ran on kernel searches of their own (bench/round_searches.py):
    on how many (op, shape, rows) their starts chose apart, the spread their noise now holds; None: no such point."""
    parts = []
    for result in results:
        if any(isinstance(s.get("kernel_choices"), Mapping) and s["kernel_choices"].get("search")
               for s in startups_of(result)):
            by_shape = choices_by_shape([result])
            parts.append(f"{name(result)} {sum(len(k) > 1 for k in by_shape.values())} of {len(by_shape)}")
    if not parts:
        return None
    return ("kernel choices: each round after the first ran on a kernel search of its own; the rounds chose apart on "
            + ", ".join(parts) + " projection shapes (a spread the noise between processes includes)")


def _read(results: Iterable[Mapping[str, Any]]) -> tuple[dict[Shape, set[Kernel]], dict[Shape, float]]:
    """Every kernel chosen for each shape, and each shape's chosen time over cuBLAS's as its first start
    recorded them."""
    kernels: dict[Shape, set[Kernel]] = {}
    against_cublas: dict[Shape, float] = {}
    for shape, kernel, choice in _choices(results):
        kernels.setdefault(shape, set()).add(kernel)
        try:
            ratio = float(choice["us"]) / float(choice["torch_us"])
        except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError):
            continue
        if math.isfinite(ratio) and ratio > 0:
            against_cublas.setdefault(shape, ratio)
    return kernels, against_cublas


def _choices(results: Iterable[Mapping[str, Any]]) -> Iterator[tuple[Shape, Kernel, Mapping[str, Any]]]:
    """(shape, kernel, the choice's record) of every well-formed choice of every start of the results."""
    for result in results:
        for start in startups_of(result):
            record = start.get("kernel_choices")
            choices = record.get("choices") if isinstance(record, Mapping) else None
            for choice in choices if isinstance(choices, list) else []:
                parsed = _parse(choice)
                if parsed is not None:
                    yield parsed[0], parsed[1], choice


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
