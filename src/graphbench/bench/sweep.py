"""The sweep driver: a grid of configurations, each measured by `graphbench run` in its own process.

A point that crashes, runs out of memory or times out gets a failed record with the reason and
the tail of its stderr; the sweep goes on. `resume` skips points that already have an ok result.
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from graphbench.config.engine import config_from_dict, set_dotted
from graphbench.config.tomlio import read_toml
from graphbench.config.validate import suggest
from graphbench.errors import GraphbenchError
from graphbench.reports.store import load_results, write_result

# Short axis names accepted on the command line and in sweep files.
AXIS_ALIASES = {
    "level": "optimization_level", "O": "optimization_level",
    "ladder": "compilation.performance_mode", "performance_mode": "compilation.performance_mode",
    "cudagraph_mode": "compilation.cudagraph_mode", "capture_sizes": "compilation.cudagraph_capture_sizes",
    "max_num_seqs": "scheduler.max_num_seqs", "max_num_batched_tokens": "scheduler.max_num_batched_tokens",
    "compile_sizes": "compilation.compile_sizes", "num_speculative_tokens": "speculative.num_speculative_tokens",
    "dtype": "model.dtype", "attention_backend": "model.attention_backend",
    "tensor_parallel_size": "parallel.tensor_parallel_size",
}
PEERS = ("hf-eager", "hf-compile")
# Env for every child: NVLink multicast stays off on shared machines.
CHILD_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


@dataclass
class SweepPoint:
    label: str
    overrides: dict[str, Any]  # dotted config keys
    system: str = "graphbench"
    cold: bool = False
    tuned_graphs: int | None = None  # ladder "tuned:N": tuned from the batch sizes measured earlier in the sweep

    def describe(self) -> str:
        parts = [f"{k.split('.')[-1]}={v}" for k, v in self.overrides.items() if k != "model.model"]
        return " ".join(parts)


@dataclass
class SweepOutcome:
    point: SweepPoint
    status: str  # ok | failed | skipped
    path: Path | None = None
    reason: str = ""
    seconds: float = 0.0


@dataclass
class SweepResult:
    outcomes: list[SweepOutcome] = field(default_factory=list)

    @property
    def num_failed(self) -> int:
        return sum(o.status == "failed" for o in self.outcomes)


def _all_keys() -> list[str]:
    import dataclasses

    from graphbench.config.engine import SECTIONS

    return ["optimization_level"] + [f"{s}.{f.name}" for s, cls in SECTIONS.items() for f in dataclasses.fields(cls)]


def canonical_axis(name: str) -> str:
    """A config field as 'section.key' (or an alias such as 'level', 'ladder', 'max_num_seqs')."""
    key = AXIS_ALIASES.get(name, name)
    unique = [k for k in _all_keys() if k.split(".")[-1] == key]
    if "." not in key and len(unique) == 1:  # a field name that only one section has
        key = unique[0]
    if key not in _all_keys():
        raise GraphbenchError(f"unknown sweep axis {name!r}{suggest(name, list(AXIS_ALIASES) + _all_keys())}")
    return key


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in flat.items():
        if value is not None:
            set_dotted(data, key, value)
    return data


def point_label(overrides: dict[str, Any], axes: list[str]) -> str:
    names = {"optimization_level": "O", "compilation.performance_mode": ""}
    parts = []
    for key in axes:
        value = overrides[key]
        if isinstance(value, list):
            value = "-".join(map(str, value)) if value else "none"
        prefix = names.get(key, key.split(".")[-1] + "=")
        parts.append(f"{prefix}{value}")
    return "_".join(parts) or "base"


def build_grid(base: dict[str, Any], axes: dict[str, list[Any]], peers: list[str]) -> list[SweepPoint]:
    """The Cartesian product of the axes over the base config, then one point per peer.

    The first point of each -O level starts cold (its compile cache is cleared), then warm.
    """
    for peer in peers:
        if peer not in PEERS:
            raise GraphbenchError(f"unknown peer {peer!r}{suggest(peer, PEERS)}; choose from {', '.join(PEERS)}")
    keys = [canonical_axis(k) for k in axes]
    points, seen_levels = [], set()
    for values in itertools.product(*axes.values()) if axes else [()]:
        overrides = dict(base, **dict(zip(keys, values)))
        tuned = _tuned_graphs(overrides.get("compilation.performance_mode"))
        label = point_label(overrides, keys)
        if tuned is not None:
            overrides["compilation.performance_mode"] = "default"
        config_from_dict(_nest(overrides), source="sweep point").resolve()  # validate before running anything
        level = overrides.get("optimization_level")
        cold = level not in seen_levels and tuned is None
        seen_levels.add(level)
        points.append(SweepPoint(label.replace("tuned:", "tuned"), overrides, cold=cold, tuned_graphs=tuned))
    for peer in peers:
        points.append(SweepPoint(peer, {k: v for k, v in base.items() if k.startswith("model.")}, system=peer))
    labels = [p.label for p in points]
    if len(set(labels)) != len(labels):
        raise GraphbenchError("sweep points must have distinct labels (two axes give the same label)")
    return points


def _tuned_graphs(ladder: Any) -> int | None:
    if not (isinstance(ladder, str) and ladder.startswith("tuned:")):
        return None
    try:
        count = int(ladder.split(":", 1)[1])
    except ValueError:
        count = 0
    if count < 1:
        raise GraphbenchError(f"ladder {ladder!r}: use tuned:N with N >= 1 graphs")
    return count


def tune_point(point: SweepPoint, results_dir: Path) -> None:
    """Give a tuned:N point its capture sizes: the exact best N-size ladder for the batch sizes
    measured so far in this results folder (same top as the default ladder)."""
    from graphbench.ladders import capture_sizes
    from graphbench.ladders.tune import tune_ladder
    from graphbench.ladders.tune_sources import distribution_from_results

    measured = [r for r in load_results([results_dir]).results
                if r.get("status") == "ok" and r.get("system") == "graphbench"] if results_dir.exists() else []
    if not measured:
        raise GraphbenchError("no measured batch sizes yet: put tuned:N after a default or interactivity ladder")
    config = config_from_dict(_nest(point.overrides)).resolve()
    top = capture_sizes(config.scheduler.max_num_seqs, max_num_batched_tokens=config.scheduler.max_num_batched_tokens,
                        num_speculative_tokens=config.speculative.num_speculative_tokens).max_capture_size
    tuned = tune_ladder(distribution_from_results(measured), point.tuned_graphs, top=top,
                        multiple_of=config.decode_query_len)
    point.overrides["compilation.cudagraph_capture_sizes"] = list(tuned.sizes)


def load_sweep_file(path: str | Path) -> tuple[dict[str, Any], dict[str, list[Any]], dict[str, Any]]:
    """A sweep TOML: [base] dotted config keys, [grid] axis = [values], [workload] run options, peers."""
    data = read_toml(path)
    unknown = [k for k in data if k not in ("base", "grid", "workload", "peers")]
    if unknown:
        raise GraphbenchError(f"{path}: unknown section {unknown[0]!r}{suggest(unknown[0], ['base', 'grid', 'workload', 'peers'])}")
    grid = data.get("grid", {})
    for axis, values in grid.items():
        if not isinstance(values, list) or not values:
            raise GraphbenchError(f"{path}: grid.{axis} must be a non-empty list")
    base = {canonical_axis(k): v for k, v in data.get("base", {}).items()}
    workload = dict(data.get("workload", {}), peers=data.get("peers", []))
    return base, grid, workload


def completed_labels(results_dir: Path) -> set[str]:
    if not results_dir.exists():
        return set()
    loaded = load_results([results_dir])
    return {r["label"] for r in loaded.results if r.get("status") == "ok"}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


def write_point_config(point: SweepPoint, directory: Path) -> Path:
    """The point's engine config as a TOML file the child reads with --config."""
    data = _nest(point.overrides)
    lines = [f"optimization_level = {data.pop('optimization_level')}"] if "optimization_level" in data else []
    for section, values in data.items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in values.items()]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{point.label}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_sweep(points: list[SweepPoint], results_dir: str | Path, run_args: list[str], *, timeout_s: float,
              resume: bool, on_start: Callable[[SweepPoint], None] = lambda p: None,
              on_done: Callable[[SweepOutcome], None] = lambda o: None) -> SweepResult:
    """Run each point as `graphbench run` in its own process; record failures; go on."""
    results_dir = Path(results_dir)
    with sweep_lock(results_dir):
        return _run_points(points, results_dir, run_args, timeout_s, resume, on_start, on_done)


