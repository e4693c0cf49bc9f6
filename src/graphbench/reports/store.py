"""The results store: self-describing, versioned JSON result files, written atomically, never overwritten.

Layout: <results>/<machine>/<NNNN>_<label>.json. No torch import: reports, compare, gate and plan
run without torch installed. `load_results` skips, with a one-line reason, files that are not JSON,
not a graphbench result, of an unknown schema_version, or whose shape is wrong (`check_shape`).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from graphbench.errors import GraphbenchError
from graphbench.files import create_temp
from graphbench.reports.result_numbers import check_metrics, check_numbers, check_summary

SCHEMA_VERSION = 2
KIND = "graphbench-result"
_NAME = re.compile(r"^(\d+)_(.+)\.json$")  # NNNN_, and beyond 9999 (10000_... must count, or the next
# number is 10000 again and again: an endless loop once that name exists)
MAX_RESULT_BYTES = 64 << 20  # a sweep point's file is ~100 KB


def safe_label(label: str) -> str:
    """A file-name-safe version of a point label."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-")[:80] or "point"


def machine_dir(results_dir: Path, machine: str) -> Path:
    return Path(results_dir) / safe_label(machine)


def write_result(results_dir: str | Path, machine: str, label: str, result: dict[str, Any]) -> Path:
    """Write result as the next <NNNN>_<label>.json under results/machine, atomically; never overwrite."""
    directory = machine_dir(Path(results_dir), machine)
    directory.mkdir(parents=True, exist_ok=True)
    payload = json.dumps(dict(result, schema_version=SCHEMA_VERSION, kind=KIND), indent=1, sort_keys=True)
    fd, tmp = create_temp(directory, prefix=".tmp-", suffix=".json")  # the umask's mode, not 0600
    with os.fdopen(fd, "w") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    taken: set[str] = set()
    while True:
        numbers = [int(m.group(1)) for p in directory.iterdir() if (m := _NAME.match(p.name)) and len(m.group(1)) < 12]
        number = max(numbers, default=0) + 1
        while f"{number:04d}" in taken:  # a name that exists but did not parse as a number: step past it
            number += 1
        target = directory / f"{number:04d}_{safe_label(label)}.json"
        try:
            os.link(tmp, target)  # fails if the name exists: never overwrite, safe against races
        except FileExistsError:
            taken.add(f"{number:04d}")
            continue
        os.unlink(tmp)
        return target


@dataclass
class LoadedResults:
    results: list[dict[str, Any]]
    skipped: list[tuple[Path, str]]  # (file, why) for malformed files


def _v1_to_v2(result: dict[str, Any]) -> dict[str, Any]:
    """v2 added `startups` (every start of the point, cold then warm) and, per start, whether the
    cache was cleared and whether the compiled forward was loaded (no Dynamo, no Inductor)."""
    startup = result.get("startup")
    if isinstance(startup, dict):
        startup = dict(startup)
        startup.setdefault("cache_cleared", bool(startup.get("cold")))
        startup.setdefault("compile_loaded", False)
        startup.setdefault("loaded_s", 0.0)
    result = dict(result, startup=startup, schema_version=2)
    result.setdefault("startups", [startup] if startup else [])
    return result


MIGRATIONS = {1: _v1_to_v2}  # version -> function producing version + 1


def migrate(result: dict[str, Any]) -> dict[str, Any]:
    """Bring an older schema_version up to the current one, step by step."""
    version = result.get("schema_version")
    while version != SCHEMA_VERSION:
        step = MIGRATIONS.get(version) if isinstance(version, int) else None
        if step is None:
            raise ValueError(f"unknown schema_version {version!r} (this graphbench reads 1..{SCHEMA_VERSION})")
        result = step(result)
        version = result["schema_version"]
    return result


def _is_list_of_objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _check_fields(data: dict[str, Any], where: str, objects: tuple[str, ...] = (), lists: tuple[str, ...] = ()) -> None:
    """ValueError for the first of the fields that is present, not null and of the wrong shape."""
    prefix = f"{where}: " if where else ""
    for key in objects:
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise ValueError(f"{prefix}{key!r} is not an object")
    for key in lists:
        if data.get(key) is not None and not _is_list_of_objects(data[key]):
            raise ValueError(f"{prefix}{key!r} is not a list of objects")


MAX_ALIASES = 4096  # the most points a sweep plans (bench/sweep_options.MAX_POINTS)


