"""How steady the repeats were, and where an unsteady repeat lost its time (the report's "Repeats" table).

One row per graphbench point x workload whose repeats recorded step times per runtime mode: the
median length of a repeat (seconds), the median output tokens/s and its spread across repeats (max -
min over the median), then for each runtime mode the median of the repeats' total step time in that
mode and its spread, and the slowest step seen. A tokens/s spread that shows up in one mode's total
and not in the others says which kind of step to look at: e.g. eager (NONE) prefill chunks above the
ladder's top, while the graph-replayed decode steps (FULL) cost the same in every repeat.

A repeat that ran on a busy host (`busy_host`: another process wanted the CPU) says nothing about the
engine's spread: the row's numbers leave such repeats out when at least two others remain (the "busy
host" cell names them, their reason and the spread with them), and give no spread when fewer remain.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import pandas as pd

from graphbench.reports.frame import GRAPHBENCH, busy_repeats
from graphbench.reports.point_names import point_namer
from graphbench.reports.stats import MAX_STEADY_SPREAD_PCT, median, spread_pct

MODES = ("FULL", "PIECEWISE", "NONE")
REPEATS_COLUMNS = [
    "point", "workload", "repeats", "repeat s", "output tok/s", "spread %",
    "FULL ms", "FULL spread %", "PIECEWISE ms", "PIECEWISE spread %", "NONE ms", "NONE spread %", "slowest step",
    "busy host",
]  # fmt: skip
TEXT_COLUMNS = ("point", "workload", "repeats", "slowest step", "busy host")


def repeats_table(results: list[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows for the graphbench points' workloads with at least two repeats that recorded per-mode step times."""
    rows = []
    ours = [r for r in results if (r.get("system") or GRAPHBENCH) == GRAPHBENCH and r.get("status", "ok") == "ok"]
    name = point_namer(ours)  # (one label on two GPU types, or of two models: named apart)
    for result in ours:
        for workload in result.get("workloads") or []:
            repeats = workload.get("repeats") or []
            if len(repeats) < 2 or not all(isinstance(r.get("step_ms_by_mode"), dict) for r in repeats):
                continue  # (results written before the per-mode times were recorded)
            rows.append(_row(name(result), workload.get("name"), repeats, busy_repeats(workload)))
    return pd.DataFrame(rows, columns=REPEATS_COLUMNS)


def _busy_text(busy: Mapping[int, str], repeats: list[Mapping[str, Any]], calm: int) -> str:
    """'repeat 3 of 3: host load 3.1 > 2 cores; left out (with it the spread is 12.3%)'."""
    if not busy:
        return ""
    which = "; ".join(f"repeat {i + 1} of {len(repeats)}: {why}" for i, why in busy.items())
    spread = _spread(_tokens_per_s(repeats))
    with_them = f"with {'it' if len(busy) == 1 else 'them'} the spread is {spread:.1f}%"
    if calm >= 2:
        return f"{which}; left out ({with_them})"
    return f"{which}; too few other repeats for a spread ({with_them})"


def _tokens_per_s(repeats: list[Mapping[str, Any]]) -> list[float]:
    """The repeats' output tokens/s, those that hold one (a null is a repeat that measured none)."""
    return [float(r["output_tokens_per_s"]) for r in repeats if r.get("output_tokens_per_s") is not None]


def _row(label: Any, workload: Any, repeats: list[Mapping[str, Any]], busy: Mapping[int, str]) -> dict[str, Any]:
    calm = [r for i, r in enumerate(repeats) if i not in busy]
    note = _busy_text(busy, repeats, len(calm))
    steady = len(calm) >= 2
    if busy and steady:
        repeats = calm
    tokens_per_s = _tokens_per_s(repeats)
    durations = [float(r["duration_s"]) for r in repeats if r.get("duration_s") is not None]
    row: dict[str, Any] = {"point": label, "workload": workload, "repeats": len(repeats),
                           "repeat s": median(durations) if durations else math.nan,
                           "output tok/s": median(tokens_per_s) if tokens_per_s else math.nan,
                           "spread %": _spread(tokens_per_s) if steady and len(tokens_per_s) >= 2 else math.nan}
    for mode in MODES:
        totals = [float((r["step_ms_by_mode"].get(mode) or {}).get("total_ms") or 0.0) for r in repeats]  # (null: none)
        present = any(totals)
        row[f"{mode} ms"] = median(totals) if present else math.nan
        row[f"{mode} spread %"] = _spread(totals) if present and steady else math.nan
    steps = [s for r in repeats for s in r.get("slowest_steps") or []]
    slowest = max(steps, key=lambda s: s["ms"], default=None)
    row["slowest step"] = (f"{slowest['ms']:.1f} ms ({slowest['runtime_mode']}, {slowest['num_tokens']} tokens)"
                           if slowest else "")
    row["busy host"] = note
    return row


def _spread(values: list[float]) -> float:
    spread = spread_pct(values)
    return math.nan if spread is None else spread


def steadiness_note(table: pd.DataFrame, max_listed: int = 6) -> str:
    """One paragraph under the table: which workloads spread more than MAX_STEADY_SPREAD_PCT, which had
    repeats on a busy host (left out of their spread), and how much the fully eager points (no step
    replayed a graph: their speed is the host's) spread, the host's own steadiness to judge the others by.
    Empty for an empty table."""
    if table.empty:
        return ""
    judged = table[table["spread %"].notna()]
    spreads = judged["spread %"]
    unsteady = judged[spreads > MAX_STEADY_SPREAD_PCT].sort_values("spread %", ascending=False)
    if judged.empty:
        text = "No workload kept two repeats off a busy host: no spread to judge the engine by."
    elif unsteady.empty:
        text = f"Every workload's tokens/s spread is within {MAX_STEADY_SPREAD_PCT:g}% (largest {spreads.max():.1f}%)."
    else:
        listed = ", ".join(f"{r['point']} {r['workload']} ({r['spread %']:.1f}%)"
                           for _, r in unsteady.head(max_listed).iterrows())
        more = len(unsteady) - max_listed
        text = (f"{len(unsteady)} of {len(judged)} workloads spread more than {MAX_STEADY_SPREAD_PCT:g}%: {listed}"
                + (f" and {more} more" if more > 0 else "") + ".")
    text += _busy_sentence(table, max_listed)
    eager = judged[judged["FULL ms"].isna() & judged["PIECEWISE ms"].isna()]
    if not eager.empty and len(eager) < len(table):
        text += (f" Fully eager points ({', '.join(sorted(set(map(str, eager['point']))))}: no step replayed a "
                 f"CUDA graph, so their speed is the host's) spread {eager['spread %'].min():.1f}-"
                 f"{eager['spread %'].max():.1f}%: the host's own steadiness in this run.")
    return text


def _busy_sentence(table: pd.DataFrame, max_listed: int) -> str:
    """The workloads with repeats on a busy host: their spread is not the engine's."""
    if "busy host" not in table:
        return ""
    busy = table[table["busy host"].fillna("") != ""]
    if busy.empty:
        return ""
    listed = "; ".join(f"{r['point']} {r['workload']}: {r['busy host']}" for _, r in busy.head(max_listed).iterrows())
    more = len(busy) - max_listed
    return (f" The host was busy (another process wanted the CPU) during repeats of {len(busy)} workloads, whose "
            f"spread above leaves those repeats out or is not given: {listed}" + (f"; and {more} more" if more > 0 else "")
            + ".")