@contextmanager
def sweep_lock(results_dir: Path) -> Iterator[None]:
    """One sweep per results folder at a time; a lock left by a dead sweep is taken over."""
    results_dir.mkdir(parents=True, exist_ok=True)
    lock = results_dir / ".sweep.lock"
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                pid = int(lock.read_text().strip() or 0)
            except (OSError, ValueError):
                pid = 0
            if pid and _alive(pid):
                raise GraphbenchError(
                    f"another sweep (pid {pid}) is writing to {results_dir}; wait for it, or use another --results "
                    f"(remove {lock} if that process is gone)") from None
            lock.unlink(missing_ok=True)  # stale: its sweep died
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        break
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _run_points(points, results_dir: Path, run_args, timeout_s, resume, on_start, on_done) -> SweepResult:
    done = completed_labels(results_dir) if resume else set()
    result = SweepResult()
    for point in points:
        if point.label in done:
            outcome = SweepOutcome(point, "skipped", reason="already measured (--resume)")
        else:
            on_start(point)
            try:
                if point.tuned_graphs is not None:
                    tune_point(point, results_dir)
            except GraphbenchError as exc:
                outcome = _record_failure(point, results_dir, f"cannot tune the ladder: {exc}", "", 0.0)
            else:
                outcome = _run_point(point, results_dir, run_args, timeout_s)
        result.outcomes.append(outcome)
        on_done(outcome)
    return result


