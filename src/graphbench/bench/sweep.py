"""The sweep driver: a grid of configurations, each measured by `graphbench run` in its own process.

A point that crashes, runs out of memory or times out gets a failed record with the reason and
the tail of its stderr; the sweep goes on. `resume` skips points that already have an ok result.
`request_stop()` (the CLI calls it on SIGINT/SIGTERM) kills the running points' process groups and
starts no new ones: they end "interrupted", with no record, so that `resume` measures them later.

The grid (axes, points, sweep files) is in sweep_grid, the results-folder lock in sweep_lock, whether the
folder may take the sweep (no other model's results) in sweep_folder, the rounds' order, a tuned point's
ladder and a point's config file in sweep_plan, what --resume counts in sweep_resume; all are re-exported here.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphbench.bench.point_process import CHILD_ENV, exit_reason, point_args, point_command, run_child
from graphbench.bench.round_searches import assign_searches, remove_searches, run_searches
from graphbench.bench.sweep_folder import check_folder_takes
from graphbench.bench.sweep_grid import (
    AXIS_ALIASES,
    PEERS,
    SweepPoint,
    build_grid,
    canonical_axis,
    load_sweep_file,
    nest_overrides,
    point_label,
)
from graphbench.bench.sweep_lock import sweep_lock
from graphbench.bench.sweep_plan import plan_rounds, tune_point, write_point_config
from graphbench.bench.sweep_resume import measured_identities, point_identity, rerun_reason, sweep_id_for
from graphbench.errors import GraphbenchError
from graphbench.reports.store import check_shape, load_results, write_result
from graphbench.env import hatches_set

__all__ = [
    "AXIS_ALIASES", "CHILD_ENV", "PEERS", "SweepOutcome", "SweepPoint", "SweepResult", "build_grid",
    "canonical_axis", "check_folder_takes", "measured_identities", "plan_rounds", "point_identity", "rerun_reason",
    "load_sweep_file", "point_label", "request_stop", "run_sweep", "sweep_id_for", "sweep_lock", "tune_point",
    "write_point_config",
]

_STOP = threading.Event()
POLL_S = 0.25  # how often a running point checks for a stop request


def request_stop() -> None:
    """Stop the sweep soon: running points are killed, no new point starts (safe from a signal handler)."""
    _STOP.set()


@dataclass
class SweepOutcome:
    point: SweepPoint
    status: str  # ok | failed | same-engine | skipped | interrupted
    path: Path | None = None
    reason: str = ""
    seconds: float = 0.0


@dataclass
class SweepResult:
    outcomes: list[SweepOutcome] = field(default_factory=list)

    @property
    def num_failed(self) -> int:
        """Points (not processes) with a failed round."""
        return len({(o.point.folder, o.point.label) for o in self.outcomes if o.status == "failed"})

    @property
    def interrupted(self) -> bool:
        return any(o.status == "interrupted" for o in self.outcomes)


def run_sweep(points: list[SweepPoint], results_dir: str | Path, run_args: list[str], *, timeout_s: float,
              resume: bool, on_start: Callable[[SweepPoint], None] = lambda p: None,
              on_done: Callable[[SweepOutcome], None] = lambda o: None, gpus: list[str] | None = None,
              executor: str = "local", ray_address: str | None = None, rounds: int = 1, seed: int = 0,
              folders: tuple[str, ...] = ("",), search_rounds: bool = False,
              on_search: Callable[[str], None] = lambda line: None) -> SweepResult:
    """Run each point as `graphbench run` in its own process, in `rounds` interleaved rounds
    (plan_rounds); record failures; go on.

    gpus: device ids to spread the points over (one point per GPU, or per tensor-parallel group, at a time).
    executor "ray": each point is a Ray task on the cluster at ray_address (bench/sweep_ray.py).
    folders: sub-folders each point is measured into (sweep --aa: two copies of the grid).
    search_rounds (a GPU sweep): each round after the first, and each folder's, runs on kernel choices
    searched for it alone before the points start (bench/round_searches.py); on_search gets a line on each."""
    results_dir = Path(results_dir)
    _STOP.clear()
    _FAILED.clear()
    if executor not in ("local", "ray"):
        raise GraphbenchError(f"unknown executor {executor!r}; choose from local, ray")
    with sweep_lock(results_dir):
        check_folder_takes(results_dir, points)  # (under the lock: no sweep is writing there now)
        sweep_id = sweep_id_for(results_dir, resume)
        points = plan_rounds(points, rounds, seed, sweep_id, folders)
        if executor == "ray":
            return _run_points_ray(points, results_dir, run_args, timeout_s, resume, on_start, on_done, ray_address)
        searches = _round_searches(points, sweep_id, folders, resume, results_dir, run_args) if search_rounds else {}
        try:  # (a resumed sweep searches its unfinished rounds again: an earlier run's searches are gone)
            remove_searches(sweep_id)
            if searches:
                run_searches(searches, on_search=on_search, stop=_STOP.is_set,
                             extra_env={"CUDA_VISIBLE_DEVICES": gpus[0]} if gpus else None)
            if gpus:
                return _run_points_spread(points, results_dir, run_args, timeout_s, resume, on_start, on_done, gpus)
            return _run_points(points, results_dir, run_args, timeout_s, resume, on_start, on_done)
        finally:
            remove_searches(sweep_id)


def _round_searches(points: list[SweepPoint], sweep_id: str, folders: tuple[str, ...], resume: bool,
                    results_dir: Path, run_args: list[str]) -> dict[str, list[SweepPoint]]:
    """The rounds that get a search of their own (bench/round_searches.py), less those --resume will not run."""
    rounds = assign_searches(points, sweep_id, folders)
    if resume:
        done = measured_identities(results_dir, _folders(points))
        pending = {id(p) for p in points if _skipped(p, done, point_identity(p, run_args)) is None}
        rounds = {name: members for name, members in rounds.items() if any(id(p) in pending for p in members)}
    return rounds


def _run_points_spread(points, results_dir: Path, run_args, timeout_s, resume, on_start, on_done,
                       gpus: list[str]) -> SweepResult:
    from graphbench.bench.sweep_parallel import run_spread

    done = measured_identities(results_dir, _folders(points)) if resume else {}
    report = threading.Lock()  # progress callbacks come from several threads
    identities = {point.label: point_identity(point, run_args) for point in points}

    def skip(point):
        outcome = _skipped(point, done, identities[point.label])
        if outcome is None:
            return None
        with report:
            on_done(outcome)
        return outcome

    def run_one(point, extra_env):
        with report:
            on_start(point)
        identity = identities[point.label]
        outcome = _tuned_then_run(point, results_dir, run_args, timeout_s, identity,
                                  _why_again(point, done, identity), extra_env)
        with report:
            on_done(outcome)
        return outcome

    return SweepResult(run_spread(points, gpus, run_one, skip))


def _run_points_ray(points, results_dir: Path, run_args, timeout_s, resume, on_start, on_done,
                    address: str | None) -> SweepResult:
    from graphbench.bench.sweep_ray import PointJob, run_on_ray

    done = measured_identities(results_dir, _folders(points)) if resume else {}
    identities = {point.label: point_identity(point, run_args) for point in points}
    # the sweep's switches (and fault injections) travel with each point, as a local child inherits them
    switches = {key: value for key, value in os.environ.items() if key.startswith("GRAPHBENCH_")}

    def skip(point):
        outcome = _skipped(point, done, identities[point.label])
        if outcome is not None:
            on_done(outcome)
        return outcome

    def prepare(point):
        if (point.folder, point.label) in _FAILED:
            outcome = SweepOutcome(point, "failed", reason="not run: it failed in an earlier round")
            on_done(outcome)
            return outcome
        if point.tuned_graphs is not None:
            try:
                tune_point(point, results_dir)
            except GraphbenchError as exc:
                outcome = _record_failure(point, results_dir, f"cannot tune the ladder: {exc}", "", 0.0)
                on_done(outcome)
                return outcome
        on_start(point)
        config = write_point_config(point, results_dir / ".sweep").read_text()
        return PointJob(point.label, config, point_args(point, run_args, identities[point.label]), switches, timeout_s)

    def finish(point, run):
        if run.interrupted:
            outcome = SweepOutcome(point, "interrupted", reason=run.reason, seconds=run.seconds)
        elif run.result_text is not None:
            outcome = _write_returned(point, results_dir, run.result_text, run.seconds)
            again = _why_again(point, done, identities[point.label])
            if again and outcome.status == "ok":
                outcome.reason = again
        else:
            env = {"switches": hatches_set(), "host": run.host, "gpu_index": ",".join(run.gpu_ids) or None}
            outcome = _record_failure(point, results_dir, run.reason, run.stderr, run.seconds, env)
        on_done(outcome)
        return outcome

    return SweepResult(run_on_ray(points, address, skip, prepare, finish, _STOP.is_set))


def _write_returned(point: SweepPoint, results_dir: Path, text: str, seconds: float) -> SweepOutcome:
    """A result another machine measured, written into the sweep's folder (its machine's sub-folder)."""
    from graphbench.bench.environment import machine_name

    try:
        record = json.loads(text)
        check_shape(record)
    except (ValueError, RecursionError) as exc:
        return _record_failure(point, results_dir, f"the point sent back a malformed result: {exc}", "", seconds)
    target = results_dir / point.folder if point.folder else results_dir
    path = write_result(target, machine_name(record.get("environment") or {}), point.label, record)
    return SweepOutcome(point, "ok", path, seconds=seconds)


def _tuned_then_run(point, results_dir: Path, run_args, timeout_s, identity: dict[str, Any], again: str = "",
                    extra_env=None) -> SweepOutcome:
    """Tune a tuned:N point's ladder, then run it; `again`: why a point measured before runs again."""
    if _STOP.is_set():
        return SweepOutcome(point, "interrupted", reason="not started (interrupted)")
    if (point.folder, point.label) in _FAILED:  # (the --gpus executor decides what to skip before any runs)
        return SweepOutcome(point, "failed", reason="not run: it failed in an earlier round")
    try:
        if point.tuned_graphs is not None:
            tune_point(point, results_dir)
    except GraphbenchError as exc:
        return _record_failure(point, results_dir, f"cannot tune the ladder: {exc}", "", 0.0)
    outcome = _run_point(point, results_dir, run_args, timeout_s, identity, extra_env)
    if again and outcome.status == "ok":
        outcome.reason = again
    return outcome


