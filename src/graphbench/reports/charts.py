"""The charts a report draws, in report order, and drawing them (reports/figures.py: what they share)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from graphbench.reports.charts_padding import padding_chart
from graphbench.reports.charts_perf import latency_chart, speedup_chart, throughput_chart
from graphbench.reports.charts_startup import graph_memory_chart, startup_chart
from graphbench.reports.figures import ChartFunction, ChartOutcome, NoData, ReportData


def chart_list() -> list[tuple[str, str, ChartFunction]]:
    """(file name, title, function) of every report chart, in report order."""
    return [
        ("throughput.png", "Output tokens/s vs concurrency", throughput_chart),
        ("speedup.png", "Speed-up over -O0 and over each peer", speedup_chart),
        ("latency.png", "TTFT and TPOT (p50, p99) vs concurrency", latency_chart),
        ("startup.png", "Startup time breakdown, cold vs warm", startup_chart),
        ("graph_memory.png", "Graph memory and capture time vs captured sizes", graph_memory_chart),
        ("padding.png", "Padding waste vs batch size per ladder: predicted and measured", padding_chart),
    ]


def render_charts(
    data: ReportData,
    out_dir: Path,
    progress: Callable[[int, int, ChartOutcome], None] | None = None,
) -> list[ChartOutcome]:
    """Draw every chart into out_dir; progress(i, n, outcome) after each one."""
    charts = chart_list()
    outcomes = []
    for i, (name, title, function) in enumerate(charts, start=1):
        path = out_dir / name
        try:
            function(data, path)
            outcome = ChartOutcome(name, title, path)
        except NoData as why:
            path.unlink(missing_ok=True)  # no stale chart from an earlier report
            outcome = ChartOutcome(name, title, None, f"skipped: {why}")
        outcomes.append(outcome)
        if progress is not None:
            progress(i, len(charts), outcome)
    return outcomes
