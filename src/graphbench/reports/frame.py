"""Result dicts (docs/RESULTS_SCHEMA.md) -> pandas DataFrames for tables, charts and plans.

`results_frame`: one row per point x workload (a point without workloads keeps one row with empty
workload columns, so its startup still shows). `points_frame`: one row per successful point with
the startup breakdown. `failures_frame`: the failed points. Metric values are the medians over the
point's processes (rounds: the merged result's ``summary[metric]["median"]``, reports/rounds.py), else
the median of the repeats; `output_tokens_per_s_samples` holds the per-process samples, `rounds` their
number and `round_spread_pct` their spread (the point's noise).
No torch import.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from graphbench.reports.point_names import namer, result_model
from graphbench.reports.rounds import included_rounds, result_gpu, startups_of, workload_samples
from graphbench.reports.stats import spread_pct
from graphbench.env import hatches_text

# Latency metrics by name: (repeat field, statistic). Names follow the summary's aliases.
LATENCY_BASES = ("ttft", "tpot", "itl", "e2e", "step")
LATENCY_STATS = ("mean", "p50", "p90", "p99")
LATENCY_METRICS: dict[str, tuple[str, str]] = {
    f"{base}_{stat}_ms": (f"{base}_ms", stat) for base in LATENCY_BASES for stat in LATENCY_STATS
}
STARTUP_PARTS = ("load_s", "kv_cache_s", "kernel_choices_s", "compile_import_s", "dynamo_s", "inductor_s", "compile_sizes_s",
                 "loaded_s", "capture_s", "first_call_s")  # fmt: skip
GRAPHBENCH = "graphbench"

# summary.csv columns, in order (RESULTS_SCHEMA units: s, ms, bytes, per second).
SUMMARY_COLUMNS = [
    "label", "system", "model", "optimization_level", "cudagraph_mode_requested", "cudagraph_mode_resolved",
    "performance_mode", "num_capture_sizes", "workload", "workload_kind", "concurrency", "request_rate",
    "output_tokens_per_s", "total_tokens_per_s", "requests_per_s", "ttft_p50_ms", "ttft_p99_ms",
    "tpot_p50_ms", "tpot_p99_ms", "padding_waste_pct", "padding_token_pct", "eager_fraction", "startup_cold",
    "startup_s", "startup_cold_s", "startup_warm_s", "graph_memory_bytes", "graph_pool_bytes", "graph_setup_bytes",
    "busy_host_repeats",
    "same_engine_as", "rounds", "round_spread_pct",
]  # fmt: skip


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _num(value: Any) -> float:
    """A finite-or-not float for numbers, NaN for anything else (None, strings, bools)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


def median_of(values: Iterable[Any]) -> float:
    """The median of the numbers among values (NaN when there are none)."""
    nums = [v for v in map(_num, values) if not math.isnan(v)]
    return statistics.median(nums) if nums else math.nan


def _repeat_value(repeat: Mapping[str, Any], metric: str, workload: Mapping[str, Any]) -> Any:
    if metric in LATENCY_METRICS:
        field, stat = LATENCY_METRICS[metric]
        return _get(repeat, field, stat)
    if metric == "requests_per_s" and "requests_per_s" not in repeat:
        n, duration = _num(workload.get("num_requests")), _num(repeat.get("duration_s"))
        return n / duration if duration > 0 else None
    if metric == "padding_token_pct" and "padding_token_pct" not in repeat:
        overhead = _num(repeat.get("padding_overhead"))  # sum(padded) / sum(real) - 1, recorded before it
        return 100 * overhead / (1 + overhead) if overhead >= 0 else None
    return repeat.get(metric)


def metric_median(workload: Mapping[str, Any], metric: str) -> float:
    """Median of a workload metric over repeats: summary median when recorded, else from the repeats."""
    median = _num(_get(workload, "summary", metric, "median"))
    if not math.isnan(median):
        return median
    repeats = workload.get("repeats")
    if not isinstance(repeats, list):
        return math.nan
    return median_of(_repeat_value(r, metric, workload) for r in repeats if isinstance(r, Mapping))