def _run_point(point: SweepPoint, results_dir: Path, run_args: list[str], timeout_s: float) -> SweepOutcome:
    config_file = write_point_config(point, results_dir / ".sweep")
    cmd = [sys.executable, "-m", "graphbench", "run", "--config", str(config_file), "--label", point.label,
           "--results", str(results_dir), "--quiet", *run_args]
    if point.cold:
        cmd.append("--cold")
    if point.system != "graphbench":
        cmd += ["--system", point.system]
    env = dict(os.environ, **CHILD_ENV, PYTHONUNBUFFERED="1")
    before = _ok_count(results_dir, point.label)
    started = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
        reason = "" if proc.returncode == 0 else _exit_reason(proc.returncode, proc.stderr)
        stderr = proc.stderr
    except subprocess.TimeoutExpired as exc:
        reason = f"timed out after {timeout_s:g} s"
        stderr = (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    seconds = time.perf_counter() - started
    if not reason and _ok_count(results_dir, point.label) <= before:
        reason = "the point exited without writing a result"
    if not reason:
        return SweepOutcome(point, "ok", seconds=seconds)
    return _record_failure(point, results_dir, reason, stderr, seconds)


def _record_failure(point: SweepPoint, results_dir: Path, reason: str, stderr: str, seconds: float) -> SweepOutcome:
    from graphbench.bench.point import failed_result

    record = failed_result(point.label, point.system, _nest(point.overrides), reason, stderr,
                           sweep={"point": point.overrides})
    path = write_result(results_dir, "failed", point.label, record)
    return SweepOutcome(point, "failed", path, reason, seconds)


def _exit_reason(code: int, stderr: str) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    last = lines[-1][:300] if lines else ""
    if code < 0:
        return f"killed by signal {-code}" + (f": {last}" if last else "")
    if "out of memory" in stderr.lower():
        return f"out of memory: {last}"
    return f"exit code {code}: {last}"


def _ok_count(results_dir: Path, label: str) -> int:
    return sum(1 for r in load_results([results_dir]).results if r.get("label") == label and r.get("status") == "ok") \
        if results_dir.exists() else 0