def _check_text(value: Any, where: str) -> None:
    """A name the report prints and charts draw: a string of valid text (an unpaired surrogate cannot be drawn
    or written), when present."""
    if value is None:
        return
    if not isinstance(value, str):
        raise ValueError(f"{where} is not a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{where} is not valid text (an unpaired surrogate)") from None


def check_shape(result: dict[str, Any]) -> None:
    """Raise ValueError, in one line naming the field, when a container that the reports, tune,
    plan, compare or gate index has the wrong shape: config, environment and startup must be
    objects; startups and workloads lists of objects; per workload, name a string, repeats a list
    of objects and summary an object; a few nested containers likewise (config.compilation,
    config.speculative, each start's cudagraph_mode, each repeat's batch_size_histogram,
    step_ms_by_mode and slowest_steps). A field that is absent or null is fine (old and failed
    results lack some). Of the leaf values, the numbers the report's tables compute with are checked
    (a repeat's output_tokens_per_s and duration_s, step totals, a slowest step's ms), and so are each
    workload's summary and the catalogue's metrics (reports/result_numbers.py)."""
    _check_fields(result, "", objects=("config", "environment", "startup", "sweep"), lists=("startups", "workloads"))
    for key in ("label", "system", "status", "model", "config_hash"):  # (compare matches points by them)
        _check_text(result.get(key), f"{key!r}")
    sweep = result.get("sweep") or {}
    if sweep.get("round") is not None and not isinstance(sweep.get("round"), dict):
        raise ValueError("'sweep': 'round' is not an object")
    for key in ("index", "of"):  # (--resume and the merge of rounds key results by them)
        value = (sweep.get("round") or {}).get(key)
        if value is not None and (type(value) is not int or value < 1):
            raise ValueError(f"'sweep': round {key!r} must be a whole number >= 1, got {value!r}")
    aliases = result.get("stands_for") or []
    if not isinstance(aliases, list):  # (an item that is not a label is passed over: reports/aliases.py)
        raise ValueError("'stands_for' is not a list of labels")
    if len(aliases) > MAX_ALIASES:  # (100,000 made a report take minutes)
        raise ValueError(f"'stands_for' names {len(aliases)} labels: more than a sweep's {MAX_ALIASES} points")
    _check_fields(result.get("config") or {}, "'config'", objects=("compilation", "speculative"))
    _check_start(result.get("startup") or {}, "'startup'")
    for index, start in enumerate(result.get("startups") or [], 1):
        _check_start(start, f"'startups' item #{index}")
    for index, workload in enumerate(result.get("workloads") or [], 1):
        name = workload.get("name")
        if name is not None and not isinstance(name, str):
            raise ValueError(f"workload #{index}: 'name' is not a string")
        where = f"workload {name!r}" if name is not None else f"workload #{index}"
        _check_fields(workload, where, objects=("summary",), lists=("repeats",))
        check_summary(workload.get("summary") or {}, where)
        for key in ("concurrency", "num_requests"):  # what plan and the report divide and sort by
            value = workload.get(key)
            if value is not None and (type(value) is not int or value < 1):
                raise ValueError(f"{where}: {key!r} must be a whole number >= 1, got {value!r}")
        rate = workload.get("request_rate")
        if rate is not None and not (isinstance(rate, (int, float)) and not isinstance(rate, bool)
                                     and math.isfinite(rate) and rate > 0):
            raise ValueError(f"{where}: 'request_rate' must be a positive number of requests/s, got {rate!r}")
        busy = workload.get("busy_host_repeats")
        if busy is not None and not (isinstance(busy, list) and all(type(i) is int for i in busy)):
            raise ValueError(f"{where}: 'busy_host_repeats' is not a list of repeat numbers")
        for number, repeat in enumerate(workload.get("repeats") or [], 1):
            at = f"{where}: repeat #{number}"
            _check_fields(repeat, at, objects=("batch_size_histogram", "decode_size_histogram",
                                               "mixed_size_histogram", "step_ms_by_mode"),
                          lists=("slowest_steps",))
            by_mode = repeat.get("step_ms_by_mode") or {}
            if not all(times is None or isinstance(times, dict) for times in by_mode.values()):
                raise ValueError(f"{at}: 'step_ms_by_mode' is not an object of objects")
            check_numbers(repeat, at, ("output_tokens_per_s",))  # (its sign: the catalogue's check below)
            check_numbers(repeat, at, ("duration_s",), times=True)
            for mode, times in by_mode.items():
                check_numbers(times or {}, f"{at}: step_ms_by_mode {mode!r}", ("total_ms",), times=True)
            for step in repeat.get("slowest_steps") or []:
                check_numbers(step, f"{at}: a slowest step", ("ms",), required=True, times=True)
            check_metrics(repeat, at, point=False)
    for index, start in enumerate([result.get("startup"), *(result.get("startups") or [])]):
        if isinstance(start, dict):
            check_metrics({"startup": start}, "'startup'" if index == 0 else f"'startups' item #{index}", point=True)


