"""reports/repeats_table.py: the spread of repeats and where it sits, and its place in the report."""

from __future__ import annotations

import math

import pytest

from graphbench.reports.render import ReportContext, render_html, render_markdown
from graphbench.reports.repeats_table import REPEATS_COLUMNS, repeats_table


def _repeat(tokens_per_s: float, full_ms: float, none_ms: float, slowest: float, duration_s: float = 0.5) -> dict:
    return {"output_tokens_per_s": tokens_per_s, "duration_s": duration_s,
            "step_ms_by_mode": {"FULL": {"total_ms": full_ms, "n": 240}, "NONE": {"total_ms": none_ms, "n": 16}},
            "slowest_steps": [{"ms": slowest, "launch_ms": 1.0, "num_tokens": 2048, "runtime_mode": "NONE"}]}


def _result(label: str, repeats: list[dict], system: str = "graphbench", status: str = "ok") -> dict:
    return {"label": label, "system": system, "status": status,
            "workloads": [{"name": "closed-c64", "repeats": repeats}]}


def test_spread_and_per_mode_totals():
    repeats = [_repeat(100.0, 320.0, 120.0, 8.0, 0.9), _repeat(90.0, 322.0, 150.0, 15.5, 1.0),
               _repeat(96.0, 321.0, 125.0, 9.0, 0.94)]
    table = repeats_table([_result("O2_default", repeats)])
    assert list(table.columns) == REPEATS_COLUMNS and len(table) == 1
    row = table.iloc[0]
    assert row["repeats"] == 3 and row["repeat s"] == 0.94 and row["output tok/s"] == 96.0
    assert row["spread %"] == pytest.approx(100 * 10 / 96)
    assert row["FULL ms"] == 321.0 and row["FULL spread %"] == pytest.approx(100 * 2 / 321)
    assert row["NONE ms"] == 125.0 and row["NONE spread %"] == pytest.approx(100 * 30 / 125)
    assert math.isnan(row["PIECEWISE ms"]) and math.isnan(row["PIECEWISE spread %"])  # no such steps
    assert row["slowest step"] == "15.5 ms (NONE, 2048 tokens)"


def test_peers_failures_single_repeats_and_old_results_are_left_out():
    two = [_repeat(100.0, 1.0, 1.0, 1.0), _repeat(100.0, 1.0, 1.0, 1.0)]
    old = [{"output_tokens_per_s": 100.0}, {"output_tokens_per_s": 99.0}]  # written before per-mode times
    table = repeats_table([_result("hf-eager", two, system="hf-eager"), _result("O1", two, status="failed"),
                           _result("O2", two[:1]), _result("O3", old), _result("O0", two)])
    assert table["point"].tolist() == ["O0"]
    assert table.iloc[0]["spread %"] == 0.0


def test_the_report_shows_the_table_only_when_there_are_rows():
    import pandas as pd

    table = repeats_table([_result("O2_default", [_repeat(100.0, 320.0, 120.0, 8.0), _repeat(90.0, 322.0, 150.0, 15.5)])])
    base = dict(title="t", environment="env", counts="1 points ok", headline=pd.DataFrame(), charts=[],
                failures=pd.DataFrame(), skipped=[], summary=pd.DataFrame())
    with_rows = ReportContext(**base, repeats=table)
    markdown = render_markdown(with_rows)
    assert "## Repeats: how steady, and where the time moved" in markdown
    assert "| O2_default | closed-c64 | 2 | 0.50 | 95 | 10.5 | 321.0 | 0.6 | - | - | 135.0 | 22.2 | 15.5 ms (NONE, 2048 tokens) |" in markdown
    assert "<h2>Repeats: how steady, and where the time moved</h2>" in render_html(with_rows)
    assert "Repeats" not in render_markdown(ReportContext(**base))


def _eager_repeat(tokens_per_s: float) -> dict:
    return {"output_tokens_per_s": tokens_per_s, "duration_s": 2.0,
            "step_ms_by_mode": {"NONE": {"total_ms": 2000.0, "n": 300}}, "slowest_steps": []}


def test_steadiness_note_lists_unsteady_workloads_and_the_hosts_own_steadiness():
    import pandas as pd

    from graphbench.reports.repeats_table import steadiness_note

    steady = [_repeat(100.0, 320.0, 120.0, 8.0), _repeat(99.0, 321.0, 121.0, 8.0)]  # 1.0% (1 / 99.5)
    wobbly = [_repeat(100.0, 320.0, 120.0, 8.0), _repeat(90.0, 322.0, 150.0, 15.5)]  # 10.5% (10 / 95)
    eager = [_eager_repeat(8000.0), _eager_repeat(8400.0)]  # 4.9% (400 / 8200)
    table = repeats_table([_result("O2_default", steady), _result("O2_interactivity", wobbly), _result("O0", eager)])
    assert steadiness_note(table) == (
        "2 of 3 workloads spread more than 3%: O2_interactivity closed-c64 (10.5%), O0 closed-c64 (4.9%). "
        "Fully eager points (O0: no step replayed a CUDA graph, so their speed is the host's) spread 4.9-4.9%: "
        "the host's own steadiness in this run.")
    # at most max_listed named, the rest counted; no host sentence without graph points to judge
    assert steadiness_note(repeats_table([_result("O2_interactivity", wobbly), _result("O0", eager)]), max_listed=1) == (
        "2 of 2 workloads spread more than 3%: O2_interactivity closed-c64 (10.5%) and 1 more. "
        "Fully eager points (O0: no step replayed a CUDA graph, so their speed is the host's) spread 4.9-4.9%: "
        "the host's own steadiness in this run.")
    assert steadiness_note(repeats_table([_result("O2_default", steady)])) == (
        "Every workload's tokens/s spread is within 3% (largest 1.0%).")
    assert steadiness_note(repeats_table([])) == ""
    markdown = render_markdown(ReportContext(title="t", environment="env", counts="3 points ok", headline=pd.DataFrame(),
                                             charts=[], failures=pd.DataFrame(), skipped=[], summary=pd.DataFrame(),
                                             repeats=table))
    assert "2 of 3 workloads spread more than 3%" in markdown


def test_a_repeat_with_null_figures_counts_as_not_measured():
    # (a mutation pass: float(None) raised a traceback out of the report)
    repeats = [_repeat(100.0, 320.0, 120.0, 8.0), _repeat(90.0, 322.0, 150.0, 15.5), _repeat(96.0, 321.0, 125.0, 9.0)]
    repeats[0]["output_tokens_per_s"] = None
    repeats[1]["step_ms_by_mode"]["NONE"]["total_ms"] = None
    row = repeats_table([_result("O2_default", repeats)]).iloc[0]
    assert row["output tok/s"] == 93.0 and row["FULL ms"] == 321.0
