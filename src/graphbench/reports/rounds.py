"""Rounds: a sweep point measured in several processes, read back as one point (no torch).

The unit of replication is the process. A sweep runs each graphbench point in R rounds, each a fresh
`graphbench run` process writing its own result file (`sweep.round` says which). Loading merges the
files of one point of one sweep into one record:

- `rounds`: one entry per process (index, position in its round's shuffled order, file, its start,
  how many of its repeats ran on a busy host);
- per workload, `round_medians`: each round's median of every metric over its repeats: **the samples
  every comparison, test and error bar uses**; `summary` is over them (n = rounds), so a table's
  median is the median of the rounds' medians; `repeats` holds every round's repeats (each tagged
  with its round), for within-process spread and the step-level tables;
- a first round that is an outlier against the others (the process right after a cold compile, or
  the first of a sweep) is excluded per workload, with the reason, and counted nowhere.

A result without `sweep.round` (written by `graphbench run`, or before rounds existed) is one round.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

from graphbench.reports.metric_catalogue import CATALOGUE, POINT, REPEAT
from graphbench.reports.stats import median, summarize

# A first round is an outlier when its median is further from the median of the other rounds than
# OUTLIER_SPREADS x their own range, and at least OUTLIER_MIN_PCT % away (a range of 0.1% must not
# make a 0.5% difference an outlier).
OUTLIER_SPREADS = 3.0
OUTLIER_MIN_PCT = 10.0
OUTLIER_METRIC = "output_tokens_per_s"
# The first and at least three others to measure it against: with two others, a host whose processes
# run in two speeds (an H200 host did: 2,100 or 3,300 tok/s) made a first process of the other speed
# an "outlier" and left two samples that agreed by chance.
MIN_ROUNDS_FOR_OUTLIER = 4


def round_info(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """The result's `sweep.round` record ({index, of, seed, position, id}), None outside a sweep's rounds."""
    sweep = result.get("sweep")
    info = sweep.get("round") if isinstance(sweep, Mapping) else None
    return dict(info) if isinstance(info, Mapping) and isinstance(info.get("index"), int) else None


def _merge_key(result: Mapping[str, Any]) -> tuple[str, ...] | None:
    """(sweep id, label, system, identity, GPU type): a point --resume measured again with other options keeps
    the sweep's id, and its new rounds must not merge with the old ones; rounds a mixed Ray cluster ran on two
    GPU types are two records (the report's series per GPU type), not one pooled point."""
    info = round_info(result)
    if info is None or result.get("status") != "ok":
        return None
    sweep = result.get("sweep") if isinstance(result.get("sweep"), Mapping) else {}
    identity = json.dumps(sweep.get("identity"), sort_keys=True, default=str)
    return (str(info.get("id")), str(result.get("label")), str(result.get("system")), identity, result_gpu(result))


def result_gpu(result: Mapping[str, Any]) -> str:
    """The GPU type a result ran on ('' on the CPU, or where its environment does not say); a result of a GPU
    device whose GPU type is not recorded is "<device> (GPU type not recorded)", never the CPU's."""
    environment = result.get("environment") if isinstance(result.get("environment"), Mapping) else {}
    if environment.get("gpu"):
        return str(environment["gpu"])
    device = environment.get("device")
    return f"{device} (GPU type not recorded)" if isinstance(device, str) and device not in ("", "cpu") else ""


def merge_rounds(results: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The results with each sweep point's round files merged into one record (first-seen order);
    results outside rounds (failed points, single runs) pass through, each a one-round record."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    order: list[Any] = []
    for result in results:
        key = _merge_key(result)
        if key is None:
            order.append(result)
            continue
        if key not in groups:
            order.append(key)
        groups.setdefault(key, []).append(result)
    return [merge_point(groups[item]) if isinstance(item, tuple) else item for item in order]


def _process_key(result: Mapping[str, Any]) -> tuple[str, ...]:
    """What one process's result is known by: its sweep, point and round; outside rounds, its whole content."""
    key, info = _merge_key(result), round_info(result)
    if key is not None and info is not None:
        return (*key, str(info["index"]))
    return ("content", json.dumps({k: v for k, v in result.items() if k != "_path"}, sort_keys=True, default=str))


def drop_repeated_processes(results: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The results with each process read once, and (file, why) for each file that repeats one already read:
    a copy of a round file (the same sweep, point and round; a second copy of a results folder, or a file
    copied beside it) was counted as one more process, which narrowed the noise and changed the test."""
    seen: dict[tuple[str, ...], str] = {}
    kept, repeated = [], []
    for result in results:
        key = _process_key(result)
        if key in seen:
            info = round_info(result)
            what = f"round {info['index']} of point {result.get('label')}" if info else "the same result"
            repeated.append((str(result.get("_path")), f"{what} again: already read from {seen[key]} (a copy?); "
                             "each process counts once: remove one of them"))
            continue
        seen[key] = str(result.get("_path"))
        kept.append(result)
    return kept, repeated


def _round_entry(result: Mapping[str, Any], index: int) -> dict[str, Any]:
    info = round_info(result) or {}
    startup = result.get("startup") if isinstance(result.get("startup"), Mapping) else {}
    busy = sum(len(w.get("busy_host_repeats") or []) for w in result.get("workloads") or [])
    repeats = sum(len(w.get("repeats") or []) for w in result.get("workloads") or [])
    kept = {k: startup.get(k) for k in ("total_s", "capture_s", "graph_memory_bytes", "cold")}
    if "graph_setup_bytes" in startup:  # (its absence marks a start before 2026-12-06: graph_memory_measure.py)
        kept["graph_setup_bytes"] = startup["graph_setup_bytes"]
    return {"index": index, "position": info.get("position"), "path": result.get("_path"), "startup": kept,
            "busy_host_repeats": busy, "repeats": repeats}


def merge_point(files: list[dict[str, Any]]) -> dict[str, Any]:
    """One point's round files (same sweep, label, system) as one record: see the module's docstring."""
    files = sorted(files, key=lambda r: (round_info(r) or {}).get("index", 0))
    # (the workloads are rebuilt below from every file's, untouched: no need to copy their repeats)
    merged = {key: copy.deepcopy(value) for key, value in files[0].items() if key != "workloads"}
    merged["workloads"] = files[0].get("workloads")
    merged["rounds"] = [_round_entry(r, (round_info(r) or {}).get("index", i + 1)) for i, r in enumerate(files)]
    merged["_paths"] = [r.get("_path") for r in files if r.get("_path")]
    # every process's starts (round 1: cold, then warm; each later round: one warm start)
    merged["startups"] = [dict(start, round=entry["index"]) for entry, r in zip(merged["rounds"], files)
                          for start in r.get("startups") or [] if isinstance(start, Mapping)]
    workloads = []
    for w in merged.get("workloads") or []:
        parts = [(entry["index"], _workload(r, w.get("name"))) for entry, r in zip(merged["rounds"], files)]
        workloads.append(merge_workload(w, [(i, part) for i, part in parts if part is not None]))
    merged["workloads"] = workloads
    return merged


def _workload(result: Mapping[str, Any], name: Any) -> dict[str, Any] | None:
    return next((w for w in result.get("workloads") or [] if isinstance(w, Mapping) and w.get("name") == name), None)


def process_medians(workload: Mapping[str, Any]) -> dict[str, float]:
    """One process's medians over its repeats: every catalogue metric and every summary key, the
    repeats it flagged as outliers left out."""
    skip = set((workload.get("outlier_repeats") or {}).keys()) if isinstance(workload.get("outlier_repeats"), Mapping) else set()
    repeats = [r for i, r in enumerate(workload.get("repeats") or []) if str(i) not in skip]
    out: dict[str, float] = {}
    summary = workload.get("summary") if isinstance(workload.get("summary"), Mapping) else {}
    for key, stats in summary.items():
        if isinstance(stats, Mapping) and isinstance(stats.get("median"), (int, float)):
            out[key] = float(stats["median"])
    for metric in CATALOGUE:
        if metric.scope == REPEAT:
            values = metric.repeat_samples({"repeats": repeats, "name": workload.get("name")})
            if values:
                out[metric.name] = median(values)
    return out


def merge_workload(first: Mapping[str, Any], parts: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    """A workload over its rounds: round medians (the samples), first-round outlier excluded, summary
    over the included rounds, every repeat tagged with its round."""
    merged = dict(first)
    rounds = [{"round": index, "excluded": None, "busy_host_repeats": len(part.get("busy_host_repeats") or []),
               "medians": process_medians(part)} for index, part in parts]
    if len(rounds) >= MIN_ROUNDS_FOR_OUTLIER:
        rounds[0]["excluded"] = first_round_outlier([r["medians"].get(OUTLIER_METRIC) for r in rounds])
    merged["round_medians"] = rounds
    # what each process recorded on demand (in its warm-up pass mostly, which the repeats do not count)
    merged["recorded_on_demand_rounds"] = [part.get("recorded_on_demand") or [] for _, part in parts]
    repeats, busy = [], []
    for index, part in parts:
        offset = len(repeats)
        repeats += [dict(r, round=index) for r in part.get("repeats") or []]
        busy += [offset + i for i in part.get("busy_host_repeats") or [] if isinstance(i, int)]
    merged["repeats"], merged["busy_host_repeats"] = repeats, busy
    included = [r["medians"] for r in rounds if not r["excluded"]]
    keys = dict.fromkeys(k for m in included for k in m)
    merged["summary"] = {k: summarize([m[k] for m in included if k in m]) for k in keys}
    return merged


def first_round_outlier(values: list[float | None]) -> str | None:
    """Why the first value is an outlier against the others (None when it is not, or cannot be told)."""
    first, others = values[0], [v for v in values[1:] if v is not None]
    if first is None or len(others) < MIN_ROUNDS_FOR_OUTLIER - 1:
        return None
    center = median(others)
    if center <= 0:
        return None
    off_pct = 100.0 * (first - center) / center
    range_pct = 100.0 * (max(others) - min(others)) / center
    if abs(off_pct) > max(OUTLIER_SPREADS * range_pct, OUTLIER_MIN_PCT):
        return (f"first round's {OUTLIER_METRIC} {off_pct:+.1f}% from the other rounds' median "
                f"(their range {range_pct:.1f}%): excluded as an outlier")
    return None


def included_rounds(workload: Mapping[str, Any]) -> dict[int, dict[str, float]]:
    """A workload's included rounds: round index -> that process's medians (an excluded first round gives
    none, and so does a result outside rounds: its one process's medians are the workload's own)."""
    rounds = workload.get("round_medians")
    if not isinstance(rounds, list):
        return {}
    return {int(r["round"]): dict(r.get("medians") or {}) for r in rounds
            if isinstance(r, Mapping) and isinstance(r.get("round"), int) and not r.get("excluded")}


def workload_samples(workload: Mapping[str, Any], metric_name: str) -> list[float]:
    """The per-process samples of a workload metric: the included rounds' medians (one per process)."""
    rounds = workload.get("round_medians")
    if isinstance(rounds, list) and rounds:
        return [float(r["medians"][metric_name]) for r in rounds
                if isinstance(r, Mapping) and not r.get("excluded") and metric_name in (r.get("medians") or {})]
    value = _process_median(workload, metric_name)
    return [] if value is None else [value]


def _process_median(workload: Mapping[str, Any], metric_name: str) -> float | None:
    """One metric's median over a single process's repeats (process_medians, for one metric only)."""
    metric = next((m for m in CATALOGUE if m.name == metric_name and m.scope == REPEAT), None)
    if metric is not None:
        skip = workload.get("outlier_repeats") if isinstance(workload.get("outlier_repeats"), Mapping) else {}
        repeats = [r for i, r in enumerate(workload.get("repeats") or []) if str(i) not in skip]
        values = metric.repeat_samples({"repeats": repeats, "name": workload.get("name")})
        if values:
            return median(values)
    stats = (workload.get("summary") or {}).get(metric_name) if isinstance(workload.get("summary"), Mapping) else None
    return float(stats["median"]) if isinstance(stats, Mapping) and isinstance(stats.get("median"), (int, float)) else None


def point_samples(result: Mapping[str, Any], metric) -> list[float]:
    """The per-process samples of a per-point metric (startup_s, ...): one per round's start."""
    if metric.scope != POINT:
        raise ValueError(f"{metric.name} is not a per-point metric")
    rounds = result.get("rounds")
    if isinstance(rounds, list) and rounds:
        values = [metric._get(r, f"{r.get('path') or result.get('_path') or 'result'} (round {r.get('index')})")
                  for r in rounds if isinstance(r, Mapping)]  # (a bad value named by its file)
        return [v for v in values if v is not None]
    value = metric.point_value(dict(result), str(result.get("_path") or "result"))
    return [] if value is None else [value]


def busy_rounds(workload: Mapping[str, Any]) -> int:
    """How many included rounds of a workload had a repeat flagged busy_host."""
    rounds = workload.get("round_medians")
    if isinstance(rounds, list) and rounds:
        return sum(1 for r in rounds if not r.get("excluded") and r.get("busy_host_repeats"))
    return 1 if workload.get("busy_host_repeats") else 0


def processes(result: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A point's record of each process: its rounds (merge_point's entries), else the result itself (one)."""
    rounds = result.get("rounds")
    if isinstance(rounds, list) and rounds:
        return [r for r in rounds if isinstance(r, Mapping)]
    return [result]


def busy_processes(result: Mapping[str, Any]) -> int:
    """How many of a point's processes had a repeat flagged busy_host (for its per-point metrics)."""
    if isinstance(result.get("rounds"), list) and result["rounds"]:
        return sum(1 for r in processes(result) if r.get("busy_host_repeats"))
    return 1 if any(w.get("busy_host_repeats") for w in result.get("workloads") or [] if isinstance(w, Mapping)) else 0


def startups_of(result: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every start-up a point measured: its `startups` list (cold then warm), else its one `startup`."""
    starts = result.get("startups")
    if isinstance(starts, list) and any(isinstance(s, Mapping) for s in starts):
        return [s for s in starts if isinstance(s, Mapping)]
    return [result["startup"]] if isinstance(result.get("startup"), Mapping) else []
