"""Ladder tuning: the DP is exact (brute force over subsets), hand-checked cases, curve, sources, memory model."""

from __future__ import annotations

import itertools
import math
import os
import random
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest

import graphbench
from graphbench.errors import GraphbenchError
from graphbench.ladders import BatchSizeDistribution
from graphbench.ladders.tune import (
    ParetoPoint,
    TunedLadder,
    evaluate_ladder,
    knee,
    pareto_curve,
    tune_ladder,
)
from graphbench.ladders.memory_model import MemoryModel, fit_memory_model, memory_points
from graphbench.ladders.tune_sources import (
    distribution_from_results,
    load_run_results,
    model_distribution,
    workload_names,
)

DATA = Path(__file__).parent / "data" / "tune"
RESULTS = DATA / "results"
MiB = 2**20


# ----------------------------------------------------------------------------- brute force


def exact_cost(sizes, counts, objective):
    """Expected padding (tokens) or waste fraction of a ladder, in exact fractions; eager counts zero."""
    total = sum(counts.values())
    cost = Fraction(0)
    for n, c in counts.items():
        fitting = [s for s in sizes if s >= n]
        if fitting:
            pad = min(fitting)
            cost += Fraction(c, total) * (Fraction(pad - n) if objective == "tokens" else Fraction(pad - n, pad))
        # above the top: eager, zero
    return cost


def brute_force(counts, n, objective, top, multiple_of=1, required=(), pool=None, memory=None):
    """Best cost over every ladder of at most n sizes from pool (default: all multiples <= top)."""
    if pool is None:
        pool = range(multiple_of, top + 1, multiple_of)
    forced = set(required) | {top}
    free = sorted(set(pool) - forced)
    best = None
    for extra in range(0, n - len(forced) + 1):
        for combo in itertools.combinations(free, extra):
            sizes = sorted(forced | set(combo))
            if memory is not None and memory[0].predict(sizes) > memory[1]:
                continue
            cost = exact_cost(sizes, counts, objective)
            if best is None or cost < best:
                best = cost
    return best


def value_of(ladder: TunedLadder, objective: str) -> float:
    return ladder.expected_padded_tokens if objective == "tokens" else ladder.expected_waste_pct / 100


def random_counts(rng: random.Random, top: int, support: int, above: bool = False) -> dict[int, int]:
    sizes = rng.sample(range(1, top + 1), min(support, top))
    counts = {s: rng.randint(1, 20) for s in sizes}
    if above:
        counts[top + rng.randint(1, 5)] = rng.randint(1, 5)
    return counts


def close(a: float, b: Fraction) -> bool:
    return math.isclose(a, float(b), rel_tol=1e-9, abs_tol=1e-12)


# ----------------------------------------------------------------------------- exactness


@pytest.mark.parametrize("objective", ["tokens", "waste"])
def test_dp_equals_brute_force_over_all_integer_ladders(objective: str) -> None:
    rng = random.Random(1234)
    for _ in range(40):
        top = rng.randint(2, 16)
        counts = random_counts(rng, top, rng.randint(1, 12), above=rng.random() < 0.3)
        n = rng.randint(1, 5)
        ladder = tune_ladder(counts, n, objective=objective, top=top)
        assert ladder.sizes[-1] == top and len(ladder.sizes) <= n
        assert close(value_of(ladder, objective), brute_force(counts, n, objective, top))


@pytest.mark.parametrize("objective", ["tokens", "waste"])
def test_dp_exact_with_multiple_of_and_required(objective: str) -> None:
    rng = random.Random(99)
    for _ in range(40):
        m = rng.choice([1, 2, 3, 4])
        top = m * rng.randint(2, 8)
        counts = random_counts(rng, top, rng.randint(1, 12))
        multiples = list(range(m, top, m))
        required = sorted(rng.sample(multiples, rng.randint(0, min(2, len(multiples)))))
        n = rng.randint(len(set(required) | {top}), 6)
        ladder = tune_ladder(counts, n, objective=objective, top=top, multiple_of=m, required=required)
        assert all(s % m == 0 for s in ladder.sizes)
        assert set(required) <= set(ladder.sizes) and top in ladder.sizes and len(ladder.sizes) <= n
        assert close(value_of(ladder, objective), brute_force(counts, n, objective, top, m, required))


