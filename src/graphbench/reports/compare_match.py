"""Load the result files of both sides of a comparison and pair them by point (no torch).

A point is (label, system); when one side holds several results of the same point (re-runs),
they are pooled into one Point. Where either side holds a point's results of several GPU types (two
machines' folders), each GPU type is a point of its own, matched with the same GPU type on the other side:
pooled, an H100's processes and an H200's make a noise floor of the hardware's gap, which hides a
regression on either. Failed results are set aside with their reason; matched points with a different
model or config hash are refused unless allow_mismatch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphbench.errors import GraphbenchError
from graphbench.reports.kernel_choices_diff import choices_differ
from graphbench.reports.point_names import gpu_suffix
from graphbench.reports.rounds import result_gpu
from graphbench.reports.store import LoadedResults, load_results
from graphbench.env import hatches_text

NOT_A_RESULT = "not a graphbench result"  # store.load_results' reason for JSON files of another kind
PointKey = tuple[str, str]  # (label, system)


def result_where(result: dict[str, Any]) -> str:
    """Where a result came from, for messages: its file, else its label."""
    return str(result.get("_path") or f"result {result.get('label')!r}")


@dataclass
class Point:
    """One benchmark point on one side: every result file of that (label, system), pooled."""

    label: str
    system: str
    results: list[dict[str, Any]] = field(default_factory=list)
    gpu: str | None = None  # the GPU type, where the point's results span several and are matched per type

    @property
    def key(self) -> PointKey:
        return (self.label, self.system)

    @property
    def name(self) -> str:
        return f"{self.label} ({self.system})" + (gpu_suffix(self.gpu) if self.gpu is not None else "")

    @property
    def paths(self) -> list[str]:
        return [result_where(r) for r in self.results]

    def values(self, key: str) -> list[Any]:
        """The distinct values of a top-level field over the pooled results, in order."""
        return list(dict.fromkeys(r.get(key) for r in self.results))


@dataclass
class Matching:
    pairs: list[tuple[Point, Point]]  # (baseline, current), sorted by key
    only_baseline: list[Point]
    only_current: list[Point]
    failed: list[str]  # "baseline: O2 (graphbench) failed: <reason> [path]"
    mismatches: list[str]  # model / config hash differences
    warnings: list[str]


def load_side(paths: str | Path | Iterable[str | Path], side: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Load the result files of one side; GraphbenchError when none loads. Returns (results, warnings)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = list(paths)
    if not paths:
        raise GraphbenchError(f"no {side} result files or folders given")
    loaded = load_results(paths)
    foreign = [file for file, why in loaded.skipped if why == NOT_A_RESULT]
    warnings = [f"{side}: skipped malformed file {file}: {why}" for file, why in loaded.skipped if why != NOT_A_RESULT]
    if foreign:  # e.g. a report's summary.json next to the results: harmless, one line
        warnings.append(f"{side}: ignored {len(foreign)} JSON file(s) that are not graphbench results "
                        f"(e.g. {foreign[0]})")
    if not loaded.results:
        shown = ", ".join(map(str, paths))
        extra = f" ({len(loaded.skipped)} malformed file(s) skipped: {loaded.skipped[0][0]}: {loaded.skipped[0][1]})" \
            if loaded.skipped else ""
        raise GraphbenchError(f"no {side} results loaded from {shown}{extra}")
    return loaded.results, warnings


def _as_list(results: LoadedResults | Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(results, LoadedResults):
        return list(results.results)
    return list(results)


def index_points(results: Iterable[dict[str, Any]], side: str) -> tuple[dict[PointKey, Point], list[str]]:
    """Group results by (label, system). Returns (ok points, descriptions of failed results)."""
    points: dict[PointKey, Point] = {}
    failed: list[str] = []
    for result in results:
        if not isinstance(result, dict):
            raise GraphbenchError(f"{side}: a result is not a JSON object")
        where = result_where(result)
        label, system, status = result.get("label"), result.get("system"), result.get("status")
        for key, value in (("label", label), ("system", system), ("status", status)):
            if not isinstance(value, str) or not value:
                raise GraphbenchError(f"{side}: {where}: missing or invalid {key!r}")
        if status != "ok":
            failure = result.get("failure") or {}
            reason = failure.get("reason") if isinstance(failure, dict) else failure
            failed.append(f"{side}: {label} ({system}) {status}: {reason or 'no reason recorded'} [{where}]")
            continue
        workloads = result.get("workloads", [])
        if not isinstance(workloads, list) or not all(isinstance(w, dict) for w in workloads):
            raise GraphbenchError(f"{side}: {where}: 'workloads' is not a list of objects")
        for w in workloads:
            if not isinstance(w.get("name"), str):
                raise GraphbenchError(f"{side}: {where}: a workload has no name")
        points.setdefault((label, system), Point(label, system)).results.append(result)
    return points, failed


def match_results(
    baseline: LoadedResults | Iterable[dict[str, Any]],
    current: LoadedResults | Iterable[dict[str, Any]],
    *,
    allow_mismatch: bool = False,
) -> Matching:
    """Pair points by (label, system), and by GPU type where a side holds several (see the module doc); model or
    config hash or workload settings differences raise unless allow_mismatch."""
    base_points, base_failed = index_points(_as_list(baseline), "baseline")
    cur_points, cur_failed = index_points(_as_list(current), "current")
    pairs, only_b, only_c = [], [], []
    for key in sorted(base_points.keys() & cur_points.keys()):
        matched, left_b, left_c = _per_gpu_type(base_points[key], cur_points[key])
        pairs += matched
        only_b += left_b
        only_c += left_c
    only_b = sorted(only_b + [base_points[k] for k in base_points.keys() - cur_points.keys()], key=_order)
    only_c = sorted(only_c + [cur_points[k] for k in cur_points.keys() - base_points.keys()], key=_order)
    warnings: list[str] = []
    mismatches: list[str] = []
    said: dict[str, list[str]] = {}  # a line for many points (one GPU's kernel choices, one clock): said once
    for b, c in pairs:
        for fld, what in (("model", "model"), ("config_hash", "config hash")):
            bv, cv = b.values(fld), c.values(fld)
            if len(bv) > 1 or len(cv) > 1 or bv != cv:
                # re-runs pooled into one point that differ among themselves: the same set on both sides
                # read 'baseline 7/8 vs current 7/8', as if the two sides differed
                within = [side for side, values in (("baseline", bv), ("current", cv)) if len(values) > 1]
                among = f" (the {' and the '.join(within)} results of this point differ among themselves)" \
                    if within else ""
                mismatches.append(
                    f"{b.name}: {what} differs: baseline {'/'.join(map(str, bv))} "
                    f"vs current {'/'.join(map(str, cv))}{among}")
        mismatches += _workload_mismatches(b, c)
        # the engine's debug hatches (recorded as "switches") do not touch the transformers peers
        fields = ("gpu", "device", "torch", "switches") if b.system == "graphbench" else ("gpu", "device", "torch")
        differ = set()
        for fld in fields:
            bv = list(dict.fromkeys(_env_value(r, fld) for r in b.results))
            cv = list(dict.fromkeys(_env_value(r, fld) for r in c.results))
            if bv != cv:
                differ.add(fld)
                name = "debug hatches differ" if fld == "switches" else f"environment {fld} differs"
                warnings.append(f"{b.name}: {name}: baseline {'/'.join(map(str, bv))} "
                                f"vs current {'/'.join(map(str, cv))}")
        # (two GPU types choose apart by themselves: no cache root makes them equal; the line above says it)
        kernels = choices_differ(b.results, c.results) if b.system == "graphbench" and "gpu" not in differ else None
        if kernels:  # one GPU's choices serve every config on it
            said.setdefault(kernels, []).append(b.name)
        clocks = _step_clocks(b, c) if b.system == "graphbench" else None
        if clocks:
            said.setdefault(clocks, []).append(b.name)
    warnings += [f"{_names(points)}: {line}" for line, points in said.items()]
    if mismatches and not allow_mismatch:
        more = f" (and {len(mismatches) - 1} more)" if len(mismatches) > 1 else ""
        raise GraphbenchError(f"matched points were run with different settings: {mismatches[0]}{more}; "
                              "pass --allow-mismatch (allow_mismatch=True) to compare them anyway")
    warnings = [f"mismatch allowed: {m}" for m in mismatches] + warnings
    if pairs and not only_b and not only_c and all(_files(b) == _files(c) and _files(b) for b, c in pairs):
        warnings.insert(0, "the baseline and the current are the same result files: every row is the same data on "
                           "both sides (for an A/A, measure the commit twice into two folders)")
    sides = (("baseline", [b for b, _ in pairs] + only_b), ("current", [c for _, c in pairs] + only_c))
    for side, points in sides:
        for p in sorted(points, key=_order):
            if len(p.results) > 1:  # re-runs: pooled on purpose (docs/CI.md), said so
                warnings.append(f"{side}: point {p.name} has {len(p.results)} runs: their processes are pooled (a history)")
    for p in only_b:
        warnings.append(f"point {p.name} is only in the baseline: not compared")
    for p in only_c:
        warnings.append(f"point {p.name} is only in the current results: not compared")
    return Matching(pairs, only_b, only_c, base_failed + cur_failed, mismatches, warnings)


def _files(point: Point) -> set[str]:
    """The files a point's results were read from (none where they were given as dicts)."""
    return {str(r["_path"]) for r in point.results if r.get("_path")}


