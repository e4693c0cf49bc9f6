"""compare_results and run_gate on schema-conforming result files written with store.write_result.

The samples are processes: a sweep point measured in R rounds writes R files (`sweep.round`), which
load as one record whose samples are the rounds' medians (reports/rounds.py). The acceptance trials:
two result sets of the same code (1-2 % noise, 5 rounds of 2 repeats a point) pass the gate in 20 of
20 seeded trials; with a 15 % tokens/s drop injected (three times the threshold: the noise floor is
NOISE_RANGES times the processes' range) they fail in 20 of 20.
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from graphbench.errors import GraphbenchError
from graphbench.reports.compare import compare_results, compare_sets
from graphbench.reports.gate import (
    DEFAULT_THRESHOLDS,
    RULE,
    normalize_thresholds,
    parse_threshold,
    run_gate,
    thresholds_from_specs,
)
from graphbench.reports.metric_catalogue import resolve_metric
from graphbench.reports.verdict import MIN_PROCESSES, NOISE_RANGES
from graphbench.reports.store import load_results, write_result

MACHINE = "cpu-test"
WORKLOADS = ("closed-c1", "closed-c4")
POINTS = ("O0-default", "O2-default")


# ------------------------------------------------------------------ result builders (shared with the CLI tests)


def _dist(p50: float, p99: float) -> dict[str, float]:
    return {"mean": (p50 + p99) / 2, "p50": p50, "p90": (p50 + p99) / 2, "p99": p99}


def make_repeat(tokens_per_s: float, tpot_p99_ms: float, step_p50_ms: float | None = None) -> dict[str, Any]:
    """One repeat of a workload, with every field of docs/RESULTS_SCHEMA.md."""
    step = step_p50_ms if step_p50_ms is not None else tpot_p99_ms * 0.8
    return {
        "output_tokens_per_s": tokens_per_s, "total_tokens_per_s": tokens_per_s * 3.0,
        "duration_s": 64 * 16 / tokens_per_s, "num_steps": 70,
        "step_ms": _dist(step, step * 1.3), "ttft_ms": _dist(20.0, 30.0),
        "tpot_ms": _dist(tpot_p99_ms * 0.9, tpot_p99_ms), "itl_ms": _dist(tpot_p99_ms * 0.9, tpot_p99_ms * 1.1),
        "e2e_ms": _dist(600.0, 700.0), "padding_waste_pct": 1.2, "padding_overhead": 0.012,
        "eager_fraction": 0.1, "runtime_modes": {"FULL": 60, "PIECEWISE": 3, "NONE": 7},
        "batch_size_histogram": {"4": 60, "132": 1}, "peak_memory_bytes": 5_000_000_000,
    }


def make_result(
    label: str = "O2-default",
    *,
    repeats: dict[str, Sequence[tuple[float, float]]] | None = None,
    system: str = "graphbench",
    model: str = "tiny-llama",
    config_hash: str = "3904e8f0ec",
    startup_s: float | None = 2.0,
    capture_s: float = 0.5,
    graph_memory_bytes: int | None = 329_000_000,
    graph_setup_bytes: int | None = None,
    status: str = "ok",
) -> dict[str, Any]:
    """A result dict (one process: no `sweep.round`); repeats maps workload name -> [(tokens/s, tpot p99 ms), ...]."""
    if repeats is None:
        repeats = {w: [(2200.0, 12.0)] * 5 for w in WORKLOADS}
    if status != "ok":
        return {"label": label, "system": system, "status": status,
                "failure": {"reason": "timed out after 1200 s", "stderr_tail": "..."},
                "created_utc": "2026-11-29T10:00:00Z", "environment": {}, "model": model, "config": {},
                "config_hash": None, "sweep": {}, "startup": None, "startups": [], "workloads": []}
    startup = {"cold": False, "total_s": startup_s, "load_s": 0.2, "dynamo_s": 0.5, "inductor_s": 0.7,
               "compile_sizes_s": 0.0, "loaded_s": 0.0, "capture_s": capture_s,
               "graph_memory_bytes": graph_memory_bytes, "num_graphs": {"FULL": 35, "PIECEWISE": 51},
               "kv_cache_tokens": 100000,
               "cudagraph_mode": {"requested": "FULL_AND_PIECEWISE", "resolved": "FULL_AND_PIECEWISE", "reason": ""},
               "capture_sizes": [1, 2, 4, 8]}
    if startup_s is None:
        del startup["total_s"]
    if graph_memory_bytes is None:
        del startup["graph_memory_bytes"]
    if graph_setup_bytes is not None:  # (absent from results written before 2026-12-06)
        startup["graph_setup_bytes"] = graph_setup_bytes
    workloads = []
    for name, reps in repeats.items():
        concurrency = int(name.rsplit("c", 1)[-1]) if name.rsplit("c", 1)[-1].isdigit() else 1
        workloads.append({
            "name": name, "kind": "closed", "concurrency": concurrency, "request_rate": None,
            "prompt_len": {"dist": "fixed", "value": 64}, "output_len": {"dist": "fixed", "value": 32},
            "num_requests": 4 * concurrency, "seed": 0,
            "repeats": [make_repeat(t, p) for t, p in reps], "summary": {},
        })
    return {
        "label": label, "system": system, "status": status, "failure": None,
        "created_utc": "2026-11-29T10:00:00Z",
        "environment": {"graphbench": "0.1.0", "torch": "2.13.0", "device": "cpu", "gpu": None,
                        "host": "ci", "python": "3.12.3", "git_commit": "abc123"},
        "model": model, "config": {"model": {"model": model}}, "config_hash": config_hash,
        "sweep": {"id": "test", "point": {"optimization_level": int(label[1]) if label[1:2].isdigit() else 2}},
        "startup": startup, "startups": [startup], "workloads": workloads,
    }


def with_round(result: dict[str, Any], index: int, of: int, sweep_id: str = "test", seed: int = 0) -> dict[str, Any]:
    """The result as the process of round `index` of `of` of sweep `sweep_id` wrote it (`sweep.round`)."""
    result = copy.deepcopy(result)
    result["sweep"] = dict(result.get("sweep") or {},
                           round={"id": sweep_id, "index": index, "of": of, "seed": seed, "position": index})
    return result


def make_rounds(
    label: str = "O2-default",
    rounds: Sequence[dict[str, Sequence[tuple[float, float]]]] = (),
    *,
    startup_s: float | Sequence[float] | None = 2.0,
    sweep_id: str = "test",
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """One point measured in len(rounds) processes: one result file per round (rounds[i] as make_result's
    repeats); startup_s: one value for every round, or one per round."""
    starts = list(startup_s) if isinstance(startup_s, Sequence) else [startup_s] * len(rounds)
    assert len(starts) == len(rounds)
    return [with_round(make_result(label, repeats=dict(reps), startup_s=start, **kwargs), i, len(rounds), sweep_id)
            for i, (reps, start) in enumerate(zip(rounds, starts), 1)]


def write_set(directory: Path, results: Sequence[dict[str, Any]]) -> Path:
    for r in results:
        write_result(directory, MACHINE, r["label"], r)
    return directory


def noisy_set(rng: random.Random, rel_noise: float, n_rounds: int = 5, n_repeats: int = 2, tokens_factor: float = 1.0,
              tpot_factor: float = 1.0, startup_factor: float = 1.0, sweep_id: str = "test") -> list[dict[str, Any]]:
    """Both points, both workloads, each point measured in n_rounds processes of n_repeats repeats, every
    value with relative Gaussian noise."""
    def jitter(x: float) -> float:
        return x * (1.0 + rng.gauss(0.0, rel_noise))

    results = []
    for i, label in enumerate(POINTS):
        tokens = {w: 1000.0 * (1 + i) * (1 + j) for j, w in enumerate(WORKLOADS)}
        tpot = 20.0 / (1 + i)
        rounds = [{w: [(jitter(tokens[w]) * tokens_factor, jitter(tpot) * tpot_factor) for _ in range(n_repeats)]
                   for w in WORKLOADS} for _ in range(n_rounds)]
        starts = [jitter(2.0 + 10 * i) * startup_factor for _ in range(n_rounds)]
        results += make_rounds(label, rounds, startup_s=starts, sweep_id=sweep_id,
                               graph_memory_bytes=0 if i == 0 else 329_000_000, config_hash=f"hash{i}")
    return results


# ------------------------------------------------------------------ acceptance trials


def test_same_code_passes_in_20_of_20_trials(tmp_path):
    passes = 0
    for trial in range(20):
        rng = random.Random(1000 + trial)
        rel = 0.01 + 0.01 * rng.random()  # 1-2 % noise
        base = write_set(tmp_path / f"t{trial}" / "baseline", noisy_set(rng, rel))
        cur = write_set(tmp_path / f"t{trial}" / "current", noisy_set(rng, rel))
        report = run_gate(base, cur, DEFAULT_THRESHOLDS)
        assert len(report.checks) == 2 * 2 * 2 + 2 * 2  # 2 points x 2 workloads x 2 repeat metrics + 2 x 2 point
        assert all(c.comparison.n_baseline == c.comparison.n_current == 5 for c in report.checks)  # 5 processes
        passes += report.passed and report.exit_code == 0
    assert passes == 20


def test_15pct_tokens_drop_fails_in_20_of_20_trials(tmp_path):
    fails = 0
    for trial in range(20):
        rng = random.Random(2000 + trial)
        rel = 0.01 + 0.01 * rng.random()
        base = write_set(tmp_path / f"t{trial}" / "baseline", noisy_set(rng, rel))
        cur = write_set(tmp_path / f"t{trial}" / "current", noisy_set(rng, rel, tokens_factor=0.85))
        report = run_gate(base, cur, DEFAULT_THRESHOLDS)
        regressed = {(c.comparison.label, c.comparison.workload, c.metric) for c in report.regressions}
        # every point and workload is caught, and nothing else is
        assert regressed == {(p, w, "output_tokens_per_s") for p in POINTS for w in WORKLOADS}
        fails += (not report.passed) and report.exit_code == 1
    assert fails == 20


# ------------------------------------------------------------------ rules


def _two_sets(tmp_path: Path, base: list[dict], cur: list[dict]) -> tuple[Path, Path]:
    return write_set(tmp_path / "baseline", base), write_set(tmp_path / "current", cur)


def _samples(values: Sequence[float], tpot: float = 12.0) -> dict[str, list[tuple[float, float]]]:
    """One process's repeats: every value as a repeat of closed-c4."""
    return {"closed-c4": [(v, tpot) for v in values]}


