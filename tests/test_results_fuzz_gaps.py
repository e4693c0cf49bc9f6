"""Gaps an adversarial pass over the commands that read results folders found (report, compare, gate, plan,
tune): each bad input now ends in one `error:` line with exit code 2 or is skipped by name, and each odd
but valid input works (the style of tests/test_cli_bad_inputs.py)."""

from __future__ import annotations

import json
import math

from graphbench.bench.metrics import summarize
from tests.test_gate import make_result
from tests.test_cli_bad_inputs import assert_one_error, invoke


def test_a_statistic_of_no_samples_is_left_out_of_the_summary(tmp_path):
    # --output-len 1: no request has a second token, so TPOT is NaN in every repeat; the summary's
    # median of [nan, nan] made `run` (and every sweep point) fail with 'error: samples contain NaN'
    nan = math.nan
    repeats = [{"output_tokens_per_s": 280.0 + i, "tpot_ms": {"p50": nan, "p99": nan}, "ttft_ms": {"p50": 3.0, "p99": 4.0}}
               for i in range(2)]
    summary = summarize(repeats)
    assert "tpot_p50_ms" not in summary and "tpot_p99_ms" not in summary
    assert summary["output_tokens_per_s"]["median"] == 280.5 and summary["ttft_p99_ms"]["n"] == 2
    result = invoke("run", "--device", "cpu", "-O", 0, "--concurrency", 1, "--num-requests", 1, "--prompt-len", 4,
                    "--output-len", 1, "--repeats", 2, "--quiet", "--results", tmp_path)
    assert result.exit_code == 0, result.output
    written = json.loads(next(tmp_path.rglob("*.json")).read_text())
    assert "tpot_p99_ms" not in written["workloads"][0]["summary"]
    planned = invoke("plan", tmp_path, "--slo", "ttft_p99_ms=1000", "--format", "json")
    assert planned.exit_code == 0, planned.output


def _planned_results(folder, change=None):
    """Two points of one process each, closed-c1 and closed-c4, with summaries as graphbench writes them;
    change(result) edits each before it is written."""
    from graphbench.reports.store import write_result
    from tests.test_gate import make_result

    for label, tps in (("O0-default", 1000.0), ("O2-default", 2000.0)):
        result = make_result(label, repeats={"closed-c1": [(tps, 12.0)] * 3, "closed-c4": [(3 * tps, 14.0)] * 3})
        for workload in result["workloads"]:
            workload["summary"] = {**summarize(workload["repeats"]), "requests_per_s": {"median": tps / 30, "n": 3}}
        if change is not None:
            change(result)
        write_result(folder, "cpu-test", label, result)
    return folder


def _summary(key, field, value):
    def change(result):
        result["workloads"][0]["summary"][key][field] = value
    return change


def test_a_summary_no_measurement_can_give_skips_its_file_by_name(tmp_path):
    # a negative requests_per_s (what plan reads from the summary) printed 'req/s per GPU -5' and 'none meet
    # the SLOs'; a NaN median ended every command in 'error: samples contain NaN', naming no file
    cases = [(_summary("requests_per_s", "median", -5.0), "summary 'requests_per_s': median is -5.0, not a possible value"),
             (_summary("output_tokens_per_s", "median", math.nan),
              "summary 'output_tokens_per_s': median is nan, not a possible tok/s value"),
             (_summary("tpot_p99_ms", "max", 1e300), "summary 'tpot_p99_ms': max is 1e+300, not a possible ms value"),
             (_summary("eager_fraction", "min", 2.0), "summary 'eager_fraction': min is 2.0, not a possible fraction value")]
    good = _planned_results(tmp_path / "good")
    for number, (change, message) in enumerate(cases):
        folder = _planned_results(tmp_path / f"bad{number}", change)
        first = f"{folder}/cpu-test/0001_O0-default.json: workload 'closed-c1': {message}"
        assert_one_error(invoke("plan", folder, "--slo", "tpot_p99_ms=50", "--target-rps", 10),
                         "2 malformed files skipped; the first, " + first)
        assert_one_error(invoke("compare", good, folder), "no current results loaded", first)
    result = invoke("plan", good, "--slo", "tpot_p99_ms=50", "--target-rps", 10, "--format", "json")
    assert result.exit_code == 0, result.output
    assert [c["requests_per_s_per_gpu"] for c in json.loads(result.stdout)["configurations"]] == [200 / 3, 100 / 3]


