"""The process as the unit of replication: a sweep point's round files merged into one record
(reports/rounds.py), a slow first round left out, the verdict over processes (reports/verdict.py), and
compare and gate calling the same rows end to end on result files written with store.write_result."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from graphbench.reports.aa import aa_check
from graphbench.reports.compare import compare_sets
from graphbench.reports.gate import DEFAULT_THRESHOLDS, run_gate
from graphbench.reports.rounds import busy_rounds, merge_rounds, process_medians, workload_samples
from graphbench.reports.store import load_results
from graphbench.reports.verdict import (
    MANN_WHITNEY,
    NA,
    NOISE_RANGES,
    PREDICTION,
    REGRESSED,
    TIE,
    WELCH,
    judge,
    noise_floor,
)
from tests.test_gate import make_result, with_round, write_set

WORKLOADS = ("closed-c1", "closed-c4")
POINTS = ("O1-default", "O2-default")


def round_files(label: str, per_round: list[list[float]], sweep_id: str = "s1", workload: str = "closed-c4",
                tpot: float = 12.0) -> list[dict]:
    """One point's round files: round i's repeats have the tokens/s per_round[i]."""
    return [with_round(make_result(label, repeats={workload: [(v, tpot) for v in values]}), i, len(per_round),
                       sweep_id) for i, values in enumerate(per_round, 1)]


# ------------------------------------------------------------------ (a) merging a point's rounds


def test_three_round_files_merge_into_one_record_of_three_process_samples(tmp_path):
    per_round = [[1000.0, 1004.0, 1002.0], [990.0, 996.0], [1010.0, 1020.0, 1012.0]]
    files = round_files("O2-default", per_round)
    (merged,) = merge_rounds(files)
    assert [r["index"] for r in merged["rounds"]] == [1, 2, 3] and [r["repeats"] for r in merged["rounds"]] == [3, 2, 3]
    (workload,) = merged["workloads"]
    medians = [1002.0, 993.0, 1012.0]  # each process's median over its own repeats
    assert workload_samples(workload, "output_tokens_per_s") == medians
    summary = workload["summary"]["output_tokens_per_s"]
    assert summary["n"] == 3 and summary["median"] == 1002.0  # over the processes, not the 8 repeats
    assert summary["min"] == 993.0 and summary["max"] == 1012.0
    assert [r["round"] for r in workload["repeats"]] == [1, 1, 1, 2, 2, 3, 3, 3]  # every repeat, tagged
    assert [r["excluded"] for r in workload["round_medians"]] == [None, None, None]
    # the same through the store: written as three files, loaded as one record (merge=False: one per file)
    folder = write_set(tmp_path / "results", files)
    (loaded,) = load_results([folder]).results
    assert len(loaded["_paths"]) == 3 and workload_samples(loaded["workloads"][0], "output_tokens_per_s") == medians
    assert len(load_results([folder], merge=False).results) == 3
    # a result outside rounds is one process: one sample, the median over its repeats
    single = make_result(repeats={"closed-c4": [(1000.0, 12.0), (1010.0, 12.0), (1030.0, 12.0)]})
    assert merge_rounds([single]) == [single]
    assert workload_samples(single["workloads"][0], "output_tokens_per_s") == [1010.0]


def test_rounds_of_other_sweeps_points_or_failed_processes_do_not_merge():
    a = round_files("O2-default", [[1000.0], [1001.0]], sweep_id="s1")
    b = round_files("O2-default", [[900.0], [901.0]], sweep_id="s2")  # another sweep: another record (a history)
    c = round_files("O1-default", [[500.0], [501.0]], sweep_id="s1")
    failed = with_round(make_result("O2-default", status="failed"), 3, 3, "s1")
    merged = merge_rounds([a[0], b[0], c[0], failed, a[1], b[1], c[1]])
    assert [(r["label"], r["status"], len(r.get("rounds") or [])) for r in merged] == [
        ("O2-default", "ok", 2), ("O2-default", "ok", 2), ("O1-default", "ok", 2), ("O2-default", "failed", 0)]
    assert [workload_samples(r["workloads"][0], "output_tokens_per_s") for r in merged[:3]] == [
        [1000.0, 1001.0], [900.0, 901.0], [500.0, 501.0]]


def test_rounds_a_mixed_cluster_ran_on_two_gpu_types_are_two_records():
    rounds = round_files("O2-default", [[10000.0], [3000.0], [10100.0]])
    for result, gpu in zip(rounds, ["NVIDIA H200", "NVIDIA A100", "NVIDIA H200"]):
        result["environment"] = dict(result.get("environment") or {}, gpu=gpu)
    merged = merge_rounds(rounds)
    assert [(r["environment"]["gpu"], workload_samples(r["workloads"][0], "output_tokens_per_s")) for r in merged] == [
        ("NVIDIA H200", [10000.0, 10100.0]), ("NVIDIA A100", [3000.0])]


# ------------------------------------------------------------------ (b) a slow first round


def test_a_slow_first_round_is_excluded_with_its_reason():
    # round 1 (right after a cold compile) 40% slower; rounds 2-4 agree within 1%
    files = round_files("O2-default", [[600.0, 602.0], [1000.0, 1000.0], [1005.0, 1005.0], [1010.0, 1010.0]])
    (merged,) = merge_rounds(files)
    (workload,) = merged["workloads"]
    first = workload["round_medians"][0]
    assert first["round"] == 1 and first["excluded"]
    assert "first round's output_tokens_per_s -40.2% from the other rounds' median" in first["excluded"]
    assert "excluded as an outlier" in first["excluded"]
    assert [r["excluded"] for r in workload["round_medians"][1:]] == [None, None, None]
    assert workload_samples(workload, "output_tokens_per_s") == [1000.0, 1005.0, 1010.0]
    assert workload_samples(workload, "tpot_p99_ms") == [12.0, 12.0, 12.0]  # every metric of that process goes
    assert workload["summary"]["output_tokens_per_s"]["n"] == 3
    assert workload["summary"]["output_tokens_per_s"]["median"] == 1005.0
    # compare counts three processes, not four
    (tokens,) = [c for c in compare_sets([merged], [merged], metrics=["tokens_per_s"]).comparisons]
    assert tokens.n_baseline == tokens.n_current == 3


def test_a_first_round_within_ten_percent_or_with_too_few_others_stays():
    (merged,) = merge_rounds(round_files("O2-default", [[950.0], [1000.0], [1005.0], [1010.0]]))  # -5.0%: kept
    assert workload_samples(merged["workloads"][0], "output_tokens_per_s") == [950.0, 1000.0, 1005.0, 1010.0]
    # 40% off but the others spread 30%: 3 x their range is more than the gap, so it is not an outlier
    (merged,) = merge_rounds(round_files("O2-default", [[600.0], [850.0], [1000.0], [1150.0]]))
    assert merged["workloads"][0]["round_medians"][0]["excluded"] is None
    # two rounds: nothing to measure the first against
    (merged,) = merge_rounds(round_files("O2-default", [[600.0], [1000.0]]))
    assert workload_samples(merged["workloads"][0], "output_tokens_per_s") == [600.0, 1000.0]


def test_a_first_repeat_outlier_is_left_out_of_its_process_median():
    """bench/repeats.workload_record: the first of >= 3 repeats that is an outlier (a warm-up that was not
    enough) is recorded in outlier_repeats and left out of the summary and the process's median."""
    from graphbench.bench.repeats import workload_record
    from graphbench.bench.workloads import LengthDist, Workload

    workload = Workload(kind="closed", concurrency=4, num_requests=8, prompt_len=LengthDist("fixed", 16),
                        output_len=LengthDist("fixed", 8))
    repeats = [{"output_tokens_per_s": v, "duration_s": 1.0} for v in (600.0, 1000.0, 1005.0, 1010.0)]
    record = workload_record(workload, repeats, {"scale": 1})
    assert list(record["outlier_repeats"]) == ["0"] and "first repeat's" in record["outlier_repeats"]["0"]
    assert record["summary"]["output_tokens_per_s"]["n"] == 3
    assert record["summary"]["output_tokens_per_s"]["median"] == 1005.0
    assert process_medians(record)["output_tokens_per_s"] == 1005.0
    steady = workload_record(workload, [dict(r, output_tokens_per_s=1000.0 + i) for i, r in enumerate(repeats)],
                             {"scale": 1})
    assert steady["outlier_repeats"] == {} and steady["summary"]["output_tokens_per_s"]["n"] == 4


