"""`graphbench sweep --executor ray`: points as Ray tasks on a local Ray cluster (2 CPUs, started once for
the module), the same points and results as the local executor, a worker that dies mid-point recorded
as failed, --resume across executors, and the errors a user meets."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphbench.bench.point import FAULT_ENV
from graphbench.bench.sweep import build_grid, run_sweep
from graphbench.cli.main import app
from graphbench.errors import GraphbenchError
from graphbench.reports.store import load_results

ray = pytest.importorskip("ray")

BASE = {"model.model": "tiny-llama", "model.device": "cpu", "scheduler.max_num_seqs": 4}
RUN_ARGS = ["--concurrency", "1", "--num-requests", "2", "--prompt-len", "8", "--output-len", "2", "--repeats", "1"]


@pytest.fixture(scope="module", autouse=True)
def cluster():
    """One local Ray for the module (its start-up, ~4 s on 2 cores, is most of a test's cost)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    yield
    ray.shutdown()


def _points(*seqs: int):
    return build_grid(BASE, {"level": [0], "max_num_seqs": list(seqs)}, [], graphs_possible=False)


def _by_label(folder):
    out: dict[str, list[dict]] = {}
    for r in load_results([folder]).results:
        out.setdefault(r["label"], []).append(r)
    return out


def test_ray_runs_the_points_a_lost_worker_is_a_failed_point_and_resume_crosses_executors(tmp_path, monkeypatch):
    results = tmp_path / "results"
    a, b = (p.label for p in _points(4, 5))
    # a runs on Ray; b's Ray worker process exits while b's point runs (the real worker dies)
    monkeypatch.setenv(FAULT_ENV, f"{b}:worker-exit")
    on_ray = run_sweep(_points(4, 5), results, RUN_ARGS, timeout_s=120, resume=False, executor="ray")
    assert [(o.point.label, o.status) for o in on_ray.outcomes] == [(a, "ok"), (b, "failed")]
    (lost,) = _by_label(results)[b]
    assert lost["failure"]["reason"].startswith("the Ray worker running it died mid-point (WorkerCrashedError)")

    # --resume on the local executor: what Ray measured is not measured again; the lost point is
    monkeypatch.delenv(FAULT_ENV)
    local = run_sweep(_points(4, 5), results, RUN_ARGS, timeout_s=120, resume=True)
    assert [(o.point.label, o.status) for o in local.outcomes] == [(a, "skipped"), (b, "ok")]
    # and on Ray again: what the local executor measured is not measured again either
    again = run_sweep(_points(4, 5), results, RUN_ARGS, timeout_s=120, resume=True, executor="ray")
    assert [o.status for o in again.outcomes] == ["skipped", "skipped"]

    # Ray's result is the local executor's: same fields, workloads and environment, in the same folder
    (ray_a,), (local_b,) = _by_label(results)[a], [r for r in _by_label(results)[b] if r["status"] == "ok"]
    assert sorted(ray_a) == sorted(local_b) and ray_a["status"] == "ok"
    assert [(w["name"], len(w["repeats"])) for w in ray_a["workloads"]] == \
        [(w["name"], len(w["repeats"])) for w in local_b["workloads"]]
    assert sorted(ray_a["environment"]) == sorted(local_b["environment"])
    assert ray_a["environment"]["host"] == local_b["environment"]["host"] == socket.gethostname()
    assert ray_a["sweep"]["identity"]["config"]["scheduler.max_num_seqs"] == 4
    assert ray_a["config"]["scheduler"]["max_num_seqs"] == 4
    assert Path(ray_a["_path"]).parent == Path(local_b["_path"]).parent  # (the machine's sub-folder)


def test_timeout_on_ray_is_a_failed_point_with_its_host(tmp_path):
    result = run_sweep(_points(4), tmp_path, RUN_ARGS, timeout_s=0.5, resume=False, executor="ray")
    assert [(o.status, o.reason) for o in result.outcomes] == [("failed", "timed out after 0.5 s")]
    (record,) = load_results([tmp_path]).results
    assert record["failure"]["reason"] == "timed out after 0.5 s"
    assert record["environment"]["host"] == socket.gethostname()


def test_a_point_no_node_can_hold_is_refused_before_anything_runs(tmp_path):
    points = build_grid(dict(BASE, **{"model.device": "cuda"}), {"level": [0], "tensor_parallel_size": [1, 2]}, [])
    with pytest.raises(GraphbenchError, match=r"^O0_tensor_parallel_size=1 needs 1 GPU\(s\) on one node; the largest "
                                              r"node of the Ray cluster has 0$"):
        run_sweep(points, tmp_path, RUN_ARGS, timeout_s=5, resume=False, executor="ray")
    assert not load_results([tmp_path]).results


def test_gpus_asked_for():
    from graphbench.bench.sweep_ray import check_fits, gpus_needed

    tp2 = build_grid({"model.model": "tiny-llama", "parallel.tensor_parallel_size": 2}, {"level": [0]}, [])[0]
    assert gpus_needed(tp2, cluster_has_gpus=True) == 2
    assert gpus_needed(tp2, cluster_has_gpus=False) == 0  # device auto on a CPU cluster: a CPU point
    assert gpus_needed(_points(4)[0], cluster_has_gpus=True) == 0  # device cpu
    check_fits([tp2], {"a": 1.0, "b": 2.0})
    with pytest.raises(GraphbenchError, match="needs 2 GPU"):
        check_fits([tp2], {"a": 1.0, "b": 1.0})  # two GPUs, but not on one node


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_errors_are_one_line():
    runner = CliRunner()
    port = _closed_port()
    base = ["sweep", "--device", "cpu", "--levels", "0", "--ladders", "default", "--peers", "none", "--dry-run"]
    cases = [
        (["--executor", "ray", "--ray-address", f"127.0.0.1:{port}", "--device", "auto"],
         f"error: no Ray cluster at 127.0.0.1:{port} (connection refused within 5 s): start one with `ray start "
         "--head` on the head node, or check the address"),
        (["--executor", "ray", "--ray-address", "head-without-port", "--device", "auto"],
         "error: --ray-address must be HOST:PORT (the head node's, e.g. 10.0.0.1:6379), auto or local; got "
         "'head-without-port'"),
        (["--ray-address", "10.0.0.1:6379"], "error: --ray-address needs --executor ray"),
        (["--executor", "slurm"], "error: --executor must be local or ray, got 'slurm'"),
    ]
    for extra, message in cases:
        result = runner.invoke(app, [*base, *extra])
        assert result.exit_code == 2 and result.output.strip() == message, (extra, result.output)


def test_without_ray_installed_the_error_says_what_to_install(tmp_path, monkeypatch):
    from graphbench.bench.sweep_ray import connect

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(GraphbenchError, match=r'^--executor ray needs Ray: pip install -e "\.\[ray\]"'):
        connect(None)


def test_a_failed_task_is_the_points_reason():
    """What Ray answers instead of a result becomes the point's reason (a node without graphbench, say)."""
    from graphbench.bench.sweep_ray import lost_reason

    @ray.remote(max_retries=0)
    def broken():
        raise ModuleNotFoundError("No module named 'graphbench'")

    with pytest.raises(ray.exceptions.RayError) as info:
        ray.get(broken.remote())
    assert lost_reason(info.value) == "its Ray task failed (ModuleNotFoundError): No module named 'graphbench'"
