"""graphbench plan: SLO parsing, crossing interpolation, capacity per GPU, GPUs needed, plan charts.

Exact numbers on tests/data/report/synthetic (curves in its make_fixtures.py): e.g. O2-default has
TPOT p99 = 10 ms x concurrency / 4, so tpot_p99_ms=50 is crossed at concurrency 20 exactly. The
generic check runs on every fixture folder against a naive re-implementation.
"""

from __future__ import annotations

import csv
import json
import math
import statistics

import pytest

from graphbench.errors import GraphbenchError
from graphbench.reports.figures import PNG_SIGNATURE
from graphbench.reports.charts_plan import pareto_front, pareto_points, plan_json, write_plan
from graphbench.reports.plan import (
    Slo,
    ceil_tolerant,
    crossing,
    interpolate,
    parse_slo,
    parse_slos,
    plan_capacity,
)
from graphbench.reports.store import load_results
from tests.test_report import FIXTURES, SYNTHETIC, ref_median

SLOS = [Slo("tpot_p99_ms", 50.0), Slo("ttft_p99_ms", 1000.0)]
# series -> (max concurrency, at least, limiting SLO, output tok/s per GPU, GPUs for 1000 req/s, for 100 users)
EXPECTED = {
    "O3-default": (64.0, True, "", 15360.0, 5, 2),
    "O1-default": (40.0, False, "tpot_p99_ms<=50", 8000.0, 8, 3),
    "O2-tp2": (50.0, False, "tpot_p99_ms<=50", 7000.0, 10, 4),  # tp=2: 2 x ceil(1000 / 218.75), 2 x ceil(100/50)
    "O2-seqs64": (32.0, False, "tpot_p99_ms<=50", 6720.0, 10, 4),  # TPOT exactly 50 at 32
    "O2-interactivity": (25.0, False, "tpot_p99_ms<=50", 6500.0, 10, 4),
    "O2-default": (20.0, False, "tpot_p99_ms<=50", 5000.0, 13, 5),
    "hf-compile": (10.0, False, "ttft_p99_ms<=1000", 1200.0, 54, 10),
    "O0": (10.0, False, "tpot_p99_ms<=50", 300.0, 214, 10),
    "hf-eager": (0.0, False, "tpot_p99_ms<=50", 0.0, None, None),  # violates at the lowest concurrency
}


def test_parse_slo():
    assert parse_slo("tpot_p99_ms=50") == Slo("tpot_p99_ms", 50.0)
    assert parse_slo(" ttft_p99_ms <= 1000.5 ") == Slo("ttft_p99_ms", 1000.5)
    assert str(Slo("tpot_p99_ms", 50.0)) == "tpot_p99_ms<=50"
    assert parse_slos(["tpot_p99_ms=50,ttft_p99_ms=1000", "itl_p99_ms=30"]) == [*SLOS, Slo("itl_p99_ms", 30.0)]


@pytest.mark.parametrize(
    ("texts", "message"),
    [
        (["tpot_p99_ms"], r"bad SLO 'tpot_p99_ms': expected metric=value, e\.g\. tpot_p99_ms=50"),
        (["=50"], "expected metric=value"),
        (["tpot_p99=50"], r"unknown SLO metric 'tpot_p99' \(did you mean 'tpot_p99_ms'\?\); choose from"),
        (["tpot_p99_ms=fast"], "limit must be a number in ms, got 'fast'"),
        (["tpot_p99_ms=0"], "must be a positive number of ms"),
        (["tpot_p99_ms=-5"], "must be a positive number of ms"),
        (["tpot_p99_ms=nan"], "must be a positive number of ms"),
        (["tpot_p99_ms=50", "tpot_p99_ms=40"], "given twice"),
        ([], "at least one SLO"),
    ],
)
def test_parse_slo_errors(texts, message):
    with pytest.raises(GraphbenchError, match=message):
        parse_slos(texts)


