"""One engine measured once, shown under every label it stands for (a result's `stands_for`).

A sweep runs one point for the points that resolve to the very same engine on the device (on the
CPU no CUDA graph is recorded, so -O1 and -O2 on either ladder are one engine) and lists the others
in that result's `stands_for`. The report shows the measurement under each of those labels too, marked
"O2_default = O1_default (same engine, measured once)", and counts it once in every statistic: the
aliases are added to the tables for display (`with_aliases`), never to the frames that are ranked,
tested or drawn.

An alias's own config is not in the result. Its ladder (`alias_ladder`) is rebuilt from the ladder name
in its label (default / interactivity, as the sweep names points) with the measured config's scheduler
and speculative settings by docs/MACHINERY.md §1.5, and only where that rule gives the measured point's own ladder
back (a hand-given ladder says nothing about the alias's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from graphbench.errors import GraphbenchError
from graphbench.ladders.sizes import PERFORMANCE_MODES, capture_sizes
from graphbench.reports.frame import GRAPHBENCH, ok_results
from graphbench.reports.point_names import point_namer, result_model
from graphbench.reports.rounds import result_gpu

SAME_ENGINE = "same engine, measured once"


def stands_for(result: Mapping[str, Any]) -> list[str]:
    """The other labels a result stands for; [] when absent or malformed."""
    labels = result.get("stands_for")
    return [x for x in labels if isinstance(x, str) and x] if isinstance(labels, list) else []


def alias_map(results: list[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Measured label -> the labels it stands for, over the successful graphbench results. A label that
    has a result of its own is not an alias (its own measurement shows); each alias is claimed once."""
    ok = [r for r in ok_results(results) if (r.get("system") or GRAPHBENCH) == GRAPHBENCH]
    measured = {str(r.get("label")) for r in ok}
    out: dict[str, list[str]] = {}
    claimed: set[str] = set()
    for result in ok:
        label = str(result.get("label"))
        for alias in stands_for(result):
            if alias not in measured and alias not in claimed:
                claimed.add(alias)
                out.setdefault(label, []).append(alias)
    return out