def _rounds(values: Sequence[float], tpots: Sequence[float] | None = None, **kwargs: Any) -> list[dict[str, Any]]:
    """One point measured in len(values) processes whose medians are the values (two repeats each, 1
    tok/s either side of it)."""
    tpots = list(tpots) if tpots is not None else [12.0] * len(values)
    return make_rounds(rounds=[{"closed-c4": [(v - 1.0, t), (v + 1.0, t)]} for v, t in zip(values, tpots)],
                       **kwargs)


def _tokens(report) -> Any:
    return next(r for r in report.checks if r.metric == "output_tokens_per_s")


BASE5 = [2200.0, 2210.0, 2190.0, 2205.0, 2195.0]


def test_rounds_of_a_point_load_as_one_record_of_process_samples(tmp_path):
    b = write_set(tmp_path / "b", _rounds(BASE5[:3]))
    loaded = load_results([b]).results
    assert len(loaded) == 1 and len(loaded[0]["rounds"]) == 3
    assert len(load_results([b], merge=False).results) == 3
    comps = compare_results(loaded, loaded, metrics=["tokens_per_s"])
    assert [c.baseline_samples for c in comps] == [tuple(BASE5[:3])]  # the rounds' medians, not the 6 repeats


def test_three_rounds_a_side_are_judged_by_welch_t(tmp_path):
    """3 vs 3 processes: the U test cannot reach p < 0.05 (its smallest p is 0.1), Welch's t can."""
    b, c = _two_sets(tmp_path, _rounds(BASE5[:3]), _rounds([v * 0.8 for v in BASE5[:3]]))
    report = run_gate(b, c)
    tokens = _tokens(report)
    assert tokens.rule == RULE and tokens.comparison.test_method == "Welch's t"
    assert tokens.comparison.n_baseline == tokens.comparison.n_current == 3
    # the noise floor: NOISE_RANGES x the larger range between processes (20 tok/s), in % of the baseline's median
    assert tokens.comparison.p_value < 0.05
    assert tokens.comparison.noise_pct == pytest.approx(NOISE_RANGES * 20 / 2200 * 100)
    assert tokens.status == "regressed" and "Welch's t" in tokens.reason
    assert not report.passed and report.exit_code == 1
    assert not any("no test and no noise estimate" in w for w in report.warnings)
    assert "| ❌ regressed |" in report.to_markdown()
    # within the threshold: significant, beyond the noise, but below the -5% minimum effect: a pass
    close = write_set(tmp_path / "close", _rounds([v * 0.97 for v in BASE5[:3]]))
    tokens = _tokens(run_gate(b, close))
    assert tokens.comparison.significant and tokens.comparison.verdict == "tie"
    assert tokens.status == "pass" and "below the 5% minimum effect" in tokens.reason
    # -20% on three processes that differ by 30% among themselves: within the noise, a pass
    noisy = write_set(tmp_path / "noisy", _rounds([1700.0, 1760.0, 2200.0]))
    tokens = _tokens(run_gate(b, noisy))
    assert tokens.comparison.change_pct == pytest.approx(-20.0, abs=0.1) and tokens.comparison.noise_pct > 20
    assert tokens.status == "pass" and tokens.comparison.verdict == "tie" and "within noise" in tokens.reason