def _shape(workload: Mapping[str, Any]) -> str:
    def one(desc: Any) -> str:
        if not isinstance(desc, Mapping):
            return "?" if desc is None else str(desc)
        if desc.get("dist") == "fixed" and "value" in desc:
            return str(desc["value"])
        rest = ",".join(f"{k}={v}" for k, v in sorted(desc.items()) if k != "dist")
        return f"{desc.get('dist', '?')}({rest})"

    return f"in {one(workload.get('prompt_len'))} / out {one(workload.get('output_len'))}"


def capture_sizes_of(result: Mapping[str, Any]) -> list[int] | None:
    """The ladder the point captured: startup.capture_sizes, else the resolved config's list (with two
    ladders: the decode ladder; startup.mixed_capture_sizes holds the other)."""
    sizes = _get(result, "startup", "capture_sizes")
    if sizes is None:
        sizes = _get(result, "config", "compilation", "cudagraph_capture_sizes")
    if not isinstance(sizes, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in sizes):
        return None
    return sorted(set(sizes))


def graphs_recorded(result: Mapping[str, Any]) -> bool:
    """The point recorded CUDA graphs: a resolved mode other than NONE and a captured ladder."""
    resolved = _get(result, "startup", "cudagraph_mode", "resolved")
    return resolved not in (None, "", "NONE") and bool(capture_sizes_of(result))


def asked_ladder(result: Mapping[str, Any]) -> list[int] | None:
    """The ladder the point's config asked for (config.compilation.cudagraph_capture_sizes), None when it
    asked for no CUDA graph (cudagraph mode NONE) or holds no ladder. Where graphs were recorded it is the
    captured one (startup.capture_sizes); on the CPU that is empty and this is what would have been captured."""
    if graphs_recorded(result):
        return capture_sizes_of(result)
    requested = _get(result, "startup", "cudagraph_mode", "requested") or _get(result, "config", "compilation", "cudagraph_mode")
    sizes = _get(result, "config", "compilation", "cudagraph_capture_sizes")
    if requested in (None, "NONE") or not isinstance(sizes, list) or not sizes:
        return None
    if not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes):
        return None
    return sorted(set(sizes))


def busy_repeats(workload: Mapping[str, Any]) -> dict[int, str]:
    """0-based repeat index -> why its host was busy, for the repeats flagged `busy_host` (a reason
    string) or listed in the workload's `busy_host_repeats`; {} in results written before them."""
    repeats = workload.get("repeats") if isinstance(workload.get("repeats"), list) else []
    busy = {i: r["busy_host"] for i, r in enumerate(repeats)
            if isinstance(r, Mapping) and isinstance(r.get("busy_host"), str) and r["busy_host"]}
    listed = workload.get("busy_host_repeats")
    for i in listed if isinstance(listed, list) else []:
        if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(repeats):
            busy.setdefault(i, "busy host")
    return dict(sorted(busy.items()))


def flag_is(value: Any, flag: bool) -> bool:
    """True when a startup_cold cell (bool, numpy bool, NA) is exactly flag."""
    return type(value).__name__ in ("bool", "bool_") and bool(value) is flag


def _start_total(result: Mapping[str, Any], cold: bool) -> float:
    return median_of(s.get("total_s") for s in startups_of(result) if s.get("cold") is cold)


