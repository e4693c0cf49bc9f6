"""compare_results and run_gate on schema-conforming result files written with store.write_result.

The acceptance trials: two result sets of the same code (1-2 % noise, 5 repeats) pass the gate in
20 of 20 seeded trials; with a 10 % tokens/s drop injected they fail in 20 of 20.
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
    RULE_TEST,
    RULE_THRESHOLD_ONLY,
    normalize_thresholds,
    parse_threshold,
    repeats_needed,
    run_gate,
    thresholds_from_specs,
)
from graphbench.reports.metrics import resolve_metric
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
    status: str = "ok",
) -> dict[str, Any]:
    """A result dict; repeats maps workload name -> [(tokens/s, tpot p99 ms), ...]."""
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


def write_set(directory: Path, results: Sequence[dict[str, Any]]) -> Path:
    for r in results:
        write_result(directory, MACHINE, r["label"], r)
    return directory


def noisy_set(rng: random.Random, rel_noise: float, n_repeats: int = 5, tokens_factor: float = 1.0,
              tpot_factor: float = 1.0, startup_factor: float = 1.0) -> list[dict[str, Any]]:
    """Both points, both workloads, n_repeats repeats with relative Gaussian noise."""
    def jitter(x: float) -> float:
        return x * (1.0 + rng.gauss(0.0, rel_noise))

    results = []
    for i, label in enumerate(POINTS):
        repeats = {}
        for j, w in enumerate(WORKLOADS):
            tokens, tpot = 1000.0 * (1 + i) * (1 + j), 20.0 / (1 + i)
            repeats[w] = [(jitter(tokens) * tokens_factor, jitter(tpot) * tpot_factor) for _ in range(n_repeats)]
        results.append(make_result(label, repeats=repeats, startup_s=jitter(2.0 + 10 * i) * startup_factor,
                                   graph_memory_bytes=0 if i == 0 else 329_000_000, config_hash=f"hash{i}"))
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
        passes += report.passed and report.exit_code == 0
    assert passes == 20


def test_10pct_tokens_drop_fails_in_20_of_20_trials(tmp_path):
    fails = 0
    for trial in range(20):
        rng = random.Random(2000 + trial)
        rel = 0.01 + 0.01 * rng.random()
        base = write_set(tmp_path / f"t{trial}" / "baseline", noisy_set(rng, rel))
        cur = write_set(tmp_path / f"t{trial}" / "current", noisy_set(rng, rel, tokens_factor=0.9))
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
    return {"closed-c4": [(v, tpot) for v in values]}


BASE5 = [2200.0, 2210.0, 2190.0, 2205.0, 2195.0]


def test_three_repeats_are_gated_by_the_threshold_alone_and_the_report_warns(tmp_path):
    b, c = _two_sets(tmp_path, [make_result(repeats=_samples(BASE5[:3]))],
                     [make_result(repeats=_samples([v * 0.8 for v in BASE5[:3]]))])
    report = run_gate(b, c)
    tokens = next(r for r in report.checks if r.metric == "output_tokens_per_s")
    assert tokens.comparison.p_value == pytest.approx(0.1)
    assert tokens.rule == RULE_THRESHOLD_ONLY and tokens.status == "regressed"
    assert "threshold only: 3 vs 3 repeats, which cannot reach p < 0.05" in tokens.reason
    assert not report.passed and report.exit_code == 1
    assert any("too few repeats" in w and "threshold alone" in w and ">= 4 repeats" in w for w in report.warnings)
    assert "too few repeats" in report.to_markdown()
    assert repeats_needed(0.05) == 4 and repeats_needed(0.01) == 5
    # within the threshold: a pass, threshold-only too
    close = write_set(tmp_path / "close", [make_result(repeats=_samples([v * 0.97 for v in BASE5[:3]]))])
    tokens = next(r for r in run_gate(b, close).checks if r.metric == "output_tokens_per_s")
    assert (tokens.rule, tokens.status) == (RULE_THRESHOLD_ONLY, "pass")
    # --require-significance: the old rule, which three repeats can never fail
    strict = run_gate(b, c, require_significance=True)
    tokens = next(r for r in strict.checks if r.metric == "output_tokens_per_s")
    assert tokens.rule == RULE_TEST and tokens.status == "pass" and "not significant" in tokens.reason
    assert strict.passed and any("can never be flagged" in w for w in strict.warnings)


def test_four_repeats_are_enough(tmp_path):
    b, c = _two_sets(tmp_path, [make_result(repeats=_samples(BASE5[:4]))],
                     [make_result(repeats=_samples([v * 0.9 for v in BASE5[:4]]))])
    report = run_gate(b, c)
    assert [r.metric for r in report.regressions] == ["output_tokens_per_s"]
    assert not any("too few repeats" in w for w in report.warnings)


def test_beyond_threshold_but_not_significant_passes(tmp_path):
    noisy = [2200.0, 1500.0, 2900.0, 2100.0, 2300.0]
    b, c = _two_sets(tmp_path, [make_result(repeats=_samples(noisy))],
                     [make_result(repeats=_samples([1900.0, 2850.0, 1450.0, 2050.0, 2250.0]))])
    report = run_gate(b, c)
    tokens = next(r for r in report.checks if r.metric == "output_tokens_per_s")
    assert tokens.comparison.change_pct < -5 and tokens.comparison.p_value >= 0.05
    assert tokens.status == "pass" and report.passed


def test_significant_but_within_threshold_passes(tmp_path):
    b, c = _two_sets(tmp_path, [make_result(repeats=_samples(BASE5))],
                     [make_result(repeats=_samples([v * 0.97 for v in BASE5]))])
    report = run_gate(b, c)
    tokens = next(r for r in report.checks if r.metric == "output_tokens_per_s")
    assert tokens.comparison.significant and tokens.comparison.change_pct == pytest.approx(-3.0)
    assert tokens.status == "pass" and report.passed
    # ... and a tighter threshold makes it a regression
    assert not run_gate(b, c, {"tokens_per_s": -2}).passed


def test_improvement_is_reported_not_failed(tmp_path):
    b, c = _two_sets(tmp_path, [make_result(repeats=_samples(BASE5, tpot=12.0))],
                     [make_result(repeats={"closed-c4": [(v * 1.2, t) for v, t in
                                                         zip(BASE5, [9.0, 9.1, 8.9, 9.05, 8.95])]})])
    report = run_gate(b, c)
    status = {r.metric: r.status for r in report.checks}
    assert status["output_tokens_per_s"] == "improved" and status["tpot_p99_ms"] == "improved"
    assert report.passed


def test_single_sample_metrics_are_threshold_only(tmp_path):
    b, c = _two_sets(tmp_path, [make_result(startup_s=10.0, graph_memory_bytes=100_000_000)],
                     [make_result(startup_s=12.5, graph_memory_bytes=109_000_000)])
    report = run_gate(b, c)
    by_metric = {r.metric: r for r in report.checks}
    assert by_metric["startup_s"].rule == RULE_THRESHOLD_ONLY
    assert by_metric["startup_s"].status == "regressed"  # +25 % > +20 %, no significance test possible
    assert by_metric["startup_s"].comparison.p_value is None
    assert by_metric["graph_memory_bytes"].status == "pass"  # +9 % <= +10 %
    assert by_metric["output_tokens_per_s"].rule == RULE_TEST
    assert report.exit_code == 1
    assert "threshold-only" in report.to_markdown()


def test_pooled_reruns_give_point_metrics_the_significance_rule(tmp_path):
    base = [make_result(startup_s=s) for s in (10.0, 10.4, 9.8, 10.1)]
    noisy_cur = [make_result(startup_s=s) for s in (9.0, 14.0, 12.0, 13.5)]  # median +28 %, not significant
    b, c = _two_sets(tmp_path, base, noisy_cur)
    startup = next(r for r in run_gate(b, c).checks if r.metric == "startup_s")
    assert startup.rule == RULE_TEST and startup.comparison.n_baseline == 4
    assert startup.status == "pass"
    slow = write_set(tmp_path / "slow", [make_result(startup_s=s) for s in (13.0, 14.0, 12.5, 13.5)])
    startup = next(r for r in run_gate(b, slow).checks if r.metric == "startup_s")
    assert startup.rule == RULE_TEST and startup.status == "regressed"


def test_single_repeat_is_untestable_with_a_warning(tmp_path):
    b, c = _two_sets(tmp_path, [make_result(repeats=_samples([2200.0]))],
                     [make_result(repeats=_samples([1000.0]))])
    by_default = next(r for r in run_gate(b, c).checks if r.metric == "output_tokens_per_s")
    assert (by_default.rule, by_default.status) == (RULE_THRESHOLD_ONLY, "regressed")
    report = run_gate(b, c, require_significance=True)
    tokens = next(r for r in report.checks if r.metric == "output_tokens_per_s")
    assert tokens.status == "untestable" and report.passed
    assert any("untestable" in w for w in report.warnings)
    root = ET.fromstring(report.to_junit())
    assert root.find("testsuite").get("skipped") == "2"  # tokens/s and TPOT p99


def test_graph_memory_zero_on_both_sides_passes(tmp_path):
    b, c = _two_sets(tmp_path, [make_result(graph_memory_bytes=0)], [make_result(graph_memory_bytes=0)])
    mem = next(r for r in run_gate(b, c).checks if r.metric == "graph_memory_bytes")
    assert mem.comparison.ratio == 1.0 and mem.status == "pass"
    c2 = write_set(tmp_path / "c2", [make_result(graph_memory_bytes=1000)])
    mem = next(r for r in run_gate(b, c2).checks if r.metric == "graph_memory_bytes")
    assert mem.status == "regressed"  # from nothing to something: +inf %
    assert "inf" in run_gate(b, c2).to_markdown()


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


def test_metric_missing_on_both_sides_is_a_warning(tmp_path):
    b, c = _two_sets(tmp_path, [make_result(graph_memory_bytes=None)], [make_result(graph_memory_bytes=None)])
    report = run_gate(b, c)
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


def test_differing_switches_are_a_warning_for_graphbench_points_only(tmp_path):
    old = make_result()  # recorded before results carried switches
    unchanged = make_result()
    unchanged["environment"]["switches"] = {}
    flipped = make_result()
    flipped["environment"]["switches"] = {"GRAPHBENCH_PDL": "0", "GRAPHBENCH_AUTOTUNE_PRECOMPILE": "pool"}
    b, c = _two_sets(tmp_path, [old], [unchanged])
    assert not any("switches" in w for w in run_gate(b, c).warnings)
    f = write_set(tmp_path / "f", [flipped])
    text = "\n".join(run_gate(b, f).warnings)
    assert ("environment switches differs: baseline none vs current "
            "GRAPHBENCH_AUTOTUNE_PRECOMPILE=pool GRAPHBENCH_PDL=0") in text
    peer_b, peer_c = make_result("hf-eager", system="hf-eager"), make_result("hf-eager", system="hf-eager")
    peer_c["environment"]["switches"] = {"GRAPHBENCH_PDL": "0"}  # not the peers' business
    pb, pc = write_set(tmp_path / "pb", [peer_b]), write_set(tmp_path / "pc", [peer_c])
    assert not any("switches" in w for w in run_gate(pb, pc).warnings)


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
    assert t == {"output_tokens_per_s": -3.0, "tpot_p99_ms": 10.0, "graph_memory_bytes": 10.0, "ttft_p99_ms": 15.0}
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
    assert "### Regressions" in md and md.index("### Regressions") < md.index("| status")
    root = ET.fromstring(report.to_junit())
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == len(report.checks) == int(suite.get("tests"))
    failed = [tc for tc in cases if tc.find("failure") is not None]
    assert len(failed) == 4 == int(suite.get("failures"))
    assert {tc.get("name") for tc in failed} == {f"{w}/output_tokens_per_s" for w in WORKLOADS}
    assert json.loads(json.dumps(report.to_dict()))["verdict"] == "fail"
    ok = run_gate(b, b)
    assert ok.to_markdown().startswith("## ✅ graphbench gate: PASS")
    assert ET.fromstring(ok.to_junit()).find("testsuite").get("failures") == "0"


# ------------------------------------------------------------------ compare_results


def test_compare_results_values_and_verdicts(tmp_path):
    base = make_result(repeats={"closed-c4": [(v, 12.0 + i * 0.01) for i, v in enumerate(BASE5)]}, startup_s=10.0)
    cur = make_result(repeats={"closed-c4": [(v * 0.9, 12.0 + i * 0.01) for i, v in enumerate(BASE5)]},
                      startup_s=11.0)
    comps = compare_results([base], [cur])
    by = {(c.metric, c.workload): c for c in comps}
    tok = by[("output_tokens_per_s", "closed-c4")]
    assert tok.baseline_median == 2200.0 and tok.current_median == pytest.approx(1980.0)
    assert tok.ratio == pytest.approx(0.9) and tok.change_pct == pytest.approx(-10.0)
    assert tok.p_value == pytest.approx(2 / 252) and tok.test_method == "exact"
    assert tok.significant and tok.verdict == "regressed"
    tpot = by[("tpot_p99_ms", "closed-c4")]
    assert tpot.p_value == pytest.approx(1.0) and tpot.verdict == "unchanged" and not tpot.significant
    startup = by[("startup_s", None)]
    assert startup.change_pct == pytest.approx(10.0) and startup.p_value is None and startup.verdict == "n/a"
    assert startup.significant is None and "not testable" in startup.note
    # duration is lower-is-better: a 10 % slower run takes longer -> regressed
    assert by[("duration_s", "closed-c4")].verdict == "regressed"
    # every catalogue metric present in the fixture is compared
    assert {c.metric for c in comps} >= {"output_tokens_per_s", "total_tokens_per_s", "ttft_p99_ms",
                                         "step_p50_ms", "startup_s", "capture_s", "graph_memory_bytes"}


def test_compare_results_options(tmp_path):
    base, cur = make_result(), make_result(repeats={w: [(2300.0, 12.0)] * 5 for w in WORKLOADS})
    comps = compare_results(load_results([write_set(tmp_path / "b", [base])]), [cur],
                            metrics=["tokens_per_s"], bootstrap=200, seed=1)
    assert {c.metric for c in comps} == {"output_tokens_per_s"}
    assert all(c.ratio_ci == pytest.approx((2300 / 2200, 2300 / 2200)) for c in comps)
    missing = copy.deepcopy(cur)
    for w in missing["workloads"]:
        for r in w["repeats"]:
            del r["ttft_ms"]
    one_sided = [c for c in compare_results([base], [missing]) if c.metric == "ttft_p99_ms"]
    assert one_sided and all(c.verdict == "n/a" and "missing in the current" in c.note for c in one_sided)
    failed = compare_sets([base, make_result("O3", status="failed")], [cur])
    assert any(w.startswith("skipped baseline: O3 (graphbench) failed") for w in failed.warnings)
    with pytest.raises(GraphbenchError, match="unknown metric"):
        compare_results([base], [cur], metrics=["tokens_per_sec_x"])


# ------------------------------------------------------------------ no torch


def test_reports_and_cli_do_not_import_torch_or_scipy():
    # scipy (about 1 s to import) loads only when a difference is tested
    code = ("import sys; import graphbench.reports.gate, graphbench.reports.compare, graphbench.reports.stats, "
            "graphbench.reports.metrics, graphbench.cli.main, graphbench.cli.compare_gate; "
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
    assert "baseline: point O2-default (graphbench) has 2 results: their repeats are pooled" in result.warnings
    assert not any(w.startswith("current: point") for w in result.warnings)