def test_four_rounds_use_the_u_test(tmp_path):
    b, c = _two_sets(tmp_path, _rounds(BASE5[:4]), _rounds([v * 0.9 for v in BASE5[:4]]))
    report = run_gate(b, c)
    assert [r.metric for r in report.regressions] == ["output_tokens_per_s"]
    tokens = _tokens(report)
    assert tokens.comparison.test_method == "Mann-Whitney U" and tokens.comparison.p_value == pytest.approx(2 / 70)
    assert report.exit_code == 1 and not any("no test and no noise estimate" in w for w in report.warnings)


def test_beyond_threshold_but_not_significant_passes(tmp_path):
    b, c = _two_sets(tmp_path, _rounds([2200.0, 1500.0, 2900.0, 2100.0, 2300.0]),
                     _rounds([1900.0, 2850.0, 1450.0, 2050.0, 2250.0]))
    report = run_gate(b, c)
    tokens = _tokens(report)
    assert tokens.comparison.change_pct < -5 and tokens.comparison.p_value >= 0.05
    assert tokens.comparison.significant is False and tokens.comparison.verdict == "tie"
    assert tokens.status == "pass" and "p=0.55" in tokens.reason and report.exit_code == 0


def test_significant_but_within_threshold_passes(tmp_path):
    b, c = _two_sets(tmp_path, _rounds(BASE5), _rounds([v * 0.97 for v in BASE5]))
    report = run_gate(b, c)
    tokens = _tokens(report)
    assert tokens.comparison.significant and tokens.comparison.change_pct == pytest.approx(-3.0)
    assert tokens.status == "pass" and report.passed and report.exit_code == 0
    # ... and a tighter threshold (which is also compare's minimum effect) makes it a regression
    tight = run_gate(b, c, {"tokens_per_s": -2})
    assert not tight.passed and _tokens(tight).status == "regressed"


def test_significant_and_beyond_threshold_but_within_noise_passes(tmp_path):
    """The noise floor: a -10% change that the U test calls significant, but one baseline process was
    14% off the others, so the processes' own spread covers the change."""
    base = [2200.0, 2201.0, 2202.0, 2203.0, 2204.0, 2205.0, 2206.0, 1900.0]
    b, c = _two_sets(tmp_path, _rounds(base), _rounds([1980.0, 1981.0, 1982.0, 1983.0, 1984.0, 1985.0, 1986.0,
                                                       1987.0]))
    tokens = _tokens(run_gate(b, c))
    assert tokens.comparison.significant and tokens.comparison.change_pct < -9.5
    assert tokens.comparison.noise_pct > 13
    assert tokens.status == "pass" and "within noise" in tokens.reason
    # the same change without the stray process: a regression
    quiet = write_set(tmp_path / "quiet", _rounds(base[:-1]))
    assert _tokens(run_gate(quiet, c)).status == "regressed"


def test_passes_whose_noise_is_wider_than_their_threshold_are_named(tmp_path):
    """A pass over processes that spread more than the threshold says little: a regression of the threshold's
    size would pass too (an H100's warm starts spread 75% against start-up's 20%). The gate names such
    metrics in a warning; the verdict and exit code stay those of the checks."""
    wide = [2.0, 3.2, 2.2]  # range 1.2 s on a 2.2-s median: noise 2 x 1.2 / 2.2 = 109% > +20%
    b, c = _two_sets(tmp_path, _rounds(BASE5[:3], startup_s=wide), _rounds(BASE5[:3], startup_s=[2.2, 2.1, 2.3]))
    report = run_gate(b, c)
    startup = next(r for r in report.checks if r.metric == "startup_s")
    assert startup.status == "pass" and startup.comparison.noise_pct > 100
    blind = [w for w in report.warnings if "more noise between processes than their threshold" in w]
    assert len(blind) == 1 and "startup_s (1: noise up to 109% against +20%)" in blind[0]
    assert "output_tokens_per_s" not in blind[0]  # 2190-2210 tok/s: noise 1.8% against -5%
    assert report.passed and report.exit_code == 0
    # processes that agree: no such warning
    b, c = _two_sets(tmp_path / "tight", _rounds(BASE5[:3], startup_s=[2.0, 2.02, 2.01]),
                     _rounds(BASE5[:3], startup_s=[2.01, 2.0, 2.03]))
    assert not any("more noise between processes" in w for w in run_gate(b, c).warnings)


def test_improvement_is_reported_not_failed(tmp_path):
    b, c = _two_sets(tmp_path, _rounds(BASE5, [12.0, 12.1, 11.9, 12.05, 11.95]),
                     _rounds([v * 1.2 for v in BASE5], [9.0, 9.1, 8.9, 9.05, 8.95]))
    report = run_gate(b, c)
    status = {r.metric: r.status for r in report.checks}
    assert status["output_tokens_per_s"] == "improved" and status["tpot_p99_ms"] == "improved"
    assert report.passed and report.exit_code == 0