def _why_again(point: SweepPoint, done: dict[Any, Any], identity: dict[str, Any]) -> str:
    """Why a point with a result in the folder runs again ('' for a point not measured before)."""
    return rerun_reason(identity, done[point.key]) if point.key in done else ""


def _folders(points: list[SweepPoint]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p.folder for p in points)) or ("",)


def _run_points(points, results_dir: Path, run_args, timeout_s, resume, on_start, on_done) -> SweepResult:
    done = measured_identities(results_dir, _folders(points)) if resume else {}
    identities = {point.label: point_identity(point, run_args) for point in points}  # (before tuning)
    result = SweepResult()
    for point in points:
        identity = identities[point.label]
        if (skipped := _skipped(point, done, identity)) is not None:
            outcome = skipped
        elif _STOP.is_set():
            outcome = SweepOutcome(point, "interrupted", reason="not started (interrupted)")
        else:
            on_start(point)
            outcome = _tuned_then_run(point, results_dir, run_args, timeout_s, identity,
                                      _why_again(point, done, identity))
        result.outcomes.append(outcome)
        on_done(outcome)
    return result


_FAILED: set[tuple[str, str]] = set()  # (folder, label) of points that failed a round in this sweep


def _skipped(point: SweepPoint, done: dict[Any, Any], identity: dict[str, Any]) -> SweepOutcome | None:
    """The outcome of a point that is not run: the same engine as an earlier one, measured before with
    this very identity (--resume), or failed in an earlier round (its later rounds would fail alike, each
    costing up to the timeout)."""
    if point.same_as is not None:
        return SweepOutcome(point, "same-engine", reason=f"= {point.same_as} (same engine, measured once)")
    if (point.folder, point.label) in _FAILED:
        return SweepOutcome(point, "failed", reason="not run: it failed in an earlier round")
    if point.key in done and not rerun_reason(identity, done[point.key]):
        return SweepOutcome(point, "skipped", reason="already measured (--resume)")
    return None