def test_dp_exact_over_restricted_candidates() -> None:
    rng = random.Random(7)
    for objective in ("tokens", "waste"):
        for _ in range(25):
            top = rng.randint(4, 30)
            counts = random_counts(rng, top, rng.randint(1, 12))
            pool = sorted(rng.sample(range(1, top), rng.randint(0, min(8, top - 1))))
            n = rng.randint(1, 5)
            ladder = tune_ladder(counts, n, objective=objective, top=top, candidates=pool)
            assert set(ladder.sizes) <= set(pool) | {top}
            best = brute_force(counts, n, objective, top, pool=set(pool) | {top})
            assert close(value_of(ladder, objective), best)


def test_dp_exact_with_memory_budget() -> None:
    rng = random.Random(5)
    checked = 0
    for _ in range(60):
        objective = rng.choice(["tokens", "waste"])
        top = rng.randint(3, 14)
        counts = random_counts(rng, top, rng.randint(1, 10))
        model = MemoryModel(rng.choice([0.0, 1.0, 5.0]), rng.choice([0.0, 0.5, 1.0, 2.0]),
                            fixed_bytes=rng.choice([0.0, 0.0, 7.5, 30.0]))
        n = rng.randint(1, 6)
        budget = model.predict([top]) + rng.uniform(0, 40)
        if model.predict([top]) == 0:
            budget = 1.0
        best = brute_force(counts, n, objective, top, memory=(model, budget))
        ladder = tune_ladder(counts, n, objective=objective, top=top, memory_model=model, memory_budget_bytes=budget)
        assert ladder.predicted_graph_memory_bytes <= budget * (1 + 1e-9)
        assert close(value_of(ladder, objective), best)
        checked += 1
    assert checked == 60


def test_budget_that_even_the_top_exceeds_is_an_error() -> None:
    model = MemoryModel(10 * MiB, 0.0)
    with pytest.raises(GraphbenchError, match="no ladder fits the graph-memory budget"):
        tune_ladder({1: 1, 8: 1}, 2, memory_model=model, memory_budget_bytes=5 * MiB)
    with pytest.raises(GraphbenchError, match="no ladder fits"):
        tune_ladder({1: 1, 8: 1}, 2, memory_model=MemoryModel(1.0, 1.0), memory_budget_bytes=5.0)
    # the fixed part alone (pool of the largest recording, first-capture cost) is over the budget
    with pytest.raises(GraphbenchError, match=r"predicted to need 12\.0 MiB"):
        tune_ladder({1: 1, 8: 1}, 2, memory_model=MemoryModel(MiB, 0.0, fixed_bytes=11 * MiB),
                    memory_budget_bytes=10 * MiB)


def test_fixed_memory_leaves_room_for_fewer_graphs() -> None:
    """Budget 14 MiB, 10 MiB fixed, 1 MiB per graph: 4 graphs fit (not 14)."""
    model = MemoryModel(MiB, 0.0, fixed_bytes=10 * MiB)
    counts = {n: 1 for n in range(1, 17)}
    ladder = tune_ladder(counts, 16, top=16, memory_model=model, memory_budget_bytes=14 * MiB)
    assert len(ladder.sizes) == 4 and ladder.sizes[-1] == 16
    assert ladder.predicted_graph_memory_bytes == 14 * MiB


# ----------------------------------------------------------------------------- hand-checked