def _point_fields(result: Mapping[str, Any]) -> dict[str, Any]:
    startup = result.get("startup") if isinstance(result.get("startup"), Mapping) else {}
    mode = startup.get("cudagraph_mode") if isinstance(startup.get("cudagraph_mode"), Mapping) else {}
    sizes = capture_sizes_of(result)
    level = _get(result, "config", "optimization_level")
    requested = mode.get("requested") or _get(result, "config", "compilation", "cudagraph_mode")
    cold = startup.get("cold")
    tp = _get(result, "config", "parallel", "tensor_parallel_size")
    return {
        "label": str(result.get("label") or Path(str(result.get("_path", "point"))).stem),
        "system": str(result.get("system") or "?"),
        "model": result_model(result),
        "optimization_level": level if isinstance(level, int) and not isinstance(level, bool) else pd.NA,
        "cudagraph_mode_requested": requested if isinstance(requested, str) else "",
        "cudagraph_mode_resolved": mode.get("resolved") if isinstance(mode.get("resolved"), str) else "",
        "performance_mode": str(_get(result, "config", "compilation", "performance_mode") or ""),
        "num_capture_sizes": len(sizes) if sizes is not None else pd.NA,
        "tensor_parallel_size": tp if isinstance(tp, int) and not isinstance(tp, bool) and tp > 0 else 1,
        "startup_cold": bool(cold) if isinstance(cold, bool) else pd.NA,
        "startup_s": _num(startup.get("total_s")),
        "startup_cold_s": _start_total(result, True),
        "startup_warm_s": _start_total(result, False),
        "graph_memory_bytes": _num(startup.get("graph_memory_bytes")),
        "graph_pool_bytes": _num(startup.get("graph_pool_bytes")),
        "graph_setup_bytes": _num(startup.get("graph_setup_bytes", 0)),  # (absent before 2026-12-06: none counted)
        "gpu": result_gpu(result),
        "path": str(result.get("_path", "")),
    }


def series_samples(frame: pd.DataFrame, series: str, *, concurrency: float | None = None,
                   system: str | None = None) -> list[float]:
    """The per-process output tokens/s samples of a series' rows (at one concurrency, of one system)."""
    at = frame[frame["series"] == series]
    if concurrency is not None:
        at = at[at["concurrency"] == concurrency]
    if system is not None:
        at = at[at["system"] == system]
    return [float(v) for t in at.get("output_tokens_per_s_samples", []) if isinstance(t, tuple) for v in t]


def ok_results(results: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in results if r.get("status", "ok") == "ok"]


BASE_METRICS = ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s", "padding_waste_pct",
                "padding_token_pct", "eager_fraction", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms")  # fmt: skip


def results_frame(results: Iterable[Mapping[str, Any]], extra_metrics: Iterable[str] = ()) -> pd.DataFrame:
    """One row per successful point x workload with the medians of the headline metrics.

    Extra columns beyond SUMMARY_COLUMNS: tensor_parallel_size, gpu, path, shape (prompt/output
    lengths) and series (the label, plus the shape when the results mix several shapes and the model
    when they are of several models).
    """
    metrics = list(dict.fromkeys([*BASE_METRICS, *extra_metrics]))
    rows = []
    for result in ok_results(results):
        point = _point_fields(result)
        workloads = [w for w in result.get("workloads") or [] if isinstance(w, Mapping)]
        if not workloads:
            rows.append(dict(point, workload="", workload_kind="", shape="", same_engine_as=""))
        for w in workloads:
            row = dict(point, workload=str(w.get("name") or ""), workload_kind=str(w.get("kind") or ""), same_engine_as="")
            row["concurrency"] = _num(w.get("concurrency"))
            row["request_rate"] = _num(w.get("request_rate"))
            row["shape"] = _shape(w)
            row["busy_host_repeats"] = len(busy_repeats(w))
            for metric in metrics:
                row[metric] = metric_median(w, metric)
            samples = workload_samples(w, "output_tokens_per_s")
            row["output_tokens_per_s_samples"] = tuple(samples)
            row["round_medians"] = included_rounds(w)  # each process's medians (reports/plan_processes.py)
            row["rounds"] = len(samples)
            row["round_spread_pct"] = spread_pct(samples) if len(samples) >= 2 else math.nan
            rows.append(row)
    extra = [m for m in metrics if m not in SUMMARY_COLUMNS]  # (same_engine_as: filled in by reports.aliases)
    frame = pd.DataFrame(rows, columns=[*SUMMARY_COLUMNS, *extra, "tensor_parallel_size", "gpu", "path", "shape",
                                        "output_tokens_per_s_samples", "round_medians"])
    shapes = set(frame.loc[frame["workload"] != "", "shape"])
    many = len(shapes) > 1
    frame["series"] = [f"{lbl} [{shp}]" if many and shp else lbl for lbl, shp in zip(frame["label"], frame["shape"])]
    # the same label of two models, or on two GPU types (two machines' folders): never one series
    name = namer(frame["model"], frame["gpu"])
    frame["series"] = [name(series, model, gpu) for series, model, gpu in zip(frame["series"], frame["model"], frame["gpu"])]
    # one label run by graphbench and by a peer (`run --system hf-eager --label O2_default`): never one series
    systems = frame.groupby("series")["system"].nunique()
    shared = set(systems[systems > 1].index)
    frame["series"] = [f"{series} ({system})" if series in shared and system != GRAPHBENCH else series
                       for series, system in zip(frame["series"], frame["system"])]
    return frame