# ------------------------------------------------------------------ (c) the verdict


def test_judge_calls_a_difference_only_when_significant_beyond_noise_and_min_effect():
    same = judge([1000.0, 1010.0, 995.0], [1002.0, 1008.0, 997.0], higher_is_better=True, min_effect_pct=5.0)
    assert same.verdict == TIE and same.test == WELCH and not same.significant
    assert same.reason.startswith(("within noise", "not significant"))
    # a clear 15% drop, 3 processes a side within 1%: the noise floor is NOISE_RANGES x that 1% range
    drop = judge([1000.0, 1005.0, 995.0], [850.0, 854.0, 846.0], higher_is_better=True, min_effect_pct=5.0)
    assert drop.verdict == REGRESSED and drop.significant and drop.test == WELCH
    assert drop.change_pct == pytest.approx(-15.0) and drop.noise_pct == pytest.approx(NOISE_RANGES * 1.0)
    assert drop.reason.startswith(f"-15.0% vs noise {NOISE_RANGES * 1.0:.1f}%, p=")
    # lower is better: the same numbers as a latency went down, an improvement
    assert judge([1000.0, 1005.0, 995.0], [850.0, 854.0, 846.0], higher_is_better=False).verdict == "improved"
    # a 15% drop the U test calls significant (9 vs 9 processes) whose noise floor is 20% (one slow process
    # of the current side): within the noise, a tie
    base = [1000.0 + i for i in range(9)]  # median 1004
    cur = [850.0 + i for i in range(8)] + [857.0 - 0.20 * 1004.0 / NOISE_RANGES]
    wide = judge(base, cur, higher_is_better=True, min_effect_pct=5.0)
    assert wide.test == MANN_WHITNEY and wide.significant and wide.p_value < 0.001
    assert wide.change_pct == pytest.approx(-15.0, abs=0.1) and wide.noise_pct == pytest.approx(20.0)
    assert wide.noise_pct == pytest.approx(noise_floor(base, cur))
    assert wide.verdict == TIE and wide.reason.startswith("within noise: -15.0% vs noise 20.0%")
    # the same drop without the slow process: beyond the noise, a regression
    assert judge(base, cur[:-1], higher_is_better=True, min_effect_pct=5.0).verdict == REGRESSED
    # significant and beyond the noise, but below the minimum effect
    small = judge([1000.0, 1001.0, 1002.0], [970.0, 971.0, 972.0], higher_is_better=True, min_effect_pct=5.0)
    assert small.verdict == TIE and small.significant and small.reason.startswith("below the 5% minimum effect")


