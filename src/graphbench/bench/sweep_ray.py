"""Sweep points as Ray tasks (`graphbench sweep --executor ray`): a point asks Ray for the GPUs it needs
(its tensor-parallel size; none for a CPU point or on a cluster without GPUs), runs the very
`graphbench run` process a local sweep runs (point_process) on whichever node Ray gives it, and sends
its result file's text back; the sweep writes it into its one results folder (reports.store: atomic,
never overwritten), so `--resume` works across executors.

Order is kept as the local executors keep it: a warm point waits for every earlier cold point, and
asks Ray to run on the node that cold point ran on (a soft preference: its compile cache is there); a
tuned:N point waits for every earlier point (its ladder is tuned, here, from their results).

Ray is imported only in here, and only when the Ray executor is used (`pip install -e ".[ray]"`).
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphbench.bench.point import injected_fault
from graphbench.bench.point_process import CHILD_ENV, exit_reason, point_command, run_child
from graphbench.bench.sweep_grid import SweepPoint, nest_overrides
from graphbench.errors import GraphbenchError

CONNECT_TIMEOUT_S = 5.0  # a HOST:PORT that does not answer: ray.init itself retries for minutes
POLL_S = 0.25  # how often the sweep checks for finished points and a stop request


@dataclass
class PointJob:
    """What a Ray task needs to run a point anywhere: its config file's text, its `graphbench run`
    options (point_process.point_args), the env it adds (the sweep's GRAPHBENCH_* switches) and the limit."""

    label: str
    config_toml: str
    args: list[str]
    env: dict[str, str]
    timeout_s: float


@dataclass
class PointRun:
    """What came back: the result file's text (None when the point failed, with the reason), where it ran."""

    result_text: str | None = None
    reason: str = ""
    stderr: str = ""
    seconds: float = 0.0
    host: str | None = None
    gpu_ids: list[str] = field(default_factory=list)
    node_id: str | None = None
    interrupted: bool = False


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise GraphbenchError('--executor ray needs Ray: pip install -e ".[ray]" (or pip install "ray>=2.9")') from None
    return ray


def _probe(address: str) -> None:
    """A HOST:PORT address must answer within CONNECT_TIMEOUT_S (auto, local, ray:// are Ray's to resolve)."""
    if address in ("auto", "local") or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise GraphbenchError(f"--ray-address must be HOST:PORT (the head node's, e.g. 10.0.0.1:6379), auto or "
                              f"local; got {address!r}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        why = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc)).lower()
        raise GraphbenchError(f"no Ray cluster at {address} ({why} within {CONNECT_TIMEOUT_S:g} s): start one with "
                              "`ray start --head` on the head node, or check the address") from None


def connect(address: str | None) -> dict[str, float]:
    """Connect to the Ray cluster at address (None: RAY_ADDRESS if set, else a new Ray on this machine;
    a Ray this process already initialised is used as it is); return each live node's GPU count by id."""
    if address:
        _probe(address)
    ray = _ray()
    if not ray.is_initialized():
        try:
            ray.init(address=address or None, include_dashboard=False, log_to_driver=False,
                     logging_level=logging.WARNING)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            where = f"at {address}" if address else "(a local one could not start)"
            raise GraphbenchError(f"no Ray cluster {where}: {str(exc).splitlines()[0][:200]}") from None
    return {node["NodeID"]: float(node.get("Resources", {}).get("GPU", 0)) for node in ray.nodes() if node.get("Alive")}


def gpus_needed(point: SweepPoint, cluster_has_gpus: bool) -> int:
    """The GPUs a point's task asks for: its tensor-parallel size, or 0 for a CPU point (device cpu, or
    device auto on a cluster without GPUs)."""
    device = str(point.overrides.get("model.device") or "auto")
    if device == "cpu" or (device == "auto" and not cluster_has_gpus):
        return 0
    return int(point.overrides.get("parallel.tensor_parallel_size", 1) or 1)


def check_fits(points: list[SweepPoint], node_gpus: dict[str, float]) -> None:
    """Every point fits on one node of the cluster (checked before any point runs)."""
    most = max(node_gpus.values(), default=0.0)
    for point in points:
        needed = gpus_needed(point, most > 0)
        if needed > most:
            raise GraphbenchError(f"{point.label} needs {needed} GPU(s) on one node; the largest node of the Ray "
                                  f"cluster has {most:g}")


def run_job(job: PointJob) -> PointRun:
    """The Ray task: run the point's `graphbench run` in a temporary folder on this node; return its
    result's text (or why it failed) and where it ran. Ray's cancellation kills the point's process."""
    import ray

    context = ray.get_runtime_context()
    where = dict(host=socket.gethostname(), gpu_ids=[str(g) for g in ray.get_gpu_ids()], node_id=context.get_node_id())
    # fault injection: this worker process dies while the point runs (what a lost node does to a point)
    stop = (lambda: os._exit(1)) if injected_fault(job.label, job.env) == "worker-exit" else (lambda: False)
    with tempfile.TemporaryDirectory(prefix="graphbench-point-") as tmp:
        config, results = Path(tmp) / "point.toml", Path(tmp) / "results"
        config.write_text(job.config_toml)
        env = dict(os.environ, **CHILD_ENV, PYTHONUNBUFFERED="1", **job.env)
        child = run_child(point_command(config, results, job.args), env, job.timeout_s, stop, POLL_S)
        written = sorted(results.rglob("[0-9][0-9][0-9][0-9]_*.json")) if results.is_dir() else []
        if child.timed_out:
            reason = f"timed out after {job.timeout_s:g} s"
        elif child.returncode != 0:
            reason = exit_reason(child.returncode or 0, child.stderr)
        elif len(written) != 1:
            reason = "the point exited without writing a result"
        else:
            return PointRun(written[0].read_text(), seconds=child.seconds, **where)
    return PointRun(None, reason, child.stderr, child.seconds, **where)


def lost_reason(exc: Exception) -> str:
    """Why a point's task gave no answer (a Ray error), in one line."""
    ray = _ray()
    text = (str(exc).strip().splitlines() or [""])[0][:200]
    if isinstance(exc, ray.exceptions.WorkerCrashedError):
        return f"the Ray worker running it died mid-point (WorkerCrashedError): {text}"
    if isinstance(exc, ray.exceptions.NodeDiedError):
        return f"its Ray node was lost mid-point (NodeDiedError): {text}"
    if isinstance(exc, ray.exceptions.RayTaskError):
        return f"its Ray task failed ({type(exc.cause).__name__}): {str(exc.cause).strip()[:200]}"
    return f"Ray gave no result ({type(exc).__name__}): {text}"


def _waits_for(points: list[SweepPoint], index: int) -> list[int]:
    point = points[index]
    return [j for j in range(index) if point.tuned_graphs is not None or (not point.cold and points[j].cold)]


def _compile_key(point: SweepPoint) -> tuple | None:
    """Points that share a compile cache entry: same -O level and config hash (sweep_grid.build_grid's rule)."""
    if point.system != "graphbench":
        return None
    from graphbench.config.engine_config import config_from_dict

    config = config_from_dict(nest_overrides(point.overrides)).resolve()
    return point.overrides.get("optimization_level"), config.compute_hash()


def run_on_ray(points: list[SweepPoint], address: str | None, skip: Callable[[SweepPoint], object | None],
               prepare: Callable[[SweepPoint], PointJob | object], finish: Callable[[SweepPoint, PointRun], object],
               stop: Callable[[], bool]) -> list[object]:
    """Run every point not skipped as a Ray task; outcomes in point order.

    skip(point): an outcome for a point that must not run (else None); prepare(point): its PointJob (or an
    outcome: it could not start); finish(point, run): the outcome of what came back. After stop() says
    so, running tasks are cancelled (finish gets interrupted runs) and waiting points are not prepared."""
    ray = _ray()
    node_gpus = connect(address)
    check_fits(points, node_gpus)
    has_gpus = max(node_gpus.values(), default=0.0) > 0
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(max_retries=0)(run_job)  # a crashed point is recorded, never run twice behind our back
    outcomes: list[object | None] = [skip(point) for point in points]
    waiting = [i for i, outcome in enumerate(outcomes) if outcome is None]
    running: dict[Any, int] = {}
    cold_nodes: dict[tuple, str] = {}  # compile key -> the node a cold point of it ran on
    cancelled = False
    while waiting or running:
        if stop() and not cancelled:
            cancelled = True
            for ref in running:
                ray.cancel(ref)  # a KeyboardInterrupt in the task: run_child kills the point's processes
            for i in waiting:
                outcomes[i] = finish(points[i], PointRun(reason="not started (interrupted)", interrupted=True))
            waiting = []
        for i in [i for i in waiting if all(outcomes[j] is not None for j in _waits_for(points, i))]:
            waiting.remove(i)
            job = prepare(points[i])
            if not isinstance(job, PointJob):
                outcomes[i] = job
                continue
            options: dict[str, Any] = {"num_gpus": gpus_needed(points[i], has_gpus)}
            node = cold_nodes.get(_compile_key(points[i])) if not points[i].cold else None
            if node is not None:
                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=True)
            running[task.options(**options).remote(job)] = i
        if not running:
            continue
        ready, _ = ray.wait(list(running), num_returns=1, timeout=POLL_S)
        for ref in ready:
            i = running.pop(ref)
            try:
                run = ray.get(ref)
            except ray.exceptions.TaskCancelledError:
                run = PointRun(reason="stopped while running (interrupted)", interrupted=True)
            except ray.exceptions.RayError as exc:
                run = PointRun(reason=lost_reason(exc))
            if points[i].cold and run.node_id is not None:
                cold_nodes[_compile_key(points[i])] = run.node_id
            outcomes[i] = finish(points[i], run)
    return outcomes