def test_figures_past_any_measurement_skip_their_file_not_print_300_digits(tmp_path):
    # 1e300 tokens/s is finite: compare printed it 300 digits wide and the t-test's variance overflowed
    # into a NaN p-value (the gate: 'CANNOT JUDGE')
    good = _planned_results(tmp_path / "good")
    for key, message in (("output_tokens_per_s", "'output_tokens_per_s' is 1e+300, past any measurement (at most 1e+15)"),
                         ("total_tokens_per_s", "total_tokens_per_s is 1e+300, not a possible tok/s value")):
        def huge(result, key=key):
            for repeat in result["workloads"][0]["repeats"]:
                repeat[key] = 1e300
        folder = _planned_results(tmp_path / key, huge)
        first = f"{folder}/cpu-test/0001_O0-default.json: workload 'closed-c1': repeat #1: {message}"
        assert_one_error(invoke("gate", "--baseline", good, "--current", folder), first)
        assert_one_error(invoke("report", folder, "-o", tmp_path / "report"), first)
    def large(result):
        for repeat in result["workloads"][0]["repeats"]:
            repeat["output_tokens_per_s"] = 1e14  # large, but within what a measurement may give
    result = invoke("compare", good, _planned_results(tmp_path / "large", large), "--format", "csv")
    assert result.exit_code == 0 and ",1000.0,100000000000000.0," in result.stdout, result.output


def test_a_negative_time_skips_its_file_by_name(tmp_path):
    # a negative per-mode step total was summed into the report's time by mode as if measured
    good = _planned_results(tmp_path / "good")
    for name, edit, message in (
            ("total", lambda r: r["workloads"][0]["repeats"][0].update(step_ms_by_mode={"FULL": {"total_ms": -3.0}}),
             "repeat #1: step_ms_by_mode 'FULL': 'total_ms' is -3.0, a negative time"),
            ("duration", lambda r: r["workloads"][0]["repeats"][0].update(duration_s=-1),
             "repeat #1: 'duration_s' is -1, a negative time")):
        folder = _planned_results(tmp_path / name, edit)
        first = f"{folder}/cpu-test/0001_O0-default.json: workload 'closed-c1': {message}"
        assert_one_error(invoke("report", folder, "-o", tmp_path / "report"), first)
        assert_one_error(invoke("compare", good, folder), "no current results loaded", first)
    zero = _planned_results(tmp_path / "zero", lambda r: r["workloads"][0]["repeats"][0].update(
        step_ms_by_mode={"NONE": {"total_ms": 0.0}}))  # a mode no step ran in: 0, not an error
    result = invoke("compare", good, zero, "--format", "csv")
    assert result.exit_code == 0, result.output


def test_a_copied_round_file_counts_once_and_is_named(tmp_path):
    # a copy of a round file beside it (or a results folder copied in twice) was a fourth process of the
    # point: 3/4 processes, its noise narrowed and Mann-Whitney's U in place of Welch's t
    import shutil

    from graphbench.reports.store import load_results
    from tests.test_gate import write_set
    from tests.test_rounds_verdicts import round_files

    baseline = write_set(tmp_path / "baseline", round_files("O2-default", [[1000.0, 1004.0], [990.0, 996.0], [1010.0, 1020.0]]))
    current = write_set(tmp_path / "current", round_files("O2-default", [[1001.0, 1003.0], [995.0, 993.0], [1012.0, 1018.0]]))
    (machine,) = [p for p in current.iterdir() if p.is_dir()]
    first = sorted(machine.glob("*.json"))[0]
    shutil.copy(first, machine / "copy of it.json")
    shutil.copytree(machine, current / "again")
    loaded = load_results([current])
    assert [len(r["rounds"]) for r in loaded.results] == [3]
    assert len(loaded.skipped) == 5 and loaded.skipped[0] == (  # 'again' sorts first: its files are read first
        current / "again" / "copy of it.json", f"round 1 of point O2-default again: already read from "
        f"{current / 'again' / first.name} (a copy?); each process counts once: remove one of them")
    result = invoke("compare", baseline, current, "--metric", "output_tokens_per_s", "--format", "csv")
    assert result.exit_code == 0, result.output
    assert ",3,3," in result.stdout.splitlines()[1] and "Welch" in result.stdout, result.stdout
    assert "each process counts once" in result.stderr
    # a result outside rounds copied: the same content, read once; another run of it is pooled as before
    single = tmp_path / "single"
    write_set(single, [make_result("O1-default")])
    (written,) = single.rglob("*.json")
    shutil.copy(written, written.with_name("0002_O1-default.json"))
    assert len(load_results([single]).results) == 1