def test_one_process_a_side_cannot_judge(tmp_path):
    """Single-process results (graphbench run, or a sweep with --rounds 1): no test, no noise estimate.
    A change beyond the threshold is inconclusive (exit 3), anything else untestable."""
    b, c = _two_sets(tmp_path, [make_result(startup_s=10.0, graph_memory_bytes=100_000_000)],
                     [make_result(startup_s=12.5, graph_memory_bytes=109_000_000)])
    report = run_gate(b, c)
    by_metric = {r.metric: r for r in report.checks}
    assert all(r.rule == RULE and r.comparison.verdict == "n/a" for r in report.checks)
    startup = by_metric["startup_s"]
    assert startup.status == "inconclusive" and startup.comparison.p_value is None  # +25 % > +20 %
    assert "1 vs 1 processes: no test, no noise estimate" in startup.reason and "cannot judge" in startup.reason
    assert by_metric["graph_memory_bytes"].status == "untestable"  # +9 % <= +10 %
    assert by_metric["output_tokens_per_s"].status == "untestable"
    assert report.passed and report.verdict == "inconclusive" and report.exit_code == 3
    assert any("too few processes for a verdict" in w and "no test and" in w for w in report.warnings)
    md = report.to_markdown()
    assert md.startswith("## ⚠️ graphbench gate: CANNOT JUDGE") and "| ⚠️ inconclusive |" in md
    assert json.loads(json.dumps(report.to_dict()))["verdict"] == "inconclusive"
    # a halved tokens/s on one process a side is no regression either: it cannot be judged
    b, c = write_set(tmp_path / "b1", [make_result(repeats=_samples([2200.0]))]), \
        write_set(tmp_path / "c1", [make_result(repeats=_samples([1000.0]))])
    report = run_gate(b, c)
    assert _tokens(report).status == "inconclusive" and report.exit_code == 3 and not report.regressions
    root = ET.fromstring(report.to_junit())
    cases = root.find("testsuite").findall("testcase")
    assert root.find("testsuite").get("failures") == "0"
    skipped = {tc.get("name") for tc in cases if tc.find("skipped") is not None}
    assert skipped == {r.testcase_name for r in report.checks if r.status in ("untestable", "inconclusive")}
    assert "closed-c4/output_tokens_per_s" in skipped


def test_junit_skipped_count_matches_the_skipped_testcases(tmp_path):
    b = write_set(tmp_path / "b", [make_result(repeats=_samples([2200.0]))])
    c = write_set(tmp_path / "c", [make_result(repeats=_samples([1000.0]))])
    report = run_gate(b, c)
    assert report.inconclusive  # tokens/s: -55% on one process a side
    root = ET.fromstring(report.to_junit())
    suite = root.find("testsuite")
    skipped = sum(tc.find("skipped") is not None for tc in suite.findall("testcase"))
    assert int(suite.get("skipped")) == int(root.get("skipped")) == skipped


def test_fewer_than_min_processes_a_side_cannot_judge(tmp_path):
    """Two processes a side (sweep --rounds 2) have no usable spread: no verdict, and a change beyond the
    threshold is inconclusive; one process against a history of MIN_PROCESSES is judged (prediction test)."""
    few = MIN_PROCESSES - 1
    b, c = _two_sets(tmp_path, _rounds(BASE5[:few]), _rounds([v * 0.8 for v in BASE5[:few]]))
    report = run_gate(b, c)
    tokens = _tokens(report)
    assert tokens.comparison.verdict == "n/a" and tokens.comparison.p_value is None
    assert f"{few} vs {few} processes: no test" in tokens.reason
    assert tokens.status == "inconclusive" and report.exit_code == 3 and not report.regressions
    history = write_set(tmp_path / "history", _rounds(BASE5[:MIN_PROCESSES]))
    one = write_set(tmp_path / "one", [make_result(repeats=_samples([1700.0, 1760.0, 1730.0]))])
    tokens = _tokens(run_gate(history, one))
    assert tokens.comparison.test_method == "prediction t" and tokens.status == "regressed"


def test_the_gate_warns_of_checks_with_too_few_processes(tmp_path):
    few = MIN_PROCESSES - 1
    b, c = _two_sets(tmp_path, _rounds(BASE5[:few]), _rounds(BASE5[:few]))
    report = run_gate(b, c)
    assert all(r.comparison.verdict == "n/a" for r in report.checks if r.metric != "graph_memory_bytes")
    assert any("no test and no noise estimate" in w for w in report.warnings), report.warnings


def test_history_runs_of_a_point_are_pooled_as_processes(tmp_path):
    """A history baseline (several runs of a point, each one process): their processes are pooled."""
    base = [make_result(startup_s=s) for s in (10.0, 10.4, 9.8, 10.1)]
    noisy_cur = [make_result(startup_s=s) for s in (9.0, 14.0, 12.0, 13.5)]  # median +28 %, not significant
    b, c = _two_sets(tmp_path, base, noisy_cur)
    report = run_gate(b, c)
    startup = next(r for r in report.checks if r.metric == "startup_s")
    assert startup.comparison.n_baseline == 4 and startup.comparison.test_method == "Mann-Whitney U"
    assert startup.status == "pass" and report.exit_code == 0
    assert any("point O2-default (graphbench) has 4 runs: their processes are pooled" in w for w in report.warnings)
    slow = write_set(tmp_path / "slow", [make_result(startup_s=s) for s in (13.0, 14.0, 12.5, 13.5)])
    startup = next(r for r in run_gate(b, slow).checks if r.metric == "startup_s")
    assert startup.status == "regressed"


def test_rounds_give_point_metrics_one_sample_per_process(tmp_path):
    b, c = _two_sets(tmp_path, _rounds(BASE5[:3], startup_s=[10.0, 10.1, 9.9]),
                     _rounds(BASE5[:3], startup_s=[13.0, 13.1, 12.9]))
    report = run_gate(b, c)
    startup = next(r for r in report.checks if r.metric == "startup_s")
    assert startup.comparison.baseline_samples == (10.0, 10.1, 9.9)
    assert startup.status == "regressed" and report.exit_code == 1
    assert _tokens(report).status == "pass"