def test_crossing_interpolates_linearly():
    cs = [1.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    tpot = [10 * c / 4 for c in cs]
    assert crossing(cs, tpot, 50.0) == (20.0, True)
    assert crossing(cs, tpot, 1000.0) == (64.0, False)  # never crossed: the highest, flagged
    assert crossing(cs, tpot, 2.0) == (0.0, True)  # the lowest concurrency violates
    assert crossing(cs, tpot, 2.5) == (1.0, True)  # equal to the limit at c=1 meets it; c=4 does not
    assert crossing(cs, [1.5625 * c for c in cs], 50.0) == (32.0, True)  # exactly the limit at 32
    # non-monotone: met at 1 and 4, missed at 2 between them: the highest load that meets it counts
    assert crossing([1.0, 2.0, 4.0], [5.0, 60.0, 40.0], 50.0) == (4.0, False)
    assert crossing([1.0, 2.0, 4.0, 8.0], [5.0, 60.0, 40.0, 60.0], 50.0) == (6.0, True)
    assert crossing([1.0, 16.0, 64.0], [60.0, 40.0, 90.0], 50.0) == (25.6, True)  # missed at 1 only


def test_interpolate_and_ceil():
    assert interpolate([16.0, 32.0], [4000.0, 8000.0], 20.0) == 5000.0
    assert interpolate([1.0, 4.0], [1.0, 4.0], 0.0) == 0.0
    assert interpolate([1.0, 4.0], [10.0, 40.0], 4.0) == 40.0
    assert ceil_tolerant(8.000000000001) == 8 and ceil_tolerant(8.01) == 9 and ceil_tolerant(9.5238) == 10


def test_plan_with_target_rps_is_exact_and_sorted():
    plan = plan_capacity([SYNTHETIC], SLOS, target_rps=1000)
    assert [c.series for c in plan.capacities] == list(EXPECTED)
    for cap in plan.capacities:
        load, at_least, limiting, per_gpu, gpus, _ = EXPECTED[cap.series]
        assert (cap.max_concurrency, cap.at_least, cap.limiting_slo) == (load, at_least, limiting), cap.series
        assert cap.output_tokens_per_s_per_gpu == pytest.approx(per_gpu, rel=1e-12)
        assert cap.gpus_needed == gpus, cap.series
    o2 = next(c for c in plan.capacities if c.series == "O2-default")
    assert o2.output_tokens_per_s == 5000.0 and o2.requests_per_s == pytest.approx(78.125, rel=1e-12)
    assert o2.tokens_per_s_per_user == 250.0 and o2.crossings == {"tpot_p99_ms": 20.0, "ttft_p99_ms": None}
    tp2 = next(c for c in plan.capacities if c.series == "O2-tp2")
    assert tp2.output_tokens_per_s == 14000.0 and tp2.requests_per_s_per_gpu == pytest.approx(109.375)
    assert tp2.max_concurrency_per_gpu == 25.0 and tp2.tensor_parallel_size == 2
    assert any("9999_future.json" in w for w in plan.warnings)


def test_plan_with_target_users():
    plan = plan_capacity([SYNTHETIC], SLOS, target_users=100)
    assert {c.series: c.gpus_needed for c in plan.capacities} == {s: e[5] for s, e in EXPECTED.items()}
    assert plan.target_kind == "users" and plan.target == 100.0


def test_plan_without_target_sorts_by_tokens_per_gpu():
    plan = plan_capacity([SYNTHETIC], SLOS)
    assert all(c.gpus_needed is None for c in plan.capacities)
    per_gpu = [c.output_tokens_per_s_per_gpu for c in plan.capacities]
    assert per_gpu == sorted(per_gpu, reverse=True)
    assert plan.to_dict()["target"] is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target_rps": 10, "target_users": 5}, "not both"),
        ({"target_rps": 0}, "positive"),
        ({"target_users": -3}, "positive"),
        ({"target_rps": math.inf}, "positive"),
    ],
)
def test_target_errors(kwargs, message):
    with pytest.raises(GraphbenchError, match=message):
        plan_capacity([SYNTHETIC], SLOS, **kwargs)


def test_plan_errors(tmp_path):
    with pytest.raises(GraphbenchError, match="at least one SLO"):
        plan_capacity([SYNTHETIC], [])
    with pytest.raises(GraphbenchError, match="no such result file"):
        plan_capacity([tmp_path / "none"], SLOS)


def test_pareto_front():
    points = [(1.0, 10.0), (2.0, 8.0), (2.0, 5.0), (3.0, 8.0), (0.5, 10.0), (4.0, 1.0)]
    assert pareto_front(points) == [True, False, False, True, False, True]
    plan = plan_capacity([SYNTHETIC], SLOS)
    rows = pareto_points(plan)
    front = rows[rows["front"]].sort_values("per_user")
    assert list(zip(front["series"], front["concurrency"])) == [("O2-interactivity", 64.0), ("O3-default", 32.0)]


