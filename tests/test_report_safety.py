"""What result files carry cannot reach the reader's renderer, spreadsheet or terminal as code, and a bad
file is skipped by name instead of failing the report."""

from __future__ import annotations

import csv
import json
import math
import os

import pytest

from graphbench.reports.gate import run_gate
from graphbench.reports.report import write_report
from graphbench.reports.safe_text import csv_text, markdown_text
from graphbench.reports.store import load_results
from tests.test_gate import make_result, write_set

HOSTILE = '<img src=x onerror=alert(1)>[click](javascript:alert(1))`x`|'


def test_markdown_and_csv_text():
    assert markdown_text(HOSTILE) == ("&lt;img src=x onerror=alert(1)&gt;\\[click\\](javascript:alert(1))\\`x\\`\\|")
    assert markdown_text("a\nb & c") == "a b &amp; c"
    assert csv_text('=HYPERLINK("http://x","y")') == '\'=HYPERLINK("http://x","y")'
    assert [csv_text(v) for v in ("+1+cmd", "@SUM(A1)", "-2+3", "\tx")] == ["'+1+cmd", "'@SUM(A1)", "'-2+3", "'\tx"]
    assert [csv_text(v) for v in ("-12.5", "-", "O2_default", 3.0, -1)] == ["-12.5", "-", "O2_default", 3.0, -1]


def test_report_escapes_labels_and_neutralises_csv_formulas(tmp_path):
    label = '=HYPERLINK("http://evil","x")' + HOSTILE
    results = write_set(tmp_path / "results", [make_result(label), make_result("O0_default")])
    write_report([results], tmp_path / "report")
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "<img" not in markdown and "](javascript" not in markdown.replace("\\](javascript", "")
    assert "&lt;img src=x onerror=alert(1)&gt;\\[click\\]" in markdown
    with open(tmp_path / "report" / "summary.csv", newline="") as f:
        labels = [row["label"] for row in csv.DictReader(f)]
    assert "'" + label in labels and not any(x.startswith("=") for x in labels)
    gate = run_gate(results, results).to_markdown()
    assert "<img" not in gate and "](javascript" not in gate.replace("\\](javascript", "")


def test_a_nan_or_infinite_sample_skips_its_file_by_name(tmp_path):
    good, bad, huge = make_result("good"), make_result("bad"), make_result("huge")
    bad["workloads"][0]["repeats"][1]["output_tokens_per_s"] = math.nan
    huge["workloads"][0]["repeats"][0]["duration_s"] = math.inf  # what 1e400 in a file reads as
    folder = write_set(tmp_path / "r", [good, bad, huge])
    loaded = load_results([folder])
    assert [r["label"] for r in loaded.results] == ["good"]
    reasons = sorted(why for _, why in loaded.skipped)
    assert reasons == ["workload 'closed-c1': repeat #1: 'duration_s' is inf, not a finite number",
                       "workload 'closed-c1': repeat #2: 'output_tokens_per_s' is nan, not a finite number"]
    write_report([folder], tmp_path / "report")  # the report is written, the two files named in it
    assert "0002_bad.json" in (tmp_path / "report" / "report.md").read_text()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_or_a_link_to_a_device_named_json_is_skipped_not_read(tmp_path):
    folder = write_set(tmp_path / "r", [make_result("good")])
    machine = next(p for p in folder.iterdir() if p.is_dir())
    os.mkfifo(machine / "0100_fifo.json")
    (machine / "0101_zero.json").symlink_to("/dev/zero")
    loaded = load_results([folder])  # returns: neither is opened
    assert [r["label"] for r in loaded.results] == ["good"]
    assert sorted((p.name, why) for p, why in loaded.skipped) == [("0100_fifo.json", "not a regular file"),
                                                                  ("0101_zero.json", "not a regular file")]
    assert json.loads(json.dumps([str(p) for p, _ in loaded.skipped]))


def test_a_damaged_summary_outside_its_samples_still_charts(tmp_path):
    """A result whose summary median lies above every repeat (written by hand, or damaged) drew a negative
    error bar, which matplotlib refuses: the report must still be written, with its throughput chart."""
    from graphbench.reports.report import write_report
    from graphbench.reports.store import write_result
    from tests.test_gate import make_result

    damaged = make_result("O2-default", repeats={"closed-c4": [(1000.0, 12.0), (1100.0, 12.0)]})
    workload = damaged["workloads"][0]
    workload["concurrency"] = 4
    workload["summary"] = {"output_tokens_per_s": {"median": 5000.0}}  # the repeats ran 1000 and 1100
    write_result(tmp_path / "results", "h200", damaged["label"], damaged)
    report = write_report([tmp_path / "results"], tmp_path / "report")
    assert (report.out_dir / "throughput.png").is_file()


def test_a_peer_run_under_a_graphbench_points_label_charts_apart(tmp_path):
    """`graphbench run --system hf-eager --label O2_default` into a sweep's folder: one label of two systems
    made one chart series, and the speed-up chart's lookup of the peer's value got two (a traceback)."""
    from graphbench.reports.frame import results_frame

    ours = make_result("O2_default")
    peer = make_result("O2_default", system="hf-eager", repeats={"closed-c1": [(900.0, 30.0)] * 3,
                                                                  "closed-c4": [(1500.0, 40.0)] * 3})
    results = write_set(tmp_path / "results", [ours, peer])
    report = write_report([results], tmp_path / "report")
    assert (report.out_dir / "speedup.png").is_file()
    frame = results_frame(load_results([results]).results)
    assert sorted(set(zip(frame["series"], frame["system"]))) == [
        ("O2_default", "graphbench"), ("O2_default (hf-eager)", "hf-eager")]


def test_a_baseline_of_zero_tokens_per_second_draws_no_bar_and_warns_nothing(tmp_path):
    # (the speed-up chart divided by it: numpy's RuntimeWarning on stderr)
    import warnings

    zero = make_result("O0_default", repeats={"closed-c1": [(1.0, 12.0)] * 3, "closed-c4": [(1.0, 12.0)] * 3})
    for workload in zero["workloads"]:  # (make_repeat divides by the rate: set 0 after)
        workload["summary"]["output_tokens_per_s"] = {"median": 0.0}
        for repeat in workload["repeats"]:
            repeat["output_tokens_per_s"] = 0.0
    ours = make_result("O2_default")
    for result, level in ((zero, 0), (ours, 2)):
        result["config"]["optimization_level"] = level
        for workload in result["workloads"]:
            workload["concurrency"] = int(workload["name"].removeprefix("closed-c"))
    results = write_set(tmp_path / "results", [zero, ours])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        report = write_report([results], tmp_path / "report")
    assert (report.out_dir / "speedup.png").is_file()
