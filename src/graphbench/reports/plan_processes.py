"""The capacity plan over processes: each configuration's capacity in every process that measured it, and
whether its gap to the plan's first configuration beats the noise (no torch).

The unit of replication is the process (reports/rounds.py): a sweep point measured in R rounds has, per
closed-loop workload, one median of every metric per process. A process's capacity is plan.max_load over
its own medians at each measured concurrency, and its output tokens/s per GPU there; a configuration with
processes that measured every concurrency gets one such figure per process. The plan's first
configuration is then judged against each other one on those figures by the rule compare and gate use
(reports/verdict.py): a configuration whose gap is within the noise is as good a choice, and a ranking
that rests on such a gap would not survive a second run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from graphbench.reports.gate_thresholds import min_effect_pct
from graphbench.reports.plan_load import interpolate, max_load
from graphbench.reports.verdict import IMPROVED, NA, REGRESSED, judge

METRIC = "output_tokens_per_s"


def process_capacities(rows: pd.DataFrame, slos: Sequence[Any]) -> list[float]:
    """Output tokens/s per GPU at each process's own capacity, for the processes that measured every
    concurrency of the configuration's closed-loop rows (one row per concurrency; rows pooled from
    several runs give none)."""
    if rows["concurrency"].duplicated().any():
        return []
    ordered = rows.sort_values("concurrency")
    metrics = [slo.metric for slo in slos]
    # a row outside rounds (one `graphbench run`) is one process, whose medians are the row's own
    per_row = [r if isinstance(r, Mapping) and r else {1: {k: row[k] for k in (*metrics, METRIC)}}
               for r, (_, row) in zip(ordered["round_medians"], ordered.iterrows())]
    common = set.intersection(*(set(r) for r in per_row)) if per_row else set()
    tp = int(ordered.iloc[0]["tensor_parallel_size"])
    out = []
    for index in sorted(common):
        medians = [r[index] for r in per_row]
        if not all(all(_finite(m.get(k)) for k in (*metrics, METRIC)) for m in medians):
            continue
        cs = [float(c) for c in ordered["concurrency"]]
        load, _ = max_load(cs, [[m[k] for m in medians] for k in metrics], [slo.limit for slo in slos])
        out.append(interpolate(cs, [m[METRIC] for m in medians], load) / tp)
    return out


def versus_first(samples: Sequence[Sequence[float]]) -> list[str]:
    """For configurations in plan order (each its per-process output tokens/s per GPU): the first's
    "best", and each other's verdict against it in a few words."""
    if not samples:
        return []
    first, out = list(samples[0]), ["best"]
    for own in samples[1:]:
        v = judge(first, list(own), higher_is_better=True, min_effect_pct=min_effect_pct(METRIC))
        if v.verdict == NA:
            out.append(f"n/a ({len(first)} vs {len(own)} processes)")
        elif v.verdict in (IMPROVED, REGRESSED):
            # (words, not a sign: a CSV cell starting with "-" reads as a formula and is quoted)
            out.append(f"{abs(v.change_pct):.1f}% {'lower' if v.change_pct < 0 else 'higher'}, beyond noise")
        else:
            noise = f", noise {v.noise_pct:.1f}%" if v.noise_pct is not None else ""
            out.append(f"tie ({v.change_pct:+.1f}%{noise})")
    return out


def judge_against_firsts(capacities: Sequence[Any]) -> None:
    """Set each capacity's vs_best (plan.Capacity, in plan order): its verdict against the first configuration
    of its own model on its own GPU type. Across GPU types the gap is the hardware's, and the processes of two
    machines are not one noise: each GPU type's first reads "best"."""
    groups: dict[tuple[str, str], list[Any]] = {}
    for c in capacities:
        groups.setdefault((c.model, c.gpu), []).append(c)
    for group in groups.values():
        for c, verdict in zip(group, versus_first([c.process_output_tokens_per_s_per_gpu for c in group])):
            c.vs_best = verdict


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
