"""compare and gate say where the two sides' start-ups chose other projection kernels: one run's processes share
its cold search's choices, so a search that lands elsewhere on the other side (another machine, a fresh cache)
is a difference the run's own noise never saw (reports/kernel_choices_diff.py)."""

from __future__ import annotations

import copy
from typing import Any

from graphbench.reports.compare import compare_sets
from graphbench.reports.gate import run_gate
from graphbench.reports.kernel_choices_diff import choices_by_shape, choices_differ
from graphbench.reports.store import load_results
from tests.test_gate import POINTS, make_rounds, write_set

GPU = "NVIDIA H200"
MAIN = [  # a cold start's choices (us, and cuBLAS's torch_us): the one-row GEMV, the skinny GEMM at 64 rows, the
    # add-norm fold at one row
    {"op": "linear", "n": 3072, "k": 2048, "rows": 1, "kernel": "gemv", "blocks": [8, 1024, 8], "us": 4.8,
     "torch_us": 7.3},
    {"op": "linear", "n": 3072, "k": 2048, "rows": 64, "kernel": "skinny", "blocks": [32, 128, 1, 4, 5], "us": 6.8,
     "torch_us": 7.5},
    {"op": "linear", "n": 2048, "k": 2048, "rows": 64, "kernel": "skinny", "blocks": [32, 128, 1, 4, 5], "us": 6.0,
     "torch_us": 6.5},
    {"op": "norm_linear", "n": 3072, "k": 2048, "rows": 1, "kernel": "norm_gemv", "blocks": [8, 1024, 8], "us": 5.5,
     "torch_us": 7.3},
]


def _other_search() -> list[dict[str, Any]]:
    """MAIN as another cold search ended: qkv at 64 rows on cuBLAS (as a real one did: RESULTS, 2026-12-06)."""
    choices = copy.deepcopy(MAIN)
    choices[1].update(kernel="torch", blocks=[], us=7.6, torch_us=7.6)
    return choices


def _results(choices: list[dict[str, Any]], tokens: list[float], sweep_id: str,
             labels: tuple[str, ...] = POINTS) -> list[dict[str, Any]]:
    results = []
    for label in labels:
        for result in make_rounds(label, [{"closed-c4": [(t, 12.0)] * 2} for t in tokens], sweep_id=sweep_id):
            result["environment"] = dict(result["environment"], device="cuda", gpu=GPU)
            for start in result["startups"]:
                start["kernel_choices"] = {"source": "loaded", "seconds": 0.001, "choices": copy.deepcopy(choices)}
            result["startup"] = result["startups"][-1]
            results.append(result)
    return results


def test_the_same_choices_on_both_sides_say_nothing(tmp_path):
    base = write_set(tmp_path / "b", _results(MAIN, [1000.0, 1010.0, 990.0], "b"))
    cur = write_set(tmp_path / "c", _results(MAIN, [1005.0, 995.0, 1000.0], "c"))
    report = run_gate(base, cur)
    assert report.exit_code == 0
    assert not any("kernel choices" in w for w in report.warnings)


def test_choices_that_differ_are_named_once_for_every_point_with_an_example(tmp_path):
    base = write_set(tmp_path / "b", _results(MAIN, [1000.0, 1010.0, 990.0], "b"))
    cur = write_set(tmp_path / "c", _results(_other_search(), [900.0, 905.0, 895.0], "c"))
    report = run_gate(base, cur)
    assert report.exit_code == 1  # the slowdown is still judged: the line says what it may come from
    lines = [w for w in report.warnings if "kernel choices differ" in w]
    assert len(lines) == 1, report.warnings  # one GPU's choices serve both points: one line
    line = lines[0]
    assert line.startswith("O0-default (graphbench) and O2-default (graphbench): ")
    assert "differ on 1 of 4 projection shapes" in line
    assert ("linear 3072x2048 at 64 rows: baseline skinny (32, 128, 1, 4, 5), current cuBLAS, 0.91 against 1.00 of "
            "cuBLAS's time)") in line
    assert "GRAPHBENCH_CACHE_ROOT" in line
    # compare says it too
    sets = compare_sets(load_results([base]), load_results([cur]), metrics=["output_tokens_per_s"])
    assert any("kernel choices differ" in w for w in sets.warnings)