def _run_point(point: SweepPoint, results_dir: Path, run_args: list[str], timeout_s: float,
               identity: dict[str, Any], extra_env: dict[str, str] | None = None) -> SweepOutcome:
    config_file = write_point_config(point, results_dir / ".sweep")
    target = results_dir / point.folder if point.folder else results_dir
    cmd = point_command(config_file, target, point_args(point, run_args, identity))
    env = dict(os.environ, **CHILD_ENV, PYTHONUNBUFFERED="1", **(extra_env or {}))
    before = _ok_count(target, point.label)
    child = run_child(cmd, env, timeout_s, _STOP.is_set, POLL_S)
    if child.stopped:  # unless its result was already written, nothing is recorded
        if _ok_count(target, point.label) > before:
            return SweepOutcome(point, "ok", seconds=child.seconds)
        return SweepOutcome(point, "interrupted", reason="stopped while running (interrupted)", seconds=child.seconds)
    reason = f"timed out after {timeout_s:g} s" if child.timed_out else ""
    if not reason and child.returncode != 0:
        reason = exit_reason(child.returncode, child.stderr)
    if not reason and _ok_count(target, point.label) <= before:
        reason = "the point exited without writing a result"
    if not reason:
        return SweepOutcome(point, "ok", seconds=child.seconds)
    return _record_failure(point, results_dir, reason, child.stderr, child.seconds)


def _record_failure(point: SweepPoint, results_dir: Path, reason: str, stderr: str, seconds: float,
                    env: dict[str, Any] | None = None) -> SweepOutcome:
    from graphbench.bench.point import failed_result

    _FAILED.add((point.folder, point.label))
    record = failed_result(point.label, point.system, nest_overrides(point.overrides), reason, stderr,
                           sweep={"point": point.overrides, **({"round": point.round} if point.round else {})}, env=env)
    path = write_result(results_dir / point.folder if point.folder else results_dir, "failed", point.label, record)
    return SweepOutcome(point, "failed", path, reason, seconds)


def _ok_count(results_dir: Path, label: str) -> int:
    return sum(1 for r in load_results([results_dir], merge=False).results
               if r.get("label") == label and r.get("status") == "ok") if results_dir.exists() else 0