# what makes two workloads of one name the same traffic (a trace's path differs between machines: not compared)
WORKLOAD_SETTINGS = ("kind", "concurrency", "request_rate", "prompt_len", "output_len", "num_requests", "seed",
                     "prompt_kind", "lora_share")


def _workload_settings(point: Point) -> dict[str, list[dict[str, Any]]]:
    """Each workload name's distinct settings over the point's pooled results."""
    seen: dict[str, list[dict[str, Any]]] = {}
    for result in point.results:
        for workload in result.get("workloads") or []:
            if isinstance(workload, dict):
                settings = {k: workload[k] for k in WORKLOAD_SETTINGS if k in workload}
                if settings not in (found := seen.setdefault(str(workload.get("name")), [])):
                    found.append(settings)
    return seen


def _workload_mismatches(b: Point, c: Point) -> list[str]:
    """A workload of one name run with other settings on the two sides (or among a side's pooled runs): its
    figures measure other traffic, a difference no code made. Settings a side's results do not record (written
    by an older graphbench) are not compared."""
    base, cur = _workload_settings(b), _workload_settings(c)
    out = []
    for name in sorted(base.keys() & cur.keys()):
        sides = base[name] + cur[name]
        keys = [k for k in WORKLOAD_SETTINGS if all(k in settings for settings in sides)]
        differ = [k for k in keys if len({repr(settings[k]) for settings in sides}) > 1]
        if differ:
            shown = "; ".join(f"{k} baseline {'/'.join(_setting(s[k]) for s in base[name])} vs current "
                              f"{'/'.join(_setting(s[k]) for s in cur[name])}" for k in differ)
            out.append(f"{b.name}: workload {name} was run with other settings: {shown}")
    return out