def _on_gpu(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for result in results:
        result["environment"] = dict(result["environment"], device="cuda", gpu="NVIDIA H100 80GB HBM3")
    return results


def test_graph_memory_zero_on_both_sides_passes(tmp_path):
    # on a GPU, where a 0 is measured (cudagraph mode NONE); a CPU's 0 is no measurement (below)
    b, c = _two_sets(tmp_path, _on_gpu(_rounds(BASE5[:3], graph_memory_bytes=0)),
                     _on_gpu(_rounds(BASE5[:3], graph_memory_bytes=0)))
    mem = next(r for r in run_gate(b, c).checks if r.metric == "graph_memory_bytes")
    assert mem.comparison.ratio == 1.0 and mem.comparison.verdict == "tie" and mem.status == "pass"


@pytest.mark.parametrize("something", [1000, 40 * 2**20])
def test_graph_memory_from_nothing_to_something_regresses(tmp_path, something):
    """A 0 is no reading (no graphs), so the page resolution does not make a small first reading a tie."""
    b, c = _two_sets(tmp_path, _rounds(BASE5[:3], graph_memory_bytes=0), _rounds(BASE5[:3], graph_memory_bytes=something))
    report = run_gate(b, c)
    mem = next(r for r in report.checks if r.metric == "graph_memory_bytes")
    assert mem.status == "regressed"  # from nothing to something: +inf %, on 3 processes a side
    assert "inf" in report.to_markdown()


MIB = 2**20


def _graph_memory_check(tmp_path: Path, base_mib: float, cur_mib: float, threshold_pct: float):
    b, c = _two_sets(tmp_path, _rounds(BASE5[:4], graph_memory_bytes=int(base_mib * MIB)),
                     _rounds(BASE5[:4], graph_memory_bytes=int(cur_mib * MIB)))
    return next(r for r in run_gate(b, c, thresholds={"graph_memory_bytes": threshold_pct}).checks
                if r.metric == "graph_memory_bytes")


def test_graph_memory_one_page_apart_is_no_change_even_under_a_tight_threshold(tmp_path):
    """Two sweeps of one commit on an H100 read 254 and 256 MiB, every process of each alike (a range of 0
    a side): the driver maps memory in 2 MiB pages, so a page is the reading's resolution and no change."""
    mem = _graph_memory_check(tmp_path, 254, 256, threshold_pct=0.5)
    assert mem.status == "pass" and mem.comparison.verdict == "tie"
    assert mem.comparison.noise_pct == pytest.approx(100 * NOISE_RANGES * 2 / 254)
    assert "within noise" in mem.comparison.note


def test_graph_memory_across_the_setup_change_is_not_judged(tmp_path):
    """A baseline from before graph_setup_bytes (its cold starts left the capture stream's cuBLAS setup out)
    against one that counts it: +12.6% is a change of measurement, so the check cannot judge (exit 3), and
    the other way round it is no improvement either."""
    old = _rounds(BASE5[:4], graph_memory_bytes=254 * MIB)
    new = _rounds(BASE5[:4], graph_memory_bytes=286 * MIB, graph_setup_bytes=32 * MIB)
    report = run_gate(*_two_sets(tmp_path / "forward", old, new))
    mem = next(r for r in report.checks if r.metric == "graph_memory_bytes")
    assert mem.comparison.verdict == "n/a" and mem.status == "inconclusive" and report.exit_code == 3
    assert "measured two ways: the baseline results hold starts from before 2026-12-06" in mem.reason
    older_warm = _rounds(BASE5[:4], graph_memory_bytes=350 * MIB)
    back = next(r for r in run_gate(*_two_sets(tmp_path / "back", older_warm, new)).checks
                if r.metric == "graph_memory_bytes")
    assert back.comparison.verdict == "n/a" and back.status == "untestable"
    # both sides counted alike (one of them a history holding both kinds is not): judged as before
    alike = next(r for r in run_gate(*_two_sets(tmp_path / "alike", new, _rounds(
        BASE5[:4], graph_memory_bytes=320 * MIB, graph_setup_bytes=32 * MIB))).checks if r.metric == "graph_memory_bytes")
    assert alike.status == "regressed"
    mixed = next(r for r in run_gate(*_two_sets(tmp_path / "mixed", new, new[:2] + old[2:])).checks
                 if r.metric == "graph_memory_bytes")
    assert mixed.comparison.verdict == "n/a" and "the current results hold starts" in mixed.reason
    assert not any("too few processes" in w for w in report.warnings)  # 4 a side: the n/a is the measurement's


def test_graph_memory_grown_by_pages_beyond_the_resolution_regresses(tmp_path):
    mem = _graph_memory_check(tmp_path, 254, 262, threshold_pct=0.5)  # 4 pages: +3.1% against a 1.6% floor
    assert mem.status == "regressed" and mem.comparison.verdict == "regressed"


# ------------------------------------------------------------------ unusable input


def test_no_results_loaded(tmp_path):
    (tmp_path / "empty").mkdir()
    b = write_set(tmp_path / "baseline", [make_result()])
    with pytest.raises(GraphbenchError, match="no current results loaded"):
        run_gate(b, tmp_path / "empty")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "x.json").write_text("{not json")
    with pytest.raises(GraphbenchError, match="malformed"):
        run_gate(b, tmp_path / "junk")
    with pytest.raises(GraphbenchError, match="no such result file"):
        run_gate(b, tmp_path / "missing")


def test_malformed_file_is_skipped_with_a_warning(tmp_path):
    b, c = _two_sets(tmp_path, [make_result()], [make_result()])
    (c / "broken.json").write_text('{"kind": "graphbench-result", "schema_version": 99}')
    (c / "report").mkdir()
    (c / "report" / "summary.json").write_text('{"rows": []}')
    report = run_gate(b, c)
    assert report.passed and any("malformed" in w and "broken.json" in w for w in report.warnings)
    assert any("ignored 1 JSON file(s) that are not graphbench results" in w for w in report.warnings)


def test_metric_missing_on_one_side(tmp_path):
    b, c = _two_sets(tmp_path, [make_result()], [make_result(startup_s=None)])
    with pytest.raises(GraphbenchError, match="startup_s is missing in the current results"):
        run_gate(b, c)
    cur = make_result()
    for w in cur["workloads"]:
        for r in w["repeats"]:
            del r["tpot_ms"]
    c2 = write_set(tmp_path / "c2", [cur])
    with pytest.raises(GraphbenchError, match="tpot_p99_ms is missing in the current"):
        run_gate(b, c2)
    # not gated: fine
    assert run_gate(b, c2, {"output_tokens_per_s": -5}).passed