def _check_start(start: dict[str, Any], where: str) -> None:
    """A start-up record's containers: cudagraph_mode an object; the ladders' sizes (capture_sizes,
    mixed_capture_sizes) lists of whole numbers >= 1, and deferred_recordings a count, which the capture plan's
    table counts, tops and subtracts."""
    _check_fields(start, where, objects=("cudagraph_mode",))
    deferred = start.get("deferred_recordings")
    if deferred is not None and (type(deferred) is not int or deferred < 0):
        raise ValueError(f"{where}: 'deferred_recordings' must be a whole number >= 0, got {deferred!r}")
    for key in ("capture_sizes", "mixed_capture_sizes"):
        sizes = start.get(key)
        if sizes is not None and not (isinstance(sizes, list) and all(type(s) is int and s >= 1 for s in sizes)):
            raise ValueError(f"{where}: {key!r} is not a list of whole numbers >= 1")


def iter_result_files(paths: Iterable[str | Path], unlisted: list[tuple[Path, str]] | None = None) -> list[Path]:
    """Result files under the given files or folders (recursively), sorted, each once. Only regular files: a
    FIFO or a link to a device named *.json would block or never end (the loader skips them by name). A folder
    that cannot be listed goes into `unlisted` with why (Path.rglob passed over it in silence: its results were
    left out of a report or gate without a word)."""
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            files += _json_under(path, unlisted if unlisted is not None else [])
        elif path.exists():
            files.append(path)
        else:
            raise GraphbenchError(f"no such result file or folder: {path}")
    return list(dict.fromkeys(files))  # a folder given twice, or a file inside a folder also given: read once


def _json_under(folder: Path, unlisted: list[tuple[Path, str]]) -> list[Path]:
    """*.json under folder, as rglob finds them (links to folders not followed), sorted; unlistable folders noted."""
    def note(error: OSError) -> None:
        unlisted.append((Path(error.filename or folder), f"cannot list this folder ({error.strerror or error}): "
                         "its results are not read; make it readable, or name the folders to read"))

    found = []
    for root, dirs, names in os.walk(folder, onerror=note):
        found += [Path(root, n) for n in (*names, *dirs) if n.endswith(".json") and not n.startswith(".tmp-")]
    return sorted(found)


def load_results(paths: Iterable[str | Path], merge: bool = True) -> LoadedResults:
    """Load every result file; malformed ones are reported by name and skipped. merge: a sweep point's
    round files (one per process) come back as one record (reports/rounds.py); False: one per file."""
    results: list[dict[str, Any]] = []
    skipped: list[tuple[Path, str]] = []
    for file in iter_result_files(paths, skipped):
        try:
            if not file.is_file():
                raise ValueError("not a regular file")
            if file.stat().st_size > MAX_RESULT_BYTES:
                raise ValueError(f"{file.stat().st_size} bytes: too large for a result file ({MAX_RESULT_BYTES >> 20} MiB at most)")
            data = json.loads(file.read_text())
            if not isinstance(data, dict) or data.get("kind") != KIND:
                raise ValueError("not a graphbench result")
            data = migrate(data)
            check_shape(data)
            data["_path"] = str(file)
            results.append(data)
        except OSError as exc:
            skipped.append((file, f"unreadable ({exc.strerror or exc})"))
        except (ValueError, UnicodeDecodeError) as exc:
            digits = isinstance(exc, ValueError) and "integer string conversion" in str(exc)
            skipped.append((file, "an integer of more than 4300 digits, which no result holds" if digits else str(exc)))
        except RecursionError:
            skipped.append((file, "JSON nested too deeply for a result file"))
    if merge:
        from graphbench.reports.rounds import drop_repeated_processes, merge_rounds

        results, repeated = drop_repeated_processes(results)
        skipped += [(Path(file), why) for file, why in repeated]
        results = merge_rounds(results)
    return LoadedResults(results, skipped)
