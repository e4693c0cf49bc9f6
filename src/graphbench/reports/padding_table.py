"""What each point's ladder pads, in the open (the report's "Padding" table).

One row per graphbench point x workload, and again under each label the point stands for
(reports.aliases; one row pointing at the measured label where the alias asked for the same ladder): the padding the dispatcher paid (`padding_token_pct`: padded minus real tokens
over padded tokens, token-weighted, median over repeats), the ladder's prediction for the batch
sizes the workload's steps had (ladders.padding.token_waste over the histogram summed over repeats),
that histogram in short, and what the ladder cost at start-up (capture seconds, graph MiB).

The prediction pads every batch up to the top rung, as PIECEWISE, FULL and FULL_AND_PIECEWISE
dispatch; under FULL_DECODE_ONLY mixed batches run eager, so paid falls below predicted there. Where no
CUDA graph was recorded (the CPU) the paid padding is 0 and the prediction is what the ladder the
config asked for would have padded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from graphbench.ladders.padding import pad_to, token_waste
from graphbench.reports.aliases import alias_groups, alias_ladder, alias_text, aliases_of, ladder_mode, rule_ladder
from graphbench.reports.frame import (
    GRAPHBENCH,
    asked_ladder,
    graphs_recorded,
    metric_median,
    ok_results,
    startups_of,
)
from graphbench.reports.point_names import point_namer
from graphbench.reports.stats import median

MIB = 2**20
PADDING_COLUMNS = [
    "point", "workload", "ladder", "graphs", "paid padding %", "predicted padding %", "batch sizes (share of steps)",
    "capture s", "graph MiB",
]  # fmt: skip
PADDING_NOTE = (
    "Paid: the share of the tokens the steps computed that were padding (token-weighted, median over repeats). "
    "Predicted: what the point's ladder pads for the batch sizes its steps had (each batch up to the next rung; "
    "above the top it runs eager, unpadded). Padded tokens are wasted arithmetic; whether they cost time is what "
    "the TPOT difference between ladders says (below). The padding chart's figure per ladder is over the decode "
    "steps of every workload of the points that asked for it, so it differs from a row here (one workload, all "
    "its steps)."
)
CPU_NOTE = (
    " Where no CUDA graph was recorded (graphs: none), nothing was padded: the predicted column is what the "
    "ladder asked for would pad on a GPU for these batch sizes."
)


def histogram(workload: Mapping[str, Any], key: str = "batch_size_histogram") -> dict[int, int]:
    """Step token count -> steps, summed over the workload's repeats (batch_size_histogram, or one phase's)."""
    steps: dict[int, int] = {}
    for repeat in workload.get("repeats") or []:
        hist = repeat.get(key) if isinstance(repeat, Mapping) else None
        for size, count in (hist if isinstance(hist, Mapping) else {}).items():
            try:
                n, c = int(size), int(count)
            except (TypeError, ValueError):
                continue
            if n > 0 and c > 0:
                steps[n] = steps.get(n, 0) + c
    return dict(sorted(steps.items()))


def histogram_text(steps: Mapping[int, int], most: int = 3) -> str:
    """'16: 94%, 1024: 6% (16-1024, 32 steps)': the commonest sizes with their share, then the range."""
    total = sum(steps.values())
    if not total:
        return ""
    common = sorted(steps.items(), key=lambda item: (-item[1], item[0]))[:most]
    shares = ", ".join(f"{n}: {_share(c, total)}" for n, c in common)
    more = f" +{len(steps) - most} sizes" if len(steps) > most else ""
    return f"{shares}{more} ({min(steps)}-{max(steps)}, {total} steps)"


def _share(count: int, total: int) -> str:
    pct = 100 * count / total
    return "<1%" if pct < 0.5 else f"{pct:.0f}%"


def ladder_name(config: Mapping[str, Any], mode: Any, sizes: list[int] | None) -> str:
    """'default: 19 sizes, top 128' (the performance mode's own ladder, else 'custom'); 'none' without one."""
    if not sizes:
        return "none"
    rule = mode and any(rule_ladder(config, mode, blackwell=b) == list(sizes) for b in (False, True))
    name = mode if rule else "custom"
    return f"{name}: {len(sizes)} sizes, top {sizes[-1]}"


def predicted_pct(sizes: list[int] | None, steps: Mapping[int, int]) -> float:
    return 100 * token_waste(sizes, steps) if sizes and steps else math.nan


def two_ladder_pct(decode: list[int], mixed: list[int], workload: Mapping[str, Any]) -> float:
    """The padding two ladders predict: each phase's steps (the per-phase histograms) up to its own ladder's
    next rung, eager above it; NaN for results without the per-phase histograms."""
    padded = real = 0
    for ladder, key in ((sorted(decode), "decode_size_histogram"), (sorted(mixed), "mixed_size_histogram")):
        for n, count in histogram(workload, key).items():
            rung = pad_to(ladder, n) or n  # (eager above the top: no padding)
            padded, real = padded + rung * count, real + n * count
    return 100 * (padded - real) / padded if padded else math.nan


def _graphs(result: Mapping[str, Any]) -> str:
    mode = ((result.get("startup") or {}).get("cudagraph_mode") or {})
    if graphs_recorded(result):
        return f"recorded ({mode.get('resolved')})"
    if asked_ladder(result) is None:
        return "none asked (mode NONE)"
    device = (result.get("environment") or {}).get("device")
    return f"none on {device}: predicted only" if device and device != "cuda" else "none recorded: predicted only"


def _costs(result: Mapping[str, Any]) -> tuple[float, float]:
    """Median capture seconds (warm starts where there are any) and graph MiB; NaN without graphs."""
    if not graphs_recorded(result):
        return math.nan, math.nan
    starts = startups_of(result)
    warm = [s for s in starts if s.get("cold") is not True] or starts

    def med(key: str, among: list[Mapping[str, Any]]) -> float:
        nums = [float(v) for s in among if isinstance(v := s.get(key), (int, float)) and not isinstance(v, bool)]
        return median(nums) if nums else math.nan

    return med("capture_s", warm), med("graph_memory_bytes", starts) / MIB


_EMPTY = {"paid padding %": math.nan, "predicted padding %": math.nan, "batch sizes (share of steps)": "",
          "capture s": math.nan, "graph MiB": math.nan}


def padding_table(results: list[Mapping[str, Any]]) -> pd.DataFrame:
    """See the module doc; PADDING_COLUMNS."""
    aliases = alias_groups(results)  # (each machine's and model's own)
    rows = []
    ours = [r for r in ok_results(results) if (r.get("system") or GRAPHBENCH) == GRAPHBENCH]
    name = point_namer(ours)  # a label of two models or on two GPU types: its rows named apart
    for result in ours:
        label = name(result)
        workloads = [w for w in result.get("workloads") or [] if isinstance(w, Mapping)]
        config = result.get("config") if isinstance(result.get("config"), Mapping) else {}
        mode = (config.get("compilation") or {}).get("performance_mode")
        own = asked_ladder(result)
        mixed = (result.get("startup") or {}).get("mixed_capture_sizes")
        two = f"; mixed {len(mixed)} sizes" + (f", top {max(mixed)}" if mixed else " (eager)") if isinstance(mixed, list) else ""
        ladders = [(label, own, ladder_name(config, mode, own) + two)]
        for alias in aliases_of(result, aliases):
            sizes = alias_ladder(result, alias) if own is not None else None
            ladder = ladder_name(config, ladder_mode(alias), sizes) if sizes or own is None else "not told by its label"
            ladders.append((alias_text(name(dict(result, label=alias)), label), sizes, ladder))
        capture_s, graph_mib = _costs(result)
        for point, sizes, ladder in ladders:
            if point != label and sizes == own:  # the measured ladder too: its rows, nothing new
                rows.append(dict(_EMPTY, point=point, workload=f"every workload: see {label}", ladder=ladder,
                                 graphs=_graphs(result)))
                continue
            mixed = (result.get("startup") or {}).get("mixed_capture_sizes")
            for w in workloads:
                steps = histogram(w)
                predicted = (two_ladder_pct(sizes or [], mixed, w) if isinstance(mixed, list) and point == label
                             else predicted_pct(sizes, steps))
                rows.append({
                    "point": point, "workload": str(w.get("name") or ""), "ladder": ladder, "graphs": _graphs(result),
                    "paid padding %": metric_median(w, "padding_token_pct"),
                    "predicted padding %": predicted,
                    "batch sizes (share of steps)": histogram_text(steps), "capture s": capture_s, "graph MiB": graph_mib,
                })  # fmt: skip
    return pd.DataFrame(rows, columns=PADDING_COLUMNS)


def padding_note(table: pd.DataFrame) -> str:
    """The sentence under the table (and the CPU's, when no row recorded graphs)."""
    if table.empty:
        return ""
    recorded = table["graphs"].str.startswith("recorded")
    return PADDING_NOTE + ("" if recorded.all() else CPU_NOTE)