def test_metric_missing_on_both_sides_is_a_warning_unless_a_default(tmp_path):
    b, c = _two_sets(tmp_path, [make_result(graph_memory_bytes=None)], [make_result(graph_memory_bytes=None)])
    # a default threshold's metric absent on both sides (graph memory, full_step_ms on the CPU): not news
    report = run_gate(b, c)
    assert report.passed and not any("is in neither" in w for w in report.warnings)
    assert "graph_memory_bytes" not in {r.metric for r in report.checks}
    # a threshold the user gave: said so
    report = run_gate(b, c, {"tokens_per_s": -3, "graph_memory": 15})
    assert report.passed and any("graph_memory_bytes is in neither" in w for w in report.warnings)


def test_failed_point_is_unusable(tmp_path):
    b, c = _two_sets(tmp_path, [make_result("O2-default"), make_result("O3-default")],
                     [make_result("O2-default"), make_result("O3-default", status="failed")])
    with pytest.raises(GraphbenchError, match="failed benchmark point: current: O3-default .*timed out"):
        run_gate(b, c)


def test_config_hash_or_model_mismatch(tmp_path):
    b, c = _two_sets(tmp_path, [make_result(config_hash="aaaa")], [make_result(config_hash="bbbb")])
    with pytest.raises(GraphbenchError, match="config hash differs: baseline aaaa vs current bbbb.*allow-mismatch"):
        run_gate(b, c)
    report = run_gate(b, c, allow_mismatch=True)
    assert report.passed and any("mismatch allowed" in w for w in report.warnings)
    m = write_set(tmp_path / "m", [make_result(model="llama-3.2-1b")])
    with pytest.raises(GraphbenchError, match="model differs"):
        run_gate(b, m)


def test_differing_debug_hatches_are_a_warning_for_graphbench_points_only(tmp_path):
    old = make_result()  # recorded before results carried the hatches
    unchanged = make_result()
    unchanged["environment"]["switches"] = {}
    flipped = make_result()
    flipped["environment"]["switches"] = {"GRAPHBENCH_PDL": "0", "GRAPHBENCH_DIRECT_LAUNCH": "0"}
    b, c = _two_sets(tmp_path, [old], [unchanged])
    assert not any("hatches" in w for w in run_gate(b, c).warnings)
    f = write_set(tmp_path / "f", [flipped])
    text = "\n".join(run_gate(b, f).warnings)
    assert ("debug hatches differ: baseline none vs current "
            "GRAPHBENCH_DIRECT_LAUNCH=0 GRAPHBENCH_PDL=0") in text
    peer_b, peer_c = make_result("hf-eager", system="hf-eager"), make_result("hf-eager", system="hf-eager")
    peer_c["environment"]["switches"] = {"GRAPHBENCH_PDL": "0"}  # not the peers' business
    pb, pc = write_set(tmp_path / "pb", [peer_b, old]), write_set(tmp_path / "pc", [peer_c, unchanged])
    report = run_gate(pb, pc)
    assert not any("hatches" in w for w in report.warnings)
    # peers are references (one process each, in a sweep's first round): compared, not gated
    assert {c.comparison.system for c in report.checks} == {"graphbench"}
    assert "1 peer point(s) not gated (references, one process each): hf-eager (hf-eager)" in report.warnings
    assert not any("hatches" in w for w in compare_sets(load_results([pb]), load_results([pc])).warnings)
    only_peers = write_set(tmp_path / "peers-only", [peer_b])
    with pytest.raises(GraphbenchError, match="nothing to gate"):
        run_gate(only_peers, only_peers)


def test_no_common_point(tmp_path):
    b, c = _two_sets(tmp_path, [make_result("O2-default")], [make_result("O1-default")])
    with pytest.raises(GraphbenchError, match="no benchmark point"):
        run_gate(b, c)


def test_a_vanished_point_is_unusable_input_unless_allowed(tmp_path):
    """A point that disappeared (not run, or its result file skipped as malformed) must not let CI pass."""
    b, c = _two_sets(tmp_path, [make_result("O2-default"), make_result("O1-default")],
                     [make_result("O2-default", repeats={"closed-c4": [(2200.0, 12.0)] * 5}), make_result("O3-new")])
    with pytest.raises(GraphbenchError) as caught:
        run_gate(b, c)
    assert str(caught.value) == ("point O1-default (graphbench) (and 1 more) is in the baseline but not in the current "
                                 "results (not run, or its file was skipped as malformed); pass --allow-missing to gate "
                                 "the others")
    report = run_gate(b, c, allow_missing=True)
    text = "\n".join(report.warnings)
    assert "O1-default (graphbench) is only in the baseline" in text
    assert "O3-new (graphbench) is only in the current results" in text  # a new point: reported, not gated
    assert "workload closed-c1 is only in the baseline" in text
    only_new = write_set(tmp_path / "c2", [make_result("O2-default"), make_result("O1-default"), make_result("O3-new")])
    assert run_gate(b, only_new).passed
    # a workload that vanished from a point that is still there counts the same
    fewer = write_set(tmp_path / "c3", [make_result("O2-default", repeats={"closed-c4": [(2200.0, 12.0)] * 5}),
                                        make_result("O1-default")])
    with pytest.raises(GraphbenchError, match=r"^workload O2-default \(graphbench\): closed-c1 is in the baseline but"):
        run_gate(b, fewer)


