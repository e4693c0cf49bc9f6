"""`graphbench sweep --gpus`: points spread over GPUs, one point per GPU (or TP group) at a time, order kept
where it matters. The scheduling is tested with a recording runner (no GPU needed)."""

from __future__ import annotations

import threading
import time

import pytest

from graphbench.bench.sweep_grid import SweepPoint
from graphbench.bench.sweep_parallel import parse_gpus, run_spread
from graphbench.errors import GraphbenchError


class Recorder:
    def __init__(self, seconds: float = 0.15):
        self.seconds, self.lock, self.spans = seconds, threading.Lock(), {}

    def __call__(self, point: SweepPoint, env: dict) -> str:
        start = time.perf_counter()
        time.sleep(self.seconds)
        with self.lock:
            self.spans[point.label] = (start, time.perf_counter(), env["CUDA_VISIBLE_DEVICES"])
        return point.label

    def overlap(self, a: str, b: str) -> bool:
        (s1, e1, _), (s2, e2, _) = self.spans[a], self.spans[b]
        return s1 < e2 and s2 < e1


def point(label, cold=False, tp=1, tuned=None):
    return SweepPoint(label, {"parallel.tensor_parallel_size": tp}, cold=cold, tuned_graphs=tuned)


def test_independent_points_run_side_by_side_on_distinct_gpus():
    rec = Recorder()
    points = [point("a"), point("b"), point("c"), point("d")]
    assert run_spread(points, ["0", "1"], rec, lambda p: None) == ["a", "b", "c", "d"]
    assert rec.overlap("a", "b") and rec.overlap("c", "d")
    for x, y in (("a", "b"), ("c", "d")):
        assert {rec.spans[x][2], rec.spans[y][2]} == {"0", "1"}  # never two points on one GPU at once
    assert not rec.overlap("a", "c") or rec.spans["a"][2] != rec.spans["c"][2]


def test_warm_points_wait_for_earlier_cold_points_and_tuned_for_all():
    rec = Recorder()
    points = [point("O1_cold", cold=True), point("O2_cold", cold=True), point("O1_warm"), point("tuned", tuned=4)]
    run_spread(points, ["0", "1", "2"], rec, lambda p: None)
    assert rec.overlap("O1_cold", "O2_cold")  # two cold starts side by side
    for cold in ("O1_cold", "O2_cold"):
        assert rec.spans["O1_warm"][0] >= rec.spans[cold][1]
    for other in ("O1_cold", "O2_cold", "O1_warm"):
        assert rec.spans["tuned"][0] >= rec.spans[other][1]


def test_a_tensor_parallel_point_takes_two_gpus_at_once():
    rec = Recorder()
    points = [point("tp2", tp=2), point("x"), point("y")]
    run_spread(points, ["4", "5"], rec, lambda p: None)
    assert rec.spans["tp2"][2] == "4,5"
    assert not rec.overlap("tp2", "x") and not rec.overlap("tp2", "y")


def test_skipped_points_keep_their_place():
    rec = Recorder(0.01)
    out = run_spread([point("a"), point("b")], ["0"], rec, lambda p: "skipped" if p.label == "a" else None)
    assert out == ["skipped", "b"] and list(rec.spans) == ["b"]


def test_a_point_needing_more_gpus_than_listed_fails_clearly():
    with pytest.raises(GraphbenchError, match="needs 4 GPUs; --gpus lists 2"):
        run_spread([point("tp4", tp=4)], ["0", "1"], Recorder(0.0), lambda p: None)


@pytest.mark.parametrize("text, expected", [("0,1", ["0", "1"]), (" 3 , 1 ", ["3", "1"]), ("", []), (None, [])])
def test_parse_gpus(text, expected):
    assert parse_gpus(text) == expected


@pytest.mark.parametrize("text", ["0,0", "a,b", "1,-2"])
def test_parse_gpus_rejects_bad_lists(text):
    with pytest.raises(GraphbenchError, match="--gpus"):
        parse_gpus(text)


def test_a_round_on_its_own_kernel_search_waits_for_the_earlier_processes_of_its_engine():
    """Its unmeasured start writes the round's kernels into the engine's compile-cache entry: no other process of
    that engine runs beside it. Other engines still run side by side."""
    spans, lock = {}, threading.Lock()

    def rec(p: SweepPoint, env: dict) -> str:
        start = time.perf_counter()
        time.sleep(0.15)
        with lock:
            spans[p.label, p.kernel_search] = (start, time.perf_counter())
        return p.label

    def proc(label, search=""):
        p = point(label)
        p.kernel_search = search
        return p

    points = [proc("O2"), proc("O1"), proc("O2", "x-r2"), proc("O1", "x-r2"), proc("O2", "x-r3")]
    run_spread(points, ["0", "1", "2"], rec, lambda p: None)

    def overlap(a, b):
        return spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1]

    assert not overlap(("O2", ""), ("O2", "x-r2")) and not overlap(("O2", "x-r2"), ("O2", "x-r3"))
    assert not overlap(("O1", ""), ("O1", "x-r2"))
    assert overlap(("O2", ""), ("O1", ""))  # two engines side by side