def test_two_point_distribution() -> None:
    d = {1: 0.5, 8: 0.5}
    assert tune_ladder(d, 1).sizes == (8,)
    assert tune_ladder(d, 2).sizes == (1, 8)
    one = tune_ladder(d, 1)
    assert one.expected_padded_tokens == 3.5 and one.expected_waste_pct == 43.75 and one.num_sizes == 1
    assert tune_ladder(d, 2).expected_padded_tokens == 0.0
    assert tune_ladder(d, 5).sizes == (1, 8)  # never more sizes than help
    assert tune_ladder(d, 1, objective="waste").sizes == (8,)


def test_objectives_disagree() -> None:
    d = {1: 0.4, 2: 0.2, 8: 0.4}
    # [1,8]: tokens 0.2*6 = 1.2, waste 0.2*6/8 = 0.15; [2,8]: tokens 0.4*1 = 0.4, waste 0.4*1/2 = 0.2
    assert tune_ladder(d, 2, objective="tokens").sizes == (2, 8)
    assert tune_ladder(d, 2, objective="waste").sizes == (1, 8)
    assert math.isclose(tune_ladder(d, 2, objective="waste").expected_waste_pct, 15.0)


def test_top_is_kept_and_batches_above_it_run_eager() -> None:
    ladder = tune_ladder({2: 1, 100: 1}, 1, top=4)
    assert ladder.sizes == (4,) and ladder.expected_padded_tokens == 1.0 and ladder.eager_pct == 50.0
    assert tune_ladder({1: 1, 3: 1}, 2, top=512).sizes == (3, 512)
    assert tune_ladder({1: 1, 3: 1}, 1).sizes == (3,)  # top defaults to the largest batch size


def test_multiple_of_rounds_candidates_up() -> None:
    # top 6 (5 rounded up); [2, 6] pads 1->2, 3->6, 5->6: (1 + 2*3 + 1) / 4 = 2; [4, 6]: (3 + 2*1 + 1) / 4
    ladder = tune_ladder({1: 1, 3: 2, 5: 1}, 2, multiple_of=2)
    assert ladder.sizes == (4, 6) and ladder.expected_padded_tokens == 1.5
    assert tune_ladder({1: 1, 3: 2, 5: 1}, 3, multiple_of=2).sizes == (2, 4, 6)


def test_required_sizes_are_kept() -> None:
    assert tune_ladder({1: 0.5, 8: 0.5}, 2, required=[4]).sizes == (4, 8)
    assert tune_ladder({1: 0.5, 8: 0.5}, 3, required=[4]).sizes == (1, 4, 8)



def test_more_candidates_than_the_exact_search_takes_is_one_line_that_says_how_to_coarsen() -> None:
    """32,768 distinct sizes up to the top made (K + 1)^2 tables of 8 GiB: a bound, with the way round it."""
    from graphbench.ladders.tune_dp import MAX_CANDIDATES

    wide = {s: 1 for s in range(1, 2 * MAX_CANDIDATES + 1)}
    with pytest.raises(GraphbenchError, match=rf"{2 * MAX_CANDIDATES} candidate sizes .* at most {MAX_CANDIDATES}"
                                              r".*--multiple-of \(e\.g\. 8\)"):
        tune_ladder(wide, 4, top=2 * MAX_CANDIDATES)
    assert tune_ladder(wide, 4, top=2 * MAX_CANDIDATES, multiple_of=8).sizes[-1] == 2 * MAX_CANDIDATES

def test_evaluate_ladder_matches_padding_helpers() -> None:
    e = evaluate_ladder([1, 2, 4, 8], {3: 1, 5: 1, 9: 2}, memory_model=MemoryModel(2.0, 1.0))
    assert e.expected_padded_tokens == 0.25 * 1 + 0.25 * 3 and e.eager_pct == 50.0
    assert math.isclose(e.expected_waste_pct, 100 * (0.25 * 0.25 + 0.25 * 3 / 8))
    assert e.predicted_graph_memory_bytes == 4 * 2 + 15
    assert e.to_dict()["sizes"] == [1, 2, 4, 8]