def test_judge_with_one_process_a_side_or_against_a_history():
    one = judge([1000.0], [850.0], higher_is_better=True)
    assert one.verdict == NA and one.p_value is None and one.noise_pct is None
    assert one.change_pct == pytest.approx(-15.0) and "no test, no noise estimate" in one.reason
    # one new process against a history of several: the prediction test
    history = judge([1000.0, 1004.0, 996.0, 1002.0, 998.0], [850.0], higher_is_better=True, min_effect_pct=5.0)
    assert history.test == PREDICTION and history.verdict == REGRESSED
    assert judge([], [1.0], True).verdict == NA and "no sample in the baseline" in judge([], [1.0], True).reason


# ------------------------------------------------------------------ (d) A/A and a planted drop, end to end


def _sweep_set(folder: Path, rng: random.Random, sweep_id: str) -> Path:
    """Both points, both workloads, 3 rounds of 2 repeats, every tokens/s and TPOT within +-1% of its level."""
    def jitter(x: float) -> float:
        return x * (1.0 + rng.uniform(-0.01, 0.01))

    results = []
    for i, label in enumerate(POINTS):
        for index in (1, 2, 3):
            repeats = {w: [(jitter(1000.0 * (1 + i) * (1 + j)), jitter(20.0 / (1 + i))) for _ in range(2)]
                       for j, w in enumerate(WORKLOADS)}
            result = make_result(label, repeats=repeats, startup_s=jitter(2.0 + i), config_hash=f"hash{i}")
            results.append(with_round(result, index, 3, sweep_id))
    return write_set(folder, results)


def _edited_copy(src: Path, dst: Path, tokens_factor: float, busy: bool = False) -> Path:
    """A copy of the result files with every repeat's output tokens/s times tokens_factor (and, busy: every
    repeat flagged busy_host)."""
    shutil.copytree(src, dst)
    for path in dst.rglob("*.json"):
        data = json.loads(path.read_text())
        for workload in data["workloads"]:
            for repeat in workload["repeats"]:
                repeat["output_tokens_per_s"] *= tokens_factor
                if busy:
                    repeat["busy_host"] = "its main thread waited 35% of the repeat for a CPU"
            if busy:
                workload["busy_host_repeats"] = list(range(len(workload["repeats"])))
        path.write_text(json.dumps(data))
    return dst