def points_frame(results: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per start-up of each successful point (a point may hold a cold and a warm start):
    point identity, then that start's cold flag, total and breakdown (s), graph memory and capture."""
    rows = []
    for result in ok_results(results):
        point = _point_fields(result)
        for start in startups_of(result) or [{}]:
            row = dict(point, startup_cold=start.get("cold") if isinstance(start.get("cold"), bool) else pd.NA,
                       startup_s=_num(start.get("total_s")), graph_memory_bytes=_num(start.get("graph_memory_bytes")))
            for part in STARTUP_PARTS:
                row[part] = _num(start.get(part))
            if pd.isna(row["kernel_choices_s"]) and isinstance(start.get("kernel_choices"), Mapping):
                row["kernel_choices_s"] = _num(start["kernel_choices"].get("seconds"))  # (files before 2026-12-05)
            rows.append(row)
    columns = [*_point_fields({}).keys(), *STARTUP_PARTS]
    return pd.DataFrame(rows, columns=columns)


def failures_frame(results: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Failed points: label, system, model, reason, stderr tail, file."""
    rows = []
    for result in results:
        if result.get("status", "ok") == "ok":
            continue
        failure = result.get("failure") if isinstance(result.get("failure"), Mapping) else {}
        rows.append(
            {
                "label": str(result.get("label") or "?"),
                "system": str(result.get("system") or "?"),
                "model": str(result.get("model") or "?"),
                "status": str(result.get("status")),
                "reason": str(failure.get("reason") or "(no reason recorded)"),
                "stderr_tail": str(failure.get("stderr_tail") or ""),
                "path": str(result.get("_path", "")),
            }
        )
    return pd.DataFrame(rows, columns=["label", "system", "model", "status", "reason", "stderr_tail", "path"])


def environment_line(results: Iterable[Mapping[str, Any]]) -> str:
    """'GPU NVIDIA H200 (driver 580) | graphbench 0.1.0 | torch 2.11.0 | ...' over the given results."""
    keys = (("gpu", "GPU"), ("gpu_driver", "driver"), ("graphbench", "graphbench"), ("torch", "torch"),
            ("triton", "triton"), ("cuda", "CUDA"), ("transformers", "transformers"))  # fmt: skip
    parts = []
    results = list(results)
    if not any(_get(r, "environment", "gpu") for r in results):
        keys = (("device", "device"), *keys[1:])
    for key, name in keys:
        values = sorted({str(v) for r in results if (v := _get(r, "environment", key)) not in (None, "")})
        if values:
            parts.append(f"{name} {' / '.join(values)}")
    per_result = [hatches_text(_get(r, "environment", "switches")) for r in results]
    changed = sorted({text for text in per_result if text})
    if changed:
        some = "" if all(text == changed[0] for text in per_result) else " (not in every result)"
        parts.append(f"debug hatches {' / '.join(changed)}{some}")
    return " | ".join(parts) if parts else "environment not recorded"