def _setting(value: Any) -> str:
    if isinstance(value, dict) and value.get("dist") == "fixed":
        return str(value.get("value"))
    if isinstance(value, dict) and value.get("dist") in ("uniform", "normal") and all(
            isinstance(value.get(k), (int, float)) for k in "ab"):
        return f"{value['dist']}:{value['a']:g}{'-' if value['dist'] == 'uniform' else ','}{value['b']:g}"
    return str(value)


def other_gpu_types(matching: Matching) -> str:
    """Where no point matched because the sides ran the same points on different GPU types (points split per
    GPU type, _per_gpu_type): ' on the same GPU type (the baseline ran them on A, B; the current on C)'; else ''."""
    base = {p.key: p.gpu for p in matching.only_baseline if p.gpu is not None}
    cur = {p.key: p.gpu for p in matching.only_current if p.gpu is not None}
    if matching.pairs or not base.keys() & cur.keys():
        return ""

    def gpus(points: list[Point]) -> str:
        return ", ".join(sorted({p.gpu or "the CPU" for p in points if p.gpu is not None}))

    return (f" on the same GPU type (the baseline ran them on {gpus(matching.only_baseline)}; the current on "
            f"{gpus(matching.only_current)})")


def _step_clocks(base: Point, cur: Point) -> str | None:
    """A line where the sides timed their steps two ways (environment.step_clock: absent before 2026-12-06)."""
    def how(point: Point) -> str:
        clocks = {_env_value(r, "step_clock") for r in point.results}
        if clocks == {None}:
            return "from each step's own start (written before the step clock, 2026-12-06)"
        return "from the end of the step before while requests ran" if None not in clocks else "both ways (pooled)"

    b, c = how(base), how(cur)
    if b == c:
        return None
    return (f"step times timed two ways: the baseline's {b}, the current's {c}; step_*_ms and the per-mode step "
            "means (full_step_ms) moved with the clock (the caller's time between steps), not only with the code: "
            "measure the baseline again to compare them")


def _names(points: list[str]) -> str:
    """'A', 'A and B', or 'A, B and 3 more points'."""
    if len(points) <= 2:
        return " and ".join(points)
    return f"{points[0]}, {points[1]} and {len(points) - 2} more point{'s' if len(points) > 3 else ''}"


def _order(point: Point) -> tuple[str, str, str]:
    return (*point.key, point.gpu or "")


def _by_gpu(point: Point) -> dict[str, Point]:
    """The point's results split by GPU type ('' where a result does not say), first-seen order."""
    out: dict[str, Point] = {}
    for result in point.results:
        gpu = result_gpu(result)
        out.setdefault(gpu, Point(point.label, point.system, gpu=gpu)).results.append(result)
    return out


def _per_gpu_type(base: Point, cur: Point) -> tuple[list[tuple[Point, Point]], list[Point], list[Point]]:
    """(pairs, only in the baseline, only in the current) of one point: itself when each side ran on one GPU
    type (two different types are compared, with a warning); else a pair per GPU type both sides ran on."""
    b, c = _by_gpu(base), _by_gpu(cur)
    if len(b) == 1 and len(c) == 1:
        return [(base, cur)], [], []
    return ([(b[g], c[g]) for g in sorted(b.keys() & c.keys())], [b[g] for g in sorted(b.keys() - c.keys())],
            [c[g] for g in sorted(c.keys() - b.keys())])


def _env_value(result: dict[str, Any], field: str) -> Any:
    """An environment field of a result, hashable: the hatches as 'A=1 B=0' ('none' when none was set)."""
    env = result.get("environment")
    value = env.get(field) if isinstance(env, dict) else None
    if field == "switches":
        return hatches_text(value) or "none"
    # a hand-edited object or list (unhashable: dict.fromkeys raised TypeError, a traceback): as JSON
    return json.dumps(value, sort_keys=True, default=str) if isinstance(value, (dict, list)) else value