def test_a_folder_that_cannot_be_listed_is_named_not_passed_over(tmp_path, monkeypatch):
    # Path.rglob passes over a folder it may not list: a history folder's unreadable run was left out of the
    # gate without a word, and a results folder that could not be listed read as 'no current results'
    import os

    history = tmp_path / "history"
    _planned_results(history / "run1")
    _planned_results(history / "run2")
    scandir = os.scandir

    def refuse(path="."):  # (as root, chmod 000 refuses nothing: the refusal is made here)
        if str(path).endswith("run2") or str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refuse)
    why = "cannot list this folder (Permission denied): its results are not read; make it readable, or name the folders to read"
    result = invoke("compare", history / "run1", history)
    assert result.exit_code == 0, result.output
    assert f"{history / 'run2'}: {why}" in result.stderr
    locked = tmp_path / "locked"
    locked.mkdir()
    assert_one_error(invoke("plan", locked, "--slo", "tpot_p99_ms=50"), f"{locked}: {why}")
    assert_one_error(invoke("report", locked, "-o", tmp_path / "report"), f"{locked}: {why}")


def test_slos_no_configuration_meets_anywhere_are_an_error_not_a_ranking(tmp_path):
    # every row had capacity 0 and 'none meet the SLOs', yet the first was called 'best' and the others
    # 'tie (+0.0%)': a ranking of configurations none of which can serve the load
    folder = _planned_results(tmp_path / "results")  # TPOT p99 12 ms at concurrency 1, 14 ms at 4
    message = ("no configuration meets tpot_p99_ms<=1 at any measured concurrency, so none can be planned or ranked "
               "(the lowest measured: tpot_p99_ms 12 ms (O0-default at concurrency 1)): loosen the SLOs, or measure "
               "lower loads")
    for extra in ([], ["--target-rps", "10"], ["--format", "json"]):
        assert_one_error(invoke("plan", folder, "--slo", "tpot_p99_ms=1", *extra), message)
    result = invoke("plan", folder, "--slo", "tpot_p99_ms=13", "--format", "json")  # met at concurrency 1: planned
    assert result.exit_code == 0, result.output
    assert [c["max_concurrency"] > 0 for c in json.loads(result.stdout)["configurations"]] == [True, True]


def test_plan_gives_each_gpu_type_its_own_rows(tmp_path):
    # two machines' folders of one sweep (results/<machine>/): plan pooled the H100's and the H200's runs of a
    # label into one capacity, between the two GPUs' (the report's headline ranks each GPU type apart)
    def on(gpu, factor):
        def change(result):
            result["environment"] = dict(result.get("environment") or {}, device="cuda", gpu=gpu)
            for workload in result["workloads"]:
                for repeat in workload["repeats"]:
                    repeat["output_tokens_per_s"] *= factor
                workload["summary"] = summarize(workload["repeats"])
        return change

    _planned_results(tmp_path / "results" / "h100", on("NVIDIA H100", 1.0))
    _planned_results(tmp_path / "results" / "h200", on("NVIDIA H200", 2.0))
    result = invoke("plan", tmp_path / "results", "--slo", "tpot_p99_ms=50", "--format", "json")
    assert result.exit_code == 0, result.output
    rows = {c["series"]: c["output_tokens_per_s_per_gpu"] for c in json.loads(result.stdout)["configurations"]}
    assert rows == {"O2-default @ NVIDIA H200": 12000.0, "O0-default @ NVIDIA H200": 6000.0,
                    "O2-default @ NVIDIA H100": 6000.0, "O0-default @ NVIDIA H100": 3000.0}
    assert "pooled" not in result.stderr
    one = invoke("plan", tmp_path / "results" / "h100", "--slo", "tpot_p99_ms=50", "--format", "json")
    assert [c["series"] for c in json.loads(one.stdout)["configurations"]] == ["O2-default", "O0-default"]
