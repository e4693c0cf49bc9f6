"""What each captured ladder costs and what it pads, side by side (the report's "Ladders" table).

One row per graphbench point that recorded CUDA graphs: its number of sizes, capture time (warm and
cold starts apart: a cold capture pays Triton's JIT), graph memory and the part of it beyond the
recordings' shared pool (the pool is sized by the largest recording, which a tuned ladder keeps, so
the part beyond it is what fewer rungs can save), and the measured padding waste over its workloads.
Ratios compare each ladder with the largest one of the same -O level and resolved mode (and model and GPU type:
results of several are a row per ladder, model and GPU, as the report's series are).

The KV trade: the KV tokens the start-up allocated, and the graph memory counted in KV tokens (at the
start-up's bytes per KV token): what a KV cache sized after capture, as SGLang does, would give up for
this ladder and mode; measured, and predicted by a graph-memory model fitted over the report's points that
recorded one ladder whole (fixed + per graph + per token of each size, ladders/memory_model.fit_memory_model).
"""

from __future__ import annotations

import math

import pandas as pd

from graphbench.reports.frame import GRAPHBENCH, flag_is
from graphbench.reports.point_names import namer

MIB = 2**20
LADDER_COLUMNS = [
    "ladder", "-O", "mode", "sizes", "capture s (warm)", "capture s (cold)", "graph MiB", "beyond pool MiB",
    "padding waste %", "sizes vs largest %", "capture vs largest %", "beyond pool vs largest %",
    "KV tokens", "graphs as KV tokens", "graphs as KV tokens (model)",
]  # fmt: skip


def _median(values: pd.Series) -> float:
    values = pd.to_numeric(values, errors="coerce").dropna()
    return float(values.median()) if len(values) else math.nan


def graph_rows(points: pd.DataFrame) -> pd.DataFrame:
    """graphbench start-ups that recorded graphs, with their size count, memory and the part of it
    beyond the shared pool (MiB), and capture time."""
    mask = (
        (points["system"] == GRAPHBENCH)
        & points["num_capture_sizes"].notna()
        & ~points["cudagraph_mode_resolved"].isin(["", "NONE"])
    )
    rows = points[mask].copy()
    rows["num_capture_sizes"] = rows["num_capture_sizes"].astype(float)
    rows["graph_memory_mib"] = rows["graph_memory_bytes"] / MIB
    # the capture stream's cuBLAS setup is no rung's: what fewer rungs can save leaves it out
    rows["beyond_pool_mib"] = (rows["graph_memory_bytes"] - rows["graph_pool_bytes"]
                               - rows["graph_setup_bytes"].fillna(0)) / MIB
    return rows[rows["graph_memory_mib"].notna() | rows["capture_s"].notna()]


def ladder_table(points: pd.DataFrame, frame: pd.DataFrame, results: list | None = None) -> pd.DataFrame:
    """points: one row per start-up (frame.points_frame); frame: one row per workload (padding waste);
    results: the points' results, for the KV trade's model (none: no predicted column)."""
    trade = kv_trade(results or [])
    graphs = graph_rows(points)
    # one ladder of two models, or on two GPU types: a row each, compared within its own (named as the other
    # tables name the point: by what all the graphbench points differ in, point_names.point_namer)
    ours = points[points["system"] == GRAPHBENCH]
    name = namer(ours["model"], ours["gpu"])
    rows, sources = [], []
    for (label, model, gpu), starts in graphs.groupby(["label", "model", "gpu"], sort=False):
        first = starts.iloc[0]
        cold = starts[[flag_is(c, True) for c in starts["startup_cold"]]]
        warm = starts[[not flag_is(c, True) for c in starts["startup_cold"]]]
        memory = _median(starts["graph_memory_mib"])
        on = (frame["label"] == label) & (frame["system"] == GRAPHBENCH) & (frame["gpu"] == gpu) & (frame["model"] == model)
        waste = frame.loc[on, "padding_waste_pct"]
        rows.append({
            "ladder": name(label, model, gpu),
            "-O": first["optimization_level"],
            "mode": first["cudagraph_mode_resolved"],
            "sizes": int(first["num_capture_sizes"]), "capture s (warm)": _median(warm["capture_s"]),
            "capture s (cold)": _median(cold["capture_s"]), "graph MiB": memory,
            "beyond pool MiB": _median(starts["beyond_pool_mib"]),
            "padding waste %": float(pd.to_numeric(waste, errors="coerce").mean()) if len(waste) else math.nan,
            **dict(zip(LADDER_COLUMNS[-3:], trade.get((label, model, gpu), (math.nan,) * 3))),
        })  # fmt: skip
        sources.append(f"{model}\n{gpu}")
    table = pd.DataFrame(rows, columns=LADDER_COLUMNS)
    for _, group in table.groupby([table["-O"], table["mode"], pd.Series(sources, index=table.index, dtype=object)],
                                  dropna=False, sort=False):
        largest = group.loc[group["sizes"].idxmax()]
        for i in group.index:
            table.loc[i, "sizes vs largest %"] = 100 * table.loc[i, "sizes"] / largest["sizes"]
            table.loc[i, "capture vs largest %"] = _ratio(table.loc[i], largest, "capture s (warm)", "capture s (cold)")
            table.loc[i, "beyond pool vs largest %"] = _pct(table.loc[i, "beyond pool MiB"], largest["beyond pool MiB"])
    return table


def _ratio(row: pd.Series, largest: pd.Series, *columns: str) -> float:
    """The first column both rows have (warm starts compare with warm starts)."""
    for column in columns:
        if not (math.isnan(row[column]) or math.isnan(largest[column])):
            return _pct(row[column], largest[column])
    return math.nan


def _pct(value: float, reference: float) -> float:
    return 100 * value / reference if reference and not math.isnan(reference) else math.nan


def kv_trade(results: list) -> dict[tuple[str, str], tuple[float, float, float]]:
    """(label, model, GPU type) -> (KV tokens, graph memory in KV tokens measured, and as the memory model fitted
    over that model's results on that GPU type predicts it) for the results whose start-up recorded graphs and a
    KV cache."""
    from graphbench.ladders.memory_model import memory_source

    by_source: dict[tuple[str, str], list] = {}
    for result in results:
        by_source.setdefault(memory_source(result), []).append(result)
    return {(label, model, gpu): trade for (model, gpu), group in by_source.items()
            for label, trade in _kv_trade_of_one_source(group).items()}


def _kv_trade_of_one_source(results: list) -> dict[str, tuple[float, float, float]]:
    from graphbench.errors import GraphbenchError
    from graphbench.ladders.memory_model import fit_memory_model, one_ladder_fully_captured
    from graphbench.reports.frame import capture_sizes_of

    try:
        model = fit_memory_model(results)
    except GraphbenchError:
        model = None  # no point with graphs to fit: no predicted column
    out = {}
    for result in results:
        startup = result.get("startup") or {}
        tokens, kv_bytes, graphs = (startup.get(k) for k in ("kv_cache_tokens", "kv_cache_bytes", "graph_memory_bytes"))
        if not all(isinstance(v, (int, float)) and v > 0 for v in (tokens, kv_bytes, graphs)):
            continue
        per_token = kv_bytes / tokens
        sizes = capture_sizes_of(result)
        # (the model knows one ladder recorded whole: two ladders or capture on demand get no prediction)
        known = model is not None and sizes and one_ladder_fully_captured(startup)
        predicted = model.predict(sizes) / per_token if known else math.nan
        out[str(result.get("label"))] = (float(tokens), graphs / per_token, predicted)
    return out