# ----------------------------------------------------------------------------- Pareto curve


@pytest.mark.parametrize("objective", ["tokens", "waste"])
def test_curve_is_monotone_and_each_point_is_optimal(objective: str) -> None:
    rng = random.Random(42)
    for _ in range(15):
        top = rng.randint(4, 14)
        counts = random_counts(rng, top, rng.randint(2, 12))
        curve = pareto_curve(counts, 8, objective=objective, top=top)
        assert [p.num_graphs for p in curve] == list(range(1, 9))
        assert all(isinstance(p, ParetoPoint) and len(p.sizes) <= p.num_graphs for p in curve)
        assert all(b.value <= a.value for a, b in zip(curve, curve[1:]))
        for p in curve[:5]:
            best = brute_force(counts, p.num_graphs, objective, top)
            assert close(p.value / (1 if objective == "tokens" else 100), best)


def test_curve_monotone_on_large_distributions_with_budget() -> None:
    dist = model_distribution("uniform:1-128")
    for objective in ("tokens", "waste"):
        curve = pareto_curve(dist, 20, objective=objective, top=128)
        assert all(b.value <= a.value for a, b in zip(curve, curve[1:]))
        budgeted = pareto_curve(
            dist, 20, objective=objective, top=128,
            memory_model=MemoryModel(1.0, 0.1), memory_budget_bytes=60.0,
        )
        assert all(b.value <= a.value for a, b in zip(budgeted, budgeted[1:]))
        assert all(1.0 * len(p.sizes) + 0.1 * sum(p.sizes) <= 60.0 + 1e-9 for p in budgeted)
        assert all(b.value >= a.value - 1e-12 for a, b in zip(curve, budgeted))


def test_curve_starts_at_the_forced_count_and_ends_at_tune_ladder() -> None:
    curve = pareto_curve({1: 1, 2: 1, 5: 1, 9: 1}, 6, required=[2])
    assert curve[0].num_graphs == 2 and curve[0].sizes == (2, 9)
    assert curve[-1].sizes == tune_ladder({1: 1, 2: 1, 5: 1, 9: 1}, 6, required=[2]).sizes == (1, 2, 5, 9)


def test_knee_is_the_fewest_graphs_within_two_points_of_the_best() -> None:
    # the README's main job (tiny-llama sweep on the CPU, --max-graphs 16; mean batch 13.27): the point farthest
    # below the chord was 2 graphs at 74.78% waste; 13 graphs pay 0.21 tokens a step (1.58% of the mean batch)
    # more than 16, 12 graphs 0.30 (2.29%)
    tokens = [116.706, 14.8406, 8.07, 4.0881, 3.1657, 2.3403, 1.8189, 1.449, 1.1529, 0.9505, 0.7791, 0.6804,
              0.5859, 0.4996, 0.4233, 0.3763]
    main_job = [ParetoPoint(n, value, ()) for n, value in enumerate(tokens, start=1)]
    assert knee(main_job, "tokens", 13.27).num_graphs == 13
    assert knee(main_job, "tokens", 100.0).num_graphs == 6  # batches of 100: 6 graphs pay 1.96% more, 5 2.79%
    waste = [ParetoPoint(1, 54.69, (8,)), ParetoPoint(2, 21.88, (4, 8)), ParetoPoint(3, 3.12, (1, 4, 8)),
             ParetoPoint(4, 0.0, (1, 3, 4, 8))]
    assert knee(waste, "waste").num_graphs == 4  # 3.12 points above the best
    assert knee(waste[:3], "waste").num_graphs == 3
    time = [ParetoPoint(1, 1.2, ()), ParetoPoint(2, 1.03, ()), ParetoPoint(3, 1.02, ()), ParetoPoint(4, 1.0, ())]
    assert knee(time, "time").num_graphs == 3  # 2% slower than the best (2 graphs: 3%)
    flat = [ParetoPoint(1, 1.0, (8,)), ParetoPoint(2, 0.0, (1, 8)), ParetoPoint(3, 0.0, (1, 8))]
    assert knee(flat, "tokens", 4.0).num_graphs == 2
    assert knee([ParetoPoint(3, 0.0, (1, 2, 3))]).num_graphs == 3
    with pytest.raises(GraphbenchError):
        knee([])