def test_thresholds_validation():
    assert normalize_thresholds({"tokens_per_s": -5, "tpot_p99": 10}) == {
        "output_tokens_per_s": -5.0, "tpot_p99_ms": 10.0}
    with pytest.raises(GraphbenchError, match="must be <= 0"):
        normalize_thresholds({"output_tokens_per_s": 5})
    with pytest.raises(GraphbenchError, match="must be >= 0"):
        normalize_thresholds({"startup_s": -20})
    with pytest.raises(GraphbenchError, match="did you mean 'output_tokens_per_s'"):
        parse_threshold("output_tokens_per_sec:-5")
    with pytest.raises(GraphbenchError, match="METRIC:PCT"):
        parse_threshold("tokens_per_s")
    with pytest.raises(GraphbenchError, match="not a percentage"):
        parse_threshold("tokens_per_s:abc")
    assert parse_threshold("tokens_per_s:-5%") == ("output_tokens_per_s", -5.0)
    assert parse_threshold("startup:off") == ("startup_s", None)
    t = thresholds_from_specs(["startup:off", "ttft_p99_ms:15", "tokens_per_s:-3"])
    assert t == {"output_tokens_per_s": -3.0, "tpot_p99_ms": 10.0, "graph_memory_bytes": 10.0, "full_step_ms": 3.0,
                 "ttft_p99_ms": 15.0}
    assert DEFAULT_THRESHOLDS["full_step_ms"] == 3.0 and resolve_metric("graph_step").name == "full_step_ms"
    assert resolve_metric("TPOT_P99_MS").name == "tpot_p99_ms"


def test_bad_alpha_and_empty_thresholds(tmp_path):
    b, c = _two_sets(tmp_path, [make_result()], [make_result()])
    with pytest.raises(GraphbenchError, match="alpha"):
        run_gate(b, c, alpha=1.5)
    with pytest.raises(GraphbenchError, match="no metric to gate"):
        run_gate(b, c, {})


def test_non_numeric_metric_value_names_the_file(tmp_path):
    cur = make_result()
    cur["workloads"][0]["repeats"][0]["output_tokens_per_s"] = "fast"
    b, c = _two_sets(tmp_path, [make_result()], [cur])
    with pytest.raises(GraphbenchError, match=r"0001_O2-default\.json.*not a number"):
        run_gate(b, c)


# ------------------------------------------------------------------ reports