def test_write_plan_files(tmp_path):
    plan = plan_capacity([SYNTHETIC], SLOS, target_rps=1000)
    seen = []
    files, charts = write_plan(plan, tmp_path / "plan", progress=lambda i, n, o: seen.append((i, n, o.name)))
    assert [f.name for f in files] == ["plan.json", "plan.csv", "plan_pareto.png", "plan_gpus.png"]
    assert seen == [(1, 2, "plan_pareto.png"), (2, 2, "plan_gpus.png")]
    for chart in charts:
        assert chart.path.read_bytes()[:8] == PNG_SIGNATURE and chart.path.stat().st_size > 10_000
    data = json.loads((tmp_path / "plan" / "plan.json").read_text())
    assert data == json.loads(plan_json(plan))
    assert data["slos"] == [{"metric": "tpot_p99_ms", "limit": 50.0}, {"metric": "ttft_p99_ms", "limit": 1000.0}]
    assert data["target"] == {"kind": "requests_per_s", "value": 1000.0}
    with open(tmp_path / "plan" / "plan.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["series"], r["gpus_needed"]) for r in rows] == [
        (s, "" if e[4] is None else str(e[4])) for s, e in EXPECTED.items()
    ]


# ---------------------------------------------------------------- any fixture folder: naive reference


def naive_max_load(points: dict[float, list[float]], limits: list[float]) -> float:
    """points: concurrency -> one value per SLO. Scan from the top down for the highest concurrency
    meeting every limit; then the first linear crossing toward the concurrency above it."""
    cs = sorted(points)
    good = [i for i, c in enumerate(cs) if all(v <= lim for v, lim in zip(points[c], limits))]
    if not good:
        return 0.0
    if good[-1] == len(cs) - 1:
        return cs[-1]
    c0, c1 = cs[good[-1]], cs[good[-1] + 1]
    return min(c0 + (c1 - c0) * (lim - v0) / (v1 - v0)
               for v0, v1, lim in zip(points[c0], points[c1], limits) if v1 > lim)


@pytest.mark.parametrize("folder", FIXTURES, ids=[p.name for p in FIXTURES])
def test_plan_matches_a_naive_reference(folder):
    loaded = load_results([folder])
    shapes = {(json.dumps(w["prompt_len"]), json.dumps(w["output_len"])) for r in loaded.results
              for w in r.get("workloads") or []}  # fmt: skip
    if len(shapes) != 1:
        pytest.skip("the reference groups by label only")
    curves: dict[str, dict[float, dict[str, list[float]]]] = {}
    for r in loaded.results:
        for w in r.get("workloads") or []:
            if w.get("kind") != "closed" or w.get("concurrency") is None:
                continue
            at = curves.setdefault(r["label"], {}).setdefault(float(w["concurrency"]), {})
            for metric in ("tpot_p99_ms", "ttft_p99_ms", "output_tokens_per_s"):
                value = ref_median(w, metric)
                if value is not None:
                    at.setdefault(metric, []).append(value)
    curves = {label: by_c for label, by_c in curves.items()
              if all(any(slo.metric in m for m in by_c.values()) for slo in SLOS)}  # fmt: skip
    if not curves:
        pytest.skip("no closed-loop workload with both SLO metrics")
    plan = plan_capacity([folder], SLOS)
    assert {c.series for c in plan.capacities} == set(curves)
    for cap in plan.capacities:
        by_c = curves[cap.series]
        points = {c: [statistics.median(m[slo.metric]) for slo in SLOS] for c, m in by_c.items()
                  if all(slo.metric in m for slo in SLOS)}  # fmt: skip
        expected = naive_max_load(points, [slo.limit for slo in SLOS])
        assert cap.max_concurrency == pytest.approx(expected, rel=1e-9, abs=1e-12), cap.series


def test_a_plan_of_cpu_results_says_its_capacities_are_the_cpus(tmp_path):
    gpu_plan = plan_capacity([SYNTHETIC], SLOS)
    assert not any("ran on the CPU" in w for w in gpu_plan.warnings)
    for path in sorted(SYNTHETIC.rglob("*.json")):
        try:
            data = json.loads(path.read_text())
        except ValueError:  # the fixture's deliberately damaged files
            continue
        if isinstance(data, dict) and data.get("system", "graphbench") == "graphbench":
            data.setdefault("environment", {})["device"] = "cpu"
        (tmp_path / path.name).write_text(json.dumps(data))
    plan = plan_capacity([tmp_path], SLOS)
    assert any("ran on the CPU" in w and "this CPU's, not a GPU's" in w for w in plan.warnings), plan.warnings