def test_large_problem_is_fast() -> None:
    start = time.perf_counter()
    dist = model_distribution("uniform:1-512")
    curve = pareto_curve(dist, 51, objective="waste", top=512)
    assert len(curve) == 51 and curve[-1].value < 100 * 0.05
    assert time.perf_counter() - start < 5


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(max_graphs=0), "max_graphs must be a positive integer"),
        (dict(objective="speed"), "unknown objective"),
        (dict(top=7, multiple_of=2), "top 7 is not a multiple of 2"),
        (dict(required=[3], multiple_of=2), "required size 3 is not a multiple of 2"),
        (dict(required=[16]), "required size 16 is above the top 8"),
        (dict(required=[1, 2], max_graphs=2), "fewer than the 3 sizes"),
        (dict(memory_budget_bytes=1e9), "needs a memory model"),
        (dict(memory_budget_bytes=-1.0, memory_model=MemoryModel(1, 1)), "must be positive"),
        (dict(memory_budget_bytes=9.0, memory_model=MemoryModel(-1, 1)), "non-negative"),
        (dict(multiple_of=0), "multiple_of must be a positive integer"),
    ],
)
def test_bad_input(kwargs, match) -> None:
    kwargs = {"max_graphs": 4, **kwargs}
    with pytest.raises(GraphbenchError, match=match):
        pareto_curve({1: 1, 8: 1}, kwargs.pop("max_graphs"), **kwargs)


def test_empty_or_bad_distribution() -> None:
    with pytest.raises(GraphbenchError, match="empty"):
        tune_ladder({1: 0}, 2)
    with pytest.raises(GraphbenchError, match="mapping"):
        tune_ladder([1, 2], 2)  # type: ignore[arg-type]


def test_budget_search_too_large_is_refused() -> None:
    with pytest.raises(GraphbenchError, match="too large"):
        tune_ladder(model_distribution("uniform:1-1024"), 60, memory_model=MemoryModel(1.0, 1.0),
                    memory_budget_bytes=1e4)


# ----------------------------------------------------------------------------- sources


def test_closed_and_uniform_models() -> None:
    d = model_distribution("closed:4")
    assert dict(d) == pytest.approx({1: 0.1 / 3, 2: 0.1 / 3, 3: 0.1 / 3, 4: 0.9})
    assert dict(model_distribution("closed:1")) == {1: 1.0}
    assert dict(model_distribution("closed:2:0.5")) == {1: 0.5, 2: 0.5}
    assert dict(model_distribution("closed:3:1")) == {3: 1.0}
    assert set(model_distribution("closed:4", tokens_per_request=2)) == {2, 4, 6, 8}
    assert dict(model_distribution("uniform:3-4")) == {3: 0.5, 4: 0.5}
    assert len(model_distribution("uniform:8")) == 8


@pytest.mark.parametrize("spec", ["closed:0", "closed:x", "closed:4:1.5", "uniform:5-3", "uniform:0-3", "poisson:3", ""])
def test_bad_models(spec: str) -> None:
    with pytest.raises(GraphbenchError):
        model_distribution(spec)