def test_markdown_and_junit(tmp_path):
    rng = random.Random(5)
    b, c = _two_sets(tmp_path, noisy_set(rng, 0.01), noisy_set(rng, 0.01, tokens_factor=0.9))
    report = run_gate(b, c)
    md = report.to_markdown()
    first = md.splitlines()[0]
    assert first.startswith("## ❌ graphbench gate: FAIL: 4 regressions")
    table = [line for line in md.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + len(report.checks)  # header + one row per check
    assert table[0].split("|")[1:-1] == [f" {col} " for col in (
        "status", "point", "workload", "metric", "baseline", "current", "change", "noise", "p", "processes",
        "threshold", "why")]
    assert all("| 5/5 |" in row for row in table[1:])  # 5 processes a side
    assert "### Regressions" in md and md.index("### Regressions") < md.index("| status")
    root = ET.fromstring(report.to_junit())
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == len(report.checks) == int(suite.get("tests"))
    failed = [tc for tc in cases if tc.find("failure") is not None]
    assert len(failed) == 4 == int(suite.get("failures"))
    assert {tc.get("name") for tc in failed} == {f"{w}/output_tokens_per_s" for w in WORKLOADS}
    data = json.loads(json.dumps(report.to_dict()))
    assert data["verdict"] == "fail" and data["counts"]["regressed"] == 4
    assert all(c["rule"] == RULE and c["n_baseline"] == c["n_current"] == 5 for c in data["checks"])
    # a noise floor on every check but O0's graph memory (0 bytes in every process: no spread in %)
    assert {(c["label"], c["metric"]) for c in data["checks"] if c["noise_pct"] is None} == {
        ("O0-default", "graph_memory_bytes")}
    ok = run_gate(b, b)
    assert ok.exit_code == 0 and ok.to_markdown().startswith("## ✅ graphbench gate: PASS")
    assert ET.fromstring(ok.to_junit()).find("testsuite").get("failures") == "0"


# ------------------------------------------------------------------ compare_results


def test_compare_results_values_and_verdicts(tmp_path):
    tpots = [12.0 + i * 0.01 for i in range(5)]
    b, c = _two_sets(tmp_path, _rounds(BASE5, tpots, startup_s=10.0),
                     _rounds([v * 0.9 for v in BASE5], tpots, startup_s=11.0))
    comps = compare_results(load_results([b]), load_results([c]))
    by = {(c.metric, c.workload): c for c in comps}
    tok = by[("output_tokens_per_s", "closed-c4")]
    assert tok.baseline_samples == tuple(BASE5) and tok.n_current == 5  # one sample per process
    assert tok.baseline_median == 2200.0 and tok.current_median == pytest.approx(1980.0)
    assert tok.ratio == pytest.approx(0.9) and tok.change_pct == pytest.approx(-10.0)
    assert tok.p_value == pytest.approx(2 / 252) and tok.test_method == "Mann-Whitney U"
    assert tok.noise_pct == pytest.approx(NOISE_RANGES * 20 / 2200 * 100)
    assert tok.significant and tok.verdict == "regressed" and f"vs noise {tok.noise_pct:.1f}%" in tok.note
    tpot = by[("tpot_p99_ms", "closed-c4")]
    assert tpot.p_value == pytest.approx(1.0) and tpot.verdict == "tie" and not tpot.significant
    assert tpot.note.startswith("not significant") or tpot.note.startswith("within noise")
    # +10 % startup on 5 processes a side, significant but below startup_s' minimum effect (its gate threshold)
    startup = by[("startup_s", None)]
    assert startup.change_pct == pytest.approx(10.0) and startup.significant and startup.verdict == "tie"
    assert "below the 20% minimum effect" in startup.note
    # duration is lower-is-better: a 10 % slower run takes longer -> regressed
    assert by[("duration_s", "closed-c4")].verdict == "regressed"
    # every catalogue metric present in the fixture is compared
    assert {c.metric for c in comps} >= {"output_tokens_per_s", "total_tokens_per_s", "ttft_p99_ms",
                                         "step_p50_ms", "startup_s", "capture_s", "graph_memory_bytes"}
    assert {c.verdict for c in comps} <= {"improved", "regressed", "tie", "n/a"}
    # min_effects: a 10 % drop is below a 12 % minimum effect
    strict = compare_sets(load_results([b]), load_results([c]), metrics=["tokens_per_s"],
                          min_effects={"output_tokens_per_s": 12.0})
    assert [(x.verdict, "below the 12% minimum effect" in x.note) for x in strict.comparisons] == [("tie", True)]
    # one process a side: n/a, with the reason
    single = compare_results([make_result(startup_s=10.0)], [make_result(startup_s=11.0)])
    startup = next(x for x in single if x.metric == "startup_s")
    assert startup.change_pct == pytest.approx(10.0) and startup.p_value is None and startup.verdict == "n/a"
    assert startup.significant is None and "1 vs 1 processes: no test, no noise estimate" in startup.note


def test_compare_results_options(tmp_path):
    base = write_set(tmp_path / "b", make_rounds(rounds=[{w: [(2200.0, 12.0)] * 2 for w in WORKLOADS}] * 3))
    cur = write_set(tmp_path / "c", make_rounds(rounds=[{w: [(2300.0, 12.0)] * 2 for w in WORKLOADS}] * 3))
    comps = compare_results(load_results([base]), load_results([cur]), metrics=["tokens_per_s"], bootstrap=200,
                            seed=1)
    assert {c.metric for c in comps} == {"output_tokens_per_s"} and len(comps) == 2
    assert all(c.ratio_ci == pytest.approx((2300 / 2200, 2300 / 2200)) for c in comps)
    # one process a side: no samples to resample
    single = compare_results([make_result()], [make_result()], metrics=["tokens_per_s"], bootstrap=200)
    assert all(c.ratio_ci is None for c in single)
    missing = make_result(repeats={w: [(2300.0, 12.0)] * 5 for w in WORKLOADS})
    for w in missing["workloads"]:
        for r in w["repeats"]:
            del r["ttft_ms"]
    one_sided = [c for c in compare_results([make_result()], [missing]) if c.metric == "ttft_p99_ms"]
    assert one_sided and all(c.verdict == "n/a" and "no sample in the current" in c.note for c in one_sided)
    failed = compare_sets([make_result(), make_result("O3", status="failed")], [make_result()])
    assert any(w.startswith("skipped baseline: O3 (graphbench) failed") for w in failed.warnings)
    with pytest.raises(GraphbenchError, match="unknown metric"):
        compare_results([make_result()], [make_result()], metrics=["tokens_per_sec_x"])


# ------------------------------------------------------------------ no torch


def test_reports_and_cli_do_not_import_torch_or_scipy():
    # scipy (about 1 s to import) loads only when a difference is tested
    code = ("import sys; import graphbench.reports.gate, graphbench.reports.compare, graphbench.reports.stats, "
            "graphbench.reports.metric_catalogue, graphbench.cli.main, graphbench.cli.compare_gate; "
            "bad = [m for m in ('torch', 'numpy', 'scipy') if m in sys.modules]; "
            "print(bad); sys.exit(1 if {'torch', 'scipy'} & set(bad) else 0)")
    src = str(Path(__file__).resolve().parents[1] / "src")
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                          env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_re_runs_of_a_point_are_pooled_and_said_to_be():
    from graphbench.reports.compare import compare_sets

    twice = [make_result("O2-default"), make_result("O2-default")]
    result = compare_sets(twice, [make_result("O2-default")])
    assert "baseline: point O2-default (graphbench) has 2 runs: their processes are pooled (a history)" \
        in result.warnings
    by = {(c.metric, c.workload): c for c in result.comparisons}
    assert by[("output_tokens_per_s", "closed-c4")].n_baseline == 2  # one process per run
    assert not any(w.startswith("current: point") for w in result.warnings)


def test_a_workload_run_with_other_settings_is_a_mismatch_not_a_regression(tmp_path):
    # a workload's name says its kind and concurrency, not its prompts: a run at 1000-token prompts against one at
    # 64 measures other traffic, and the gate (as compare) refuses it like a config-hash difference
    longer = _rounds([v * 0.2 for v in BASE5])
    for result in longer:
        for workload in result["workloads"]:
            workload["prompt_len"] = {"dist": "uniform", "a": 900.0, "b": 1100.0, "sigma": None}
    b, c = _two_sets(tmp_path, _rounds(BASE5), longer)
    with pytest.raises(GraphbenchError, match=r"workload closed-c4 was run with other settings: prompt_len baseline "
                                              r"64 vs current uniform:900-1100; pass --allow-mismatch"):
        run_gate(b, c)
    allowed = run_gate(b, c, allow_mismatch=True)
    assert any("mismatch allowed" in w and "prompt_len" in w for w in allowed.warnings)
    # settings an older result does not record are not compared
    older = _rounds(BASE5)
    for result in older:
        for workload in result["workloads"]:
            del workload["prompt_len"]
    assert run_gate(write_set(tmp_path / "older", older), b).exit_code == 0


def test_a_folder_against_itself_is_said_to_be_the_same_files(tmp_path):
    b = write_set(tmp_path / "one", _rounds(BASE5))
    report = run_gate(b, b)
    assert report.exit_code == 0 and "the same result files" in report.warnings[0]
    c = write_set(tmp_path / "two", _rounds(BASE5))  # the same numbers in other files: an A/A, no such line
    assert not any("the same result files" in w for w in run_gate(b, c).warnings)


def test_graph_memory_and_capture_on_a_cpu_are_not_measured_not_a_tie(tmp_path):
    # a CPU records no graph: its 0 bytes and 0 s on both sides were counted as ties and as the gate's passes
    def on_cpu(results):
        for result in results:
            result["environment"] = {"device": "cpu"}
            result["startup"].update(capture_s=0.0, graph_memory_bytes=0)
        return results

    b, c = _two_sets(tmp_path, on_cpu(_rounds(BASE5)), on_cpu(_rounds(BASE5)))
    report = run_gate(b, c)
    memory = next(r for r in report.checks if r.metric == "graph_memory_bytes")
    assert memory.status == "untestable" and memory.reason == "not measured: a CPU records no CUDA graph"
    assert report.exit_code == 0
    capture = next(x for x in compare_results(load_results([b]).results, load_results([c]).results)
                   if x.metric == "capture_s")
    assert capture.verdict == "n/a"
    # on a GPU, 0 on both sides (cudagraph mode NONE) is a measured 0
    b, c = _two_sets(tmp_path / "gpu", _on_gpu(_rounds(BASE5, graph_memory_bytes=0)),
                     _on_gpu(_rounds(BASE5, graph_memory_bytes=0)))
    assert next(r for r in run_gate(b, c).checks if r.metric == "graph_memory_bytes").status == "pass"
