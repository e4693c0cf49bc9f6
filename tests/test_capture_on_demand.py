"""Capture on demand without a GPU: which keys start-up records, what a step does with a key left for
later, the options' checks, and the stalls the results count (the recording itself: tests/gpu)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from graphbench.bench.metrics import step_metrics
from graphbench.config import load_engine_config
from graphbench.config.modes import CUDAGraphMode
from graphbench.errors import GraphbenchError
from graphbench.runner.dispatcher import CudagraphDispatcher
from graphbench.runner.model_runner import ModelRunner
from graphbench.runner.records import StepRecord
from graphbench.runner.scheduler import BatchDescriptor

FULL, PIECEWISE, NONE = CUDAGraphMode.FULL, CUDAGraphMode.PIECEWISE, CUDAGraphMode.NONE


def test_start_up_records_only_the_sizes_asked_for_largest_first():
    d = CudagraphDispatcher(CUDAGraphMode.FULL_AND_PIECEWISE, [1, 2, 4, 8, 16], 8)
    assert len(d.capture_list()) == 5 + 4  # piecewise for every size, FULL for the decode sizes 1..8
    assert d.capture_list([1, 4]) == [(FULL, BatchDescriptor(4, 4, True)), (PIECEWISE, BatchDescriptor(4, None, False)),
                                      (FULL, BatchDescriptor(1, 1, True)), (PIECEWISE, BatchDescriptor(1, None, False))]
    assert d.capture_list([3]) == [] and d.capture_list([]) == []


def test_a_key_left_for_later_runs_eager_when_never_recorded():
    batch = BatchDescriptor(6, 6, True)
    key = (FULL, BatchDescriptor(8, 8, True))
    runner = SimpleNamespace(recorded={(FULL, BatchDescriptor(4, 4, True))}, record_deferred=False)
    assert ModelRunner.recorded_or_eager(runner, *key, batch) == (NONE, batch)
    runner.recorded.add(key)
    assert ModelRunner.recorded_or_eager(runner, *key, batch) == key
    every = SimpleNamespace(recorded=None, record_deferred=False)  # start-up recorded every key
    assert ModelRunner.recorded_or_eager(every, *key, batch) == key
    assert ModelRunner.recorded_or_eager(runner, NONE, batch, batch) == (NONE, batch)


def test_the_options_are_checked():
    def config(**comp):
        return load_engine_config(overrides={"model.model": "tiny-llama",
                                             **{f"compilation.{k}": v for k, v in comp.items()}})

    assert config(startup_capture_sizes=[1, 2, 4], deferred_capture="never").compilation.startup_capture_sizes == [1, 2, 4]
    assert config(startup_capture_sizes="all").compilation.startup_capture_sizes is None  # a sweep axis's "every key"
    for bad in ({"startup_capture_sizes": [0]}, {"startup_capture_sizes": "1,2"}, {"deferred_capture": "later"}):
        with pytest.raises(GraphbenchError):
            config(**bad)


def test_the_results_count_the_stalls():
    records = [StepRecord(BatchDescriptor(8, 8, True), 0.030, "FULL", 8, 0.001, 0.025),
               StepRecord(BatchDescriptor(8, 8, True), 0.002, "FULL", 8),
               StepRecord(BatchDescriptor(40, 2, False), 0.050, "PIECEWISE", 48, 0.001, 0.045)]
    m = step_metrics(records)
    assert m["capture_stalls"] == 2 and m["capture_stall_ms"] == pytest.approx(70.0)


def test_the_report_sets_what_start_up_saved_against_the_stalls(tmp_path):
    from graphbench.reports.capture_plan_table import capture_plan_table
    from graphbench.reports.report import write_report
    from graphbench.reports.store import write_result
    from tests.test_tune_engine_limits import result

    planned = result("on-demand", {1: 5, 8: 3}, seqs=8)
    planned["startup"].update(num_graphs={"FULL": 4, "PIECEWISE": 6}, deferred_recordings=7, capture_s=0.4,
                              graph_memory_bytes=50 * 2**20, kv_cache_tokens=100000,
                              mixed_capture_sizes=[4, 8, 12], capture_sizes=[1, 2, 4, 8])
    planned["workloads"][0]["recorded_on_demand"] = [["FULL", 8, 0.25], ["PIECEWISE", 12, 0.5]]
    one_ladder = result("one-ladder", {1: 5, 8: 3}, seqs=8)  # neither two ladders nor a plan: no row
    everything = result("all-at-start", {1: 5, 8: 3}, seqs=8)  # the same ladders, every key at start-up
    everything["startup"].update(num_graphs={"FULL": 4, "PIECEWISE": 6}, deferred_recordings=0, capture_s=1.0,
                                 graph_memory_bytes=120 * 2**20, kv_cache_tokens=90000,
                                 mixed_capture_sizes=[4, 8, 12], capture_sizes=[1, 2, 4, 8])
    rows = capture_plan_table([planned, one_ladder, everything])
    ladders = "decode 4 sizes, top 8; mixed 3 sizes, top 12"
    assert rows.values.tolist() == [
        ["on-demand", ladders, 3, 7, 0.4, 50.0, 100000, "0.60 s, 70 MiB, +10,000 KV tokens", "closed", 2, 0.75],
        ["all-at-start", ladders, 10, 0, 1.0, 120.0, 90000, "-", "closed", 0, 0.0]]
    for r in (planned, everything):
        write_result(tmp_path / "results", "h200", r["label"], r)
    report = write_report([tmp_path / "results"], tmp_path / "report")
    text = (report.out_dir / "report.md").read_text()
    assert "## Capture plan: two ladders and capture on demand" in text
    assert (f"| on-demand | {ladders} | 3 | 7 | 0.40 | 50 | 100,000 | 0.60 s, 70 MiB, +10,000 KV tokens | closed | 2 "
            "| 0.75 |") in text


def test_a_plan_is_set_against_every_key_at_start_up_on_its_own_gpu_type():
    """The same ladders recorded whole on an A100 say nothing of what a plan saved on an H200: no reference."""
    from graphbench.reports.capture_plan_table import SAVED, capture_plan_table
    from tests.test_tune_engine_limits import result

    planned = result("on-demand", {1: 5, 8: 3}, seqs=8)
    planned["startup"].update(num_graphs={"FULL": 4}, deferred_recordings=3, capture_s=0.4, graph_memory_bytes=50 * 2**20,
                              kv_cache_tokens=100000, capture_sizes=[1, 2, 4, 8])
    planned["environment"] = {"device": "cuda", "gpu": "NVIDIA H200"}
    everything = result("all-at-start", {1: 5, 8: 3}, seqs=8)
    everything["startup"].update(num_graphs={"FULL": 4}, deferred_recordings=0, capture_s=1.0,
                                 graph_memory_bytes=120 * 2**20, kv_cache_tokens=90000, capture_sizes=[1, 2, 4, 8])
    everything["environment"] = {"device": "cuda", "gpu": "NVIDIA A100"}
    rows = capture_plan_table([planned, everything]).set_index("point")
    assert rows.loc["on-demand @ NVIDIA H200", SAVED] == "-"
    everything["environment"]["gpu"] = "NVIDIA H200"  # the same GPU type: set against it
    rows = capture_plan_table([planned, everything]).set_index("point")
    assert rows.loc["on-demand", SAVED] == "0.60 s, 70 MiB, +10,000 KV tokens"


def test_the_capture_plan_takes_medians_over_the_points_processes():
    """A point measured in three processes: its warm starts' median capture, memory and KV tokens (the cold
    start left out), and per workload the median over processes of the recordings made and their stall."""
    from graphbench.reports.capture_plan_table import capture_plan_table
    from tests.test_tune_engine_limits import result

    point = result("on-demand", {1: 5, 8: 3}, seqs=8)
    point["startup"].update(num_graphs={"FULL": 4}, deferred_recordings=3, capture_sizes=[1, 2, 4, 8])
    point["startups"] = [{"cold": True, "capture_s": 9.0, "graph_memory_bytes": 10 * 2**20, "kv_cache_tokens": 1},
                         {"cold": False, "capture_s": 0.5, "graph_memory_bytes": 80 * 2**20, "kv_cache_tokens": 300},
                         {"cold": False, "capture_s": 0.3, "graph_memory_bytes": 80 * 2**20, "kv_cache_tokens": 300},
                         {"cold": False, "capture_s": 0.4, "graph_memory_bytes": 78 * 2**20, "kv_cache_tokens": 200}]
    point["workloads"][0]["recorded_on_demand_rounds"] = [
        [["FULL", 8, 0.2]], [["FULL", 8, 0.3], ["FULL", 16, 0.3]], [["FULL", 8, 0.1], ["FULL", 16, 0.2]]]
    row = capture_plan_table([point]).values.tolist()[0]
    assert row[4:] == [0.4, 80.0, 300, "-", "closed", 2, pytest.approx(0.3)]


def test_a_capture_plan_is_set_against_every_key_at_start_up_on_its_own_gpu_type():
    # two machines' folders: the H100's plan was set against the H200's point of the same ladders (the last
    # read), "saved" being the two machines' difference
    import copy

    from graphbench.reports.capture_plan_table import capture_plan_table
    from tests.test_tune_engine_limits import result

    def on(point: dict, gpu: str, capture_s: float) -> dict:
        point = copy.deepcopy(point)
        point["environment"] = {"device": "cuda", "gpu": gpu}
        point["startup"]["capture_s"] = capture_s
        return point

    planned = result("on-demand", {1: 5, 8: 3}, seqs=8)
    planned["startup"].update(num_graphs={"FULL": 4}, deferred_recordings=2, capture_s=0.4,
                              graph_memory_bytes=50 * 2**20, kv_cache_tokens=100000, capture_sizes=[1, 2, 4, 8])
    everything = result("all-at-start", {1: 5, 8: 3}, seqs=8)
    everything["startup"].update(num_graphs={"FULL": 4}, deferred_recordings=0, capture_s=1.0,
                                 graph_memory_bytes=120 * 2**20, kv_cache_tokens=90000, capture_sizes=[1, 2, 4, 8])
    rows = capture_plan_table([on(planned, "NVIDIA H100", 0.4), on(everything, "NVIDIA H100", 1.0),
                               on(planned, "NVIDIA H200", 0.2), on(everything, "NVIDIA H200", 3.0)])
    saved = {point: text for point, text in zip(rows["point"], rows["saved against every key at start-up"])}
    assert saved == {"on-demand @ NVIDIA H100": "0.60 s, 70 MiB, +10,000 KV tokens",
                     "on-demand @ NVIDIA H200": "2.80 s, 70 MiB, +10,000 KV tokens"}