def test_distribution_from_results() -> None:
    results, warnings = load_run_results([RESULTS])
    assert len(results) == 3 and warnings == []  # the failed point is dropped
    assert workload_names(results) == ["closed-c4", "closed-c8"]
    d = distribution_from_results(results)
    counts = {1: 3, 2: 1, 3: 4, 4: 24, 5: 2, 6: 1, 7: 1, 8: 26, 600: 2}
    assert dict(d) == {k: v / 64 for k, v in counts.items()}
    c4 = distribution_from_results(results, ["closed-c4"])
    assert dict(c4) == {1: 3 / 32, 2: 1 / 32, 3: 4 / 32, 4: 24 / 32}
    with pytest.raises(GraphbenchError, match="no workload named nope"):
        distribution_from_results(results, ["nope"])
    with pytest.raises(GraphbenchError, match="no batch-size histogram"):
        distribution_from_results([{"workloads": []}])
    with pytest.raises(GraphbenchError, match="no such result"):
        load_run_results([DATA / "missing"])


def test_a_sweeps_peer_is_passed_over_by_each_phase() -> None:
    # a GPU sweep's default peer (hf-compile) records no engine steps, so no decode/mixed histograms either:
    # `tune --from results/ --phase both` refused every such folder as "written before 2026-12-04"
    engine = {"system": "graphbench", "workloads": [{"name": "closed-c4", "repeats": [
        {"batch_size_histogram": {"4": 6, "40": 1}, "decode_size_histogram": {"4": 6}, "mixed_size_histogram": {"40": 1}}]}]}
    peer = {"system": "hf-compile", "workloads": [{"name": "closed-c4", "repeats": [{"output_tokens_per_s": 10.0}]}]}
    assert dict(distribution_from_results([engine, peer], phase="decode")) == {4: 1.0}
    assert dict(distribution_from_results([peer, engine], phase="mixed")) == {40: 1.0}
    assert dict(distribution_from_results([engine, peer])) == {4: 6 / 7, 40: 1 / 7}


def test_memory_model_fit() -> None:
    results, _ = load_run_results([RESULTS])
    assert memory_points(results) == [(4, 15, 4 * MiB + 4096 * 15), (7, 87, 7 * MiB + 4096 * 87),
                                      (3, 88, 3 * MiB + 4096 * 88)]
    model = fit_memory_model(results)
    assert model.per_graph_bytes == pytest.approx(MiB) and model.per_token_bytes == pytest.approx(4096)
    assert model.num_points == 3 and model.rms_error_bytes < 1e-3 and model.note == ""
    single = fit_memory_model(results[:1])
    assert single.per_graph_bytes == pytest.approx((4 * MiB + 4096 * 15) / 4) and single.per_token_bytes == 0
    assert "per graph only" in single.note
    # memory that falls with size: the fit is constrained to non-negative coefficients
    fake = [{"startup": {"capture_sizes": s, "graph_memory_bytes": m}} for s, m in
            [([1, 2], 100.0), ([10, 20], 50.0), ([5], 40.0)]]
    fit = fit_memory_model(fake)
    assert fit.per_graph_bytes >= 0 and fit.per_token_bytes >= 0 and "refitted" in fit.note
    with pytest.raises(GraphbenchError, match="no result with captured graphs"):
        fit_memory_model([{"startup": {"capture_sizes": [1], "graph_memory_bytes": 0}}])


def test_memory_model_fit_with_a_fixed_part() -> None:
    """Four ladders measured with 150 MiB every ladder pays + 1.25 MiB per graph + 2 KiB per token."""
    ladders = [[1, 2, 4, 8], [1, 2, 3, 4, 5, 6, 7, 8, 16, 32], [8, 64, 512], [4, 16, 64, 256, 512]]
    exact = [{"startup": {"capture_sizes": s, "graph_memory_bytes": 150 * MiB + 1.25 * MiB * len(s) + 2048 * sum(s)}}
             for s in ladders]
    model = fit_memory_model(exact)
    assert model.fixed_bytes == pytest.approx(150 * MiB) and model.per_graph_bytes == pytest.approx(1.25 * MiB)
    assert model.per_token_bytes == pytest.approx(2048) and model.rms_error_bytes < 1.0 and model.note == ""
    assert model.predict([1, 2]) == pytest.approx(150 * MiB + 2.5 * MiB + 2048 * 3)
    # two measured ladders cannot separate three terms: an exact two-term fit, coefficients >= 0 (here
    # per-graph + per-token would need a negative per-token term, so fixed + per-graph it is)
    two = fit_memory_model(exact[:2])
    assert two.rms_error_bytes < 1.0 and two.per_token_bytes == 0
    assert two.fixed_bytes > 0 and two.per_graph_bytes > 0


