"""The Rounds table: each point's processes, the noise a difference must beat, and what was left out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from graphbench.reports.frame import GRAPHBENCH, ok_results
from graphbench.reports.point_names import point_namer
from graphbench.reports.stats import median, spread_pct

ROUNDS_COLUMNS = ["point", "workload", "processes", "output tok/s per process", "spread %",
                  "mean step ms by mode, per process", "left out"]
MODES = (("FULL", "full_step_ms"), ("PIECEWISE", "piecewise_step_ms"), ("NONE", "eager_step_ms"))
ROUNDS_NOTE = (
    "The unit of replication is the process: each round of a sweep runs every graphbench point in a fresh "
    "process (the order shuffled per round by a recorded seed), and each process's median over its repeats "
    "is one sample. The spread between a point's processes ((max - min) / median) is its noise floor: a "
    "difference between two points is only called when it is significant over the processes and larger than "
    "both points' floors. The mean step by runtime mode separates what a ladder or mode changes (FULL and "
    "PIECEWISE replays) from the steps that follow the host (eager, NONE). A first round that is an outlier "
    "against the others is left out, with the reason.")


def _by_mode(rounds: list[Mapping[str, Any]]) -> str:
    """'FULL 0.775 / 0.774 / 0.775; NONE 7.9 / 8.4 / 8.0': each mode's mean step in each process."""
    parts = []
    for mode, metric in MODES:
        values = [r["medians"].get(metric) for r in rounds]
        if any(v is not None for v in values):
            parts.append(f"{mode} " + " / ".join("-" if v is None else f"{v:.3g}" for v in values))
    return "; ".join(parts) or "-"


def rounds_table(results: list[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per graphbench point x workload measured in more than one process."""
    rows = []
    ours = [r for r in ok_results(results) if (r.get("system") or GRAPHBENCH) == GRAPHBENCH]
    name = point_namer(ours)  # (one label on two GPU types, or of two models: named apart)
    for result in ours:
        for w in result.get("workloads") or []:
            rounds = w.get("round_medians") if isinstance(w, Mapping) else None
            if not isinstance(rounds, list) or len(rounds) < 2:
                continue
            values = [r["medians"].get("output_tokens_per_s") for r in rounds]
            kept = [v for r, v in zip(rounds, values) if v is not None and not r.get("excluded")]
            shown = ", ".join(("-" if v is None else f"{v:,.0f}") + (" (left out)" if r.get("excluded") else "")
                              + (" (busy host)" if r.get("busy_host_repeats") else "") for r, v in zip(rounds, values))
            left = "; ".join(f"round {r['round']}: {r['excluded']}" for r in rounds if r.get("excluded"))
            rows.append({"point": name(result), "workload": str(w.get("name")),
                         "processes": f"{len(kept)} of {len(rounds)}", "output tok/s per process": shown,
                         "spread %": f"{spread_pct(kept):.1f}" if len(kept) >= 2 and median(kept) else "-",
                         "mean step ms by mode, per process": _by_mode(rounds), "left out": left})
    return pd.DataFrame(rows, columns=ROUNDS_COLUMNS)