def test_a_shape_one_side_chose_two_ways_is_left_out():
    # the baseline's processes searched apart and disagreed on qkv at 64 rows: its noise has sampled the search
    mixed = _results(MAIN, [1000.0], "b1") + _results(_other_search(), [1000.0], "b2")
    assert choices_differ(mixed, _results(MAIN, [1000.0], "c")) is None
    other = copy.deepcopy(MAIN)
    other[2].update(blocks=[16, 128, 1, 4, 5], us=5.0)  # o at 64 rows: one choice a side, 17% faster
    line = choices_differ(mixed, _results(other, [1000.0], "c"))
    assert line is not None and "differ on 1 of 4" in line
    assert "linear 2048x2048 at 64 rows: baseline skinny (32, 128, 1, 4, 5), current skinny (16, 128, 1, 4, 5)" in line


def test_results_without_choices_or_with_malformed_ones_say_nothing():
    cpu = make_rounds("O2-default", [{"closed-c4": [(1000.0, 12.0)]}])  # the CPU: no kernel choices
    assert choices_differ(cpu, cpu) is None
    assert choices_differ(cpu, _results(MAIN, [1000.0], "c")) is None  # nothing shared to compare
    broken = _results(MAIN, [1000.0], "x", labels=("O2-default",))
    broken[0]["startups"][0]["kernel_choices"]["choices"] = [
        {"op": "linear", "n": "many", "k": 2048, "rows": 64, "kernel": "skinny"}, "text", None,
        {"op": "linear", "n": 2048, "k": 2048, "rows": 64, "kernel": "skinny", "blocks": [32, 128, 1, 4, 5]}]
    broken[0]["startups"].append({"kernel_choices": "not an object"})
    broken[0]["startup"] = {"kernel_choices": {"choices": {"not": "a list"}}}
    assert choices_by_shape(broken) == {("linear", 2048, 2048, 64): {("skinny", (32, 128, 1, 4, 5))}}
    assert choices_differ(broken, _results(MAIN, [1000.0], "c")) is None


def test_near_ties_are_counted_beside_the_widest_gap_and_named_where_they_are_all_that_differs():
    ties = copy.deepcopy(MAIN)
    ties[0].update(blocks=[4, 2048, 4], us=4.9)  # another search's equal alone: 2% slower against cuBLAS
    line = choices_differ(_results(MAIN, [1000.0], "b"), _results(ties, [1000.0], "c"))
    assert line.startswith("start-up's kernel choices differ on 1 of 4 projection shapes, each within 3% of the "
                           "other alone (e.g. linear 3072x2048 at 1 row: baseline gemv")
    assert "which has moved a one-row step by up to 5%" in line
    both = _other_search()
    both[0].update(blocks=[4, 2048, 4], us=4.9)
    both[2].update(blocks=[16, 128, 1, 4, 5], us=5.0)  # o: 0.92 against 0.77 of cuBLAS, a wider gap than qkv's
    line = choices_differ(_results(MAIN, [1000.0], "b"), _results(both, [1000.0], "c"))
    assert "differ on 2 of 4" in line and "(e.g. linear 2048x2048 at 64 rows: baseline skinny" in line
    assert "; 1 more within 3% alone)" in line
    # a choice without cuBLAS's time (an older file) cannot be called a tie
    old = copy.deepcopy(MAIN)
    old[0].update(blocks=[4, 2048, 4], us=4.9)
    del old[0]["torch_us"]
    assert "differ on 1 of 4" in choices_differ(_results(MAIN, [1000.0], "b"), _results(old, [1000.0], "c"))


def test_two_gpu_types_say_gpu_differs_and_nothing_of_a_search(tmp_path):
    # another GPU type chooses other kernels by itself: one cache root cannot make them equal, and the
    # "environment gpu differs" warning already says the verdicts are the hardware's
    base = write_set(tmp_path / "b", _results(MAIN, [1000.0, 1010.0, 990.0], "b"))
    other_gpu = _results(_other_search(), [1005.0, 995.0, 1000.0], "c")
    for result in other_gpu:
        result["environment"]["gpu"] = "NVIDIA H100 80GB HBM3"
    cur = write_set(tmp_path / "c", other_gpu)
    report = run_gate(base, cur)
    assert any("environment gpu differs" in w for w in report.warnings), report.warnings
    assert not any("kernel choices" in w for w in report.warnings), report.warnings