def test_memory_model_is_one_models_on_one_gpu_type() -> None:
    """Graph memory differs by model and by GPU: a fit over two would be neither's, so it is refused."""
    def point(sizes, mib, model="m", gpu="NVIDIA H200"):
        return {"model": model, "environment": {"gpu": gpu},
                "startup": {"capture_sizes": sizes, "graph_memory_bytes": mib * MiB}}

    one = [point([1, 2], 10), point([1, 2, 4, 8], 20)]
    assert fit_memory_model(one).per_graph_bytes == pytest.approx(5 * MiB)
    with pytest.raises(GraphbenchError, match=r"2 models or GPU types \(m on NVIDIA A100; m on NVIDIA H200\)"):
        fit_memory_model([*one, point([1, 2], 30, gpu="NVIDIA A100")])
    with pytest.raises(GraphbenchError, match=r"m on NVIDIA H200; other on NVIDIA H200.*give the results of one"):
        fit_memory_model([*one, point([1, 2], 30, model="other")])
    # a result without graphs is no source: it does not make the fit refuse
    assert fit_memory_model([*one, point([], 0, gpu="NVIDIA A100")]).per_graph_bytes == pytest.approx(5 * MiB)
    # nor one measurement with another: results from before graph_setup_bytes against newer ones
    newer = point([1, 2, 4], 47)
    newer["startup"]["graph_setup_bytes"] = 32 * MiB
    with pytest.raises(GraphbenchError, match="graph memory measured two ways"):
        fit_memory_model([*one, newer])
    for p in one:
        p["startup"]["graph_setup_bytes"] = 32 * MiB
    assert fit_memory_model([*one, newer]).per_graph_bytes > 0


def test_a_result_that_does_not_say_its_gpu_or_model_is_no_other_source() -> None:
    """A result written without `environment` (or without a model) beside the same model's on an H200: one
    source, whose figures the fit records; not "two GPU types"."""
    def point(sizes, mib, **fields):
        return {**fields, "startup": {"capture_sizes": sizes, "graph_memory_bytes": mib * MiB}}

    said = point([1, 2, 4, 8], 20, model="m", environment={"device": "cuda", "gpu": "NVIDIA H200"})
    fit = fit_memory_model([point([1, 2], 10, model="m"), said])
    assert fit.per_graph_bytes == pytest.approx(5 * MiB) and (fit.model, fit.gpu) == ("m", "NVIDIA H200")
    fit = fit_memory_model([point([1, 2], 10, environment={"gpu": "NVIDIA H200"}), said])
    assert (fit.model, fit.gpu) == ("m", "NVIDIA H200")
    assert fit_memory_model([point([1, 2], 10), point([1, 2, 4, 8], 20)]).gpu == ""
    with pytest.raises(GraphbenchError, match="2 models or GPU types"):  # two that do say, and differ
        fit_memory_model([said, point([1, 2], 10, model="m", environment={"gpu": "NVIDIA A100"})])


def test_distribution_type_is_reused() -> None:
    assert isinstance(model_distribution("uniform:1-4"), BatchSizeDistribution)


def test_tuning_never_imports_torch() -> None:
    src = str(Path(graphbench.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    code = (
        "import graphbench.ladders.tune, graphbench.ladders.tune_sources, graphbench.cli.tune, sys; "
        "assert 'torch' not in sys.modules, 'torch was imported'; "
        "assert 'matplotlib' not in sys.modules, 'matplotlib was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)