@pytest.fixture(scope="module")
def aa_sets(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("rounds-aa")
    rng = random.Random(20261204)
    return _sweep_set(tmp / "a", rng, "sweep/a"), _sweep_set(tmp / "b", rng, "sweep/b")


def _verdicts(base: Path, cur: Path, metrics=None) -> dict[tuple, str]:
    result = compare_sets(load_results([base]), load_results([cur]), metrics=metrics)
    return {(c.label, c.workload, c.metric): c.verdict for c in result.comparisons}


def test_an_a_a_pair_of_sweeps_passes_both_ways_and_compare_calls_every_row_a_tie(aa_sets):
    a, b = aa_sets
    for base, cur in ((a, b), (b, a)):
        report = run_gate(base, cur)
        assert report.exit_code == 0 and report.verdict == "pass", report.to_markdown()
        assert all(c.comparison.n_baseline == c.comparison.n_current == 3 for c in report.checks)
        assert {c.status for c in report.checks} == {"pass"}
        verdicts = _verdicts(base, cur)
        assert len(verdicts) > 20 and set(verdicts.values()) == {TIE}
    check = aa_check(a, b)
    assert check.false_alarms == 0 and check.gate_exit == 0 and check.compare_counts[TIE] == check.comparisons
    # and how many of those passes could not have failed: the noise each pass had to beat, against its threshold
    blind = [c for c in run_gate(a, b).checks if c.comparison.noise_pct > abs(c.threshold_pct)]
    assert check.blind_checks == len(blind) and check.to_dict()["blind_checks"] == len(blind)
    assert ("spread more than their threshold" in check.summary()) == bool(blind)


def test_a_15_percent_drop_fails_and_compare_and_gate_call_the_same_rows(aa_sets, tmp_path):
    a, b = aa_sets
    slower = _edited_copy(b, tmp_path / "slower", 0.85)
    report = run_gate(a, slower)
    assert report.exit_code == 1 and report.verdict == "fail"
    tokens_rows = {(p, w, "output_tokens_per_s") for p in POINTS for w in WORKLOADS}
    regressed = {(c.comparison.label, c.comparison.workload, c.metric) for c in report.regressions}
    assert regressed == tokens_rows
    assert all(c.comparison.change_pct == pytest.approx(-15.0, abs=1.5) for c in report.regressions)
    # compare (every catalogue metric, its default minimum effects) calls exactly those rows regressed ...
    verdicts = _verdicts(a, slower)
    assert {row for row, v in verdicts.items() if v == REGRESSED} == tokens_rows
    assert {v for row, v in verdicts.items() if row not in tokens_rows} == {TIE}
    # ... and agrees with the gate on every row the gate checks
    for check in report.checks:
        c = check.comparison
        assert verdicts[(c.label, c.workload, c.metric)] == c.verdict
        assert (check.status == "regressed") == (c.verdict == REGRESSED)
    # the other way round, the drop is an improvement, and nothing fails
    back = run_gate(slower, a)
    assert back.exit_code == 0 and {(c.comparison.label, c.comparison.workload, c.metric) for c in back.checks
                                     if c.status == "improved"} == tokens_rows


# ------------------------------------------------------------------ (e) a busy host


def test_a_drop_measured_on_a_busy_host_cannot_be_judged(aa_sets, tmp_path):
    a, b = aa_sets
    busy = _edited_copy(b, tmp_path / "busy", 0.85, busy=True)
    loaded = load_results([busy]).results
    assert all(busy_rounds(w) == 3 for r in loaded for w in r["workloads"])  # every process had a busy repeat
    report = run_gate(a, busy)
    assert report.exit_code == 3 and report.verdict == "inconclusive" and not report.regressions
    tokens_rows = {(p, w, "output_tokens_per_s") for p in POINTS for w in WORKLOADS}
    assert {(c.comparison.label, c.comparison.workload, c.metric) for c in report.inconclusive} == tokens_rows
    assert all("busy host" in c.reason and c.comparison.busy_rounds == (0, 3) for c in report.inconclusive)
    assert any("busy host" in w for w in report.warnings)
    # compare still says what the numbers say; the gate says the host could not be trusted with it
    assert {row for row, v in _verdicts(a, busy).items() if v == REGRESSED} == tokens_rows
    # the other way round, an improvement measured on that busy host cannot be judged either
    back = run_gate(busy, a)
    assert back.exit_code == 3 and not back.regressions
    assert {(c.comparison.label, c.comparison.workload, c.metric) for c in back.inconclusive} == tokens_rows
    assert all(c.comparison.verdict == "improved" and c.comparison.busy_rounds == (3, 0) for c in back.inconclusive)
    # a busy host where nothing changed is no news
    calm = _edited_copy(b, tmp_path / "busy-same", 1.0, busy=True)
    assert run_gate(a, calm).exit_code == 0


def test_the_default_gate_thresholds_are_compare_s_minimum_effects():
    from graphbench.reports.gate_thresholds import DEFAULT_MIN_EFFECT_PCT, min_effect_pct

    assert {name: min_effect_pct(name) for name in DEFAULT_THRESHOLDS} == {
        name: abs(value) for name, value in DEFAULT_THRESHOLDS.items()}
    assert min_effect_pct("ttft_p99") == DEFAULT_MIN_EFFECT_PCT == 5.0
    assert min_effect_pct("graph_step") == 3.0  # full_step_ms, gated at +3%