def alias_groups(results: list[Mapping[str, Any]]) -> dict[tuple[str, str], dict[str, list[str]]]:
    """alias_map of each model's results on each GPU type, by (model, GPU type): which labels one engine stands
    for is one machine's (a CPU runs -O1 and -O2 as one engine, a GPU apart), so a label another machine
    measured, or measured once for another, says nothing here."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for result in ok_results(results):
        groups.setdefault((result_model(result), result_gpu(result)), []).append(result)
    return {key: aliases for key, group in groups.items() if (aliases := alias_map(group))}


def aliases_of(result: Mapping[str, Any], groups: Mapping[tuple[str, str], Mapping[str, list[str]]]) -> list[str]:
    """The labels this result stands for, of its own model and GPU type (alias_groups)."""
    return list(groups.get((result_model(result), result_gpu(result)), {}).get(str(result.get("label")), []))


def named_aliases(results: list[Mapping[str, Any]]) -> dict[str, list[str]]:
    """with_aliases' map for tables whose rows are named by reports.point_names (the label, with the model and
    GPU type where the results hold several): measured point's name -> its aliases' names."""
    ours = [r for r in ok_results(results) if (r.get("system") or GRAPHBENCH) == GRAPHBENCH]
    name, groups = point_namer(ours), alias_groups(ours)
    return {name(r): [name(dict(r, label=a)) for a in aliases] for r in ours if (aliases := aliases_of(r, groups))}


def alias_text(alias: str, measured: str) -> str:
    return f"{alias} = {measured} ({SAME_ENGINE})"


def also_text(aliases: list[str]) -> str:
    """What follows a measured label that stands for others: ' (also A, B: same engine, measured once)'."""
    return f" (also {', '.join(aliases)}: {SAME_ENGINE})" if aliases else ""


def with_aliases(table: pd.DataFrame, column: str, aliases: Mapping[str, list[str]], *,
                 marked: bool = True, measured_column: str | None = None, collapse: str | None = None) -> pd.DataFrame:
    """The table with, after the last row of each measured label (in `column`), its rows again under each
    alias: the cell reads alias_text(alias, label) when marked, else the bare alias; measured_column (when
    given) is set to the measured label on the alias rows and left empty on the others. collapse (a text
    column): one row per alias instead, that column reading "every workload: see <label>", the rest empty."""
    if table.empty or not aliases:
        return table if measured_column is None else table.assign(**{measured_column: ""})
    labels = list(table[column])
    last = {label: i for i, label in enumerate(labels)}
    parts = []
    for i, label in enumerate(labels):
        row = table.iloc[[i]]
        parts.append(row if measured_column is None else row.assign(**{measured_column: ""}))
        if last[label] != i or label not in aliases:
            continue
        block = table[table[column] == label]
        if collapse is not None:
            block = pd.DataFrame([{c: (f"every workload: see {label}" if c == collapse else
                                       math.nan if pd.api.types.is_numeric_dtype(table[c]) else "")
                                   for c in table.columns}])
        for alias in aliases[label]:
            copy = block.assign(**{column: alias_text(alias, label) if marked else alias})
            parts.append(copy if measured_column is None else copy.assign(**{measured_column: label}))
    return pd.concat(parts, ignore_index=True)


def alias_notes(results: list[Mapping[str, Any]]) -> list[str]:
    """One line per result that stands for others: which labels, and why (its same_engine_reason); named with
    the model and GPU type where the results hold several."""
    named = named_aliases(results)
    ours = [r for r in ok_results(results) if (r.get("system") or GRAPHBENCH) == GRAPHBENCH]
    name, lines = point_namer(ours), []
    for result in ours:
        label = name(result)
        if label in named:
            reason = result.get("same_engine_reason")
            why = f": {reason}" if isinstance(reason, str) and reason else ""
            lines.append(f"{', '.join(named.pop(label))} = {label} ({SAME_ENGINE}){why}.")
    return lines


def ladder_mode(label: str) -> str | None:
    """The ladder name (default / interactivity) a sweep label carries as one of its '_' parts, if exactly one."""
    modes = [part for part in label.split("_") if part in PERFORMANCE_MODES]
    return modes[0] if len(modes) == 1 else None


def alias_ladder(result: Mapping[str, Any], alias: str) -> list[int] | None:
    """The ladder the alias asked for (see the module doc), or None when it cannot be told."""
    config = result.get("config") if isinstance(result.get("config"), Mapping) else {}
    comp = config.get("compilation") if isinstance(config.get("compilation"), Mapping) else {}
    own, mode = comp.get("cudagraph_capture_sizes"), ladder_mode(alias)
    if mode is None or not isinstance(own, list) or not own:
        return None
    if mode == comp.get("performance_mode"):
        return sorted(set(own))
    for blackwell in (False, True):  # (a Blackwell data-centre GPU's top is 1024)
        if rule_ladder(config, comp.get("performance_mode"), blackwell=blackwell) == sorted(set(own)):
            return rule_ladder(config, mode, blackwell=blackwell)
    return None


def rule_ladder(config: Mapping[str, Any], mode: Any, *, blackwell: bool = False) -> list[int] | None:
    """The ladder docs/MACHINERY.md §1.5 builds for this config's scheduler and speculative settings in this
    performance mode (no user list); None when the config does not say enough."""
    sched = config.get("scheduler") if isinstance(config.get("scheduler"), Mapping) else {}
    spec = config.get("speculative") if isinstance(config.get("speculative"), Mapping) else {}
    try:
        return list(capture_sizes(int(sched.get("max_num_seqs")), performance_mode=str(mode),
                                  num_speculative_tokens=int(spec.get("num_speculative_tokens") or 0),
                                  max_num_batched_tokens=sched.get("max_num_batched_tokens"), blackwell=blackwell).sizes)
    except (GraphbenchError, TypeError, ValueError):
        return None
