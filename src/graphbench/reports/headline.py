"""The headline table: per concurrency, the best graphbench configuration and the best peer.

Results measured on different GPUs (a sweep over a Ray cluster of mixed nodes, or folders of several
machines) are ranked per GPU type, and results of several models (a model axis, or folders of several
models reported together) per model: a row per (model, GPU, shape, concurrency), so that one GPU's or
one model's best never hides another's. `covered_models` names the models a report's figures are for.

Best = highest median output tokens/s at that concurrency (the median of its processes' medians), and
`tied_with` every configuration the best cannot be told from: no difference significant over the
processes and beyond the noise and the 5% minimum effect (reports/verdict.py). A headline that names one
winner where the data shows a tie picks noise.
The cost of the best configuration is its startup (median total over its cold starts, and over
its warm starts, reports.frame.points_frame) and its graph memory (the largest over its starts; none
where it recorded no CUDA graph).
A best configuration that stands for other labels (reports.aliases: the same engine, measured once)
names them in `best_also`; they are never ranked on their own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from graphbench.reports.frame import GRAPHBENCH, flag_is, series_samples
from graphbench.reports.point_names import gpu_suffix, result_model
from graphbench.reports.gate_thresholds import min_effect_pct

HEADLINE_COLUMNS = [
    "model", "gpu", "shape", "concurrency", "best", "output_tokens_per_s", "startup_cold_s", "startup_warm_s", "graph_memory_bytes",
    "best_peer", "peer_output_tokens_per_s", "speedup_vs_peer", "best_also", "tied_with",
]  # fmt: skip


def _tied(at: pd.DataFrame, best: str) -> str:
    """The configurations the best cannot be told from over processes (reports.verdict): 'label (why)'."""
    from graphbench.reports.verdict import IMPROVED, NA, REGRESSED, judge

    top = series_samples(at, best)
    out = []
    for series in sorted(set(at["series"]) - {best}):
        v = judge(top, series_samples(at, series), higher_is_better=True, min_effect_pct=min_effect_pct("output_tokens_per_s"))
        if v.verdict not in (IMPROVED, REGRESSED, NA):  # (too few processes to tell: not listed as a tie)
            noise = f", noise {v.noise_pct:.1f}%" if v.noise_pct is not None else ""
            out.append(f"{series} ({v.change_pct:+.1f}%{noise})")
    return "; ".join(out)


def _best(table: pd.DataFrame) -> tuple[str, float] | None:
    if table.empty:
        return None
    ordered = table.sort_values(["output_tokens_per_s", "series"], ascending=[False, True], kind="stable")
    top = ordered.iloc[0]
    return str(top["series"]), float(top["output_tokens_per_s"])


def covered_models(results: Iterable[Mapping[str, Any]]) -> list[str]:
    """The models of the results, sorted (each result's `model`, else its config's: point_names.result_model)."""
    return sorted({model for result in results if (model := result_model(result)) != "?"})


def _startup(points: pd.DataFrame, label: str, cold: bool) -> float:
    mask = (points["label"] == label) & (points["system"] == GRAPHBENCH)
    mask &= points["startup_cold"].map(lambda v: flag_is(v, cold))
    values = points.loc[mask, "startup_s"].dropna()
    return float(values.median()) if not values.empty else math.nan


def headline_table(frame: pd.DataFrame, points: pd.DataFrame,
                   aliases: Mapping[tuple[str, str], Mapping[str, list[str]]] | None = None) -> pd.DataFrame:
    """One row per measured (GPU, workload shape, concurrency), ascending; see HEADLINE_COLUMNS.

    Configurations are only compared on the same prompt/output shape. NaN / '' where absent.
    aliases: (model, GPU type) -> measured label -> the labels it stands for (reports.aliases.alias_groups)."""
    rows = frame[frame["concurrency"].notna() & frame["output_tokens_per_s"].notna()]
    # each GPU type is ranked apart under its own GPU column: its series without the GPU's name
    rows = rows.assign(series=[s.removesuffix(gpu_suffix(g)) for s, g in zip(rows["series"], rows["gpu"])])
    keys = ["model", "gpu", "series", "label", "system", "shape", "concurrency"]
    table = rows.groupby(keys, as_index=False).agg(
        output_tokens_per_s=("output_tokens_per_s", "median"),
        output_tokens_per_s_samples=("output_tokens_per_s_samples", lambda s: tuple(v for t in s if isinstance(t, tuple) for v in t)))
    out = []
    for model, gpu, shape, conc in sorted(set(zip(table["model"], table["gpu"], table["shape"], table["concurrency"]))):
        at = table[(table["model"] == model) & (table["gpu"] == gpu) & (table["shape"] == shape)
                   & (table["concurrency"] == conc)]
        on_gpu = points[(points["gpu"] == gpu) & (points["model"] == model)]
        best = _best(at[at["system"] == GRAPHBENCH])
        peer = _best(at[at["system"] != GRAPHBENCH])
        row = {"model": model, "gpu": gpu, "shape": shape, "concurrency": conc, "best": "", "output_tokens_per_s": math.nan, "startup_cold_s": math.nan,
               "startup_warm_s": math.nan, "graph_memory_bytes": math.nan, "best_peer": "",
               "peer_output_tokens_per_s": math.nan, "speedup_vs_peer": math.nan, "best_also": "", "tied_with": ""}  # fmt: skip
        if best is not None:
            series, tps = best
            label = at.loc[at["series"] == series, "label"].iloc[0]
            # (a point that recorded no graph, as every point on the CPU, measured no graph memory: NaN, not 0)
            memory = on_gpu.loc[(on_gpu["label"] == label) & (on_gpu["system"] == GRAPHBENCH)
                                & (on_gpu["cudagraph_mode_resolved"] != "NONE"), "graph_memory_bytes"]
            row.update(best=series, output_tokens_per_s=tps, startup_cold_s=_startup(on_gpu, label, True),
                       startup_warm_s=_startup(on_gpu, label, False),
                       graph_memory_bytes=float(memory.max()) if memory.notna().any() else math.nan,
                       best_also=", ".join((aliases or {}).get((model, gpu), {}).get(label, [])),
                       tied_with=_tied(at[at["system"] == GRAPHBENCH], series))  # fmt: skip
        if peer is not None:
            row.update(best_peer=peer[0], peer_output_tokens_per_s=peer[1])
            if best is not None and peer[1] > 0:
                row["speedup_vs_peer"] = best[1] / peer[1]
        out.append(row)
    return pd.DataFrame(out, columns=HEADLINE_COLUMNS)
