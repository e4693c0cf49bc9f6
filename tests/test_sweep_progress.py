"""The sweep's progress: the bar counts the processes that run, and a log without a terminal says what starts."""

from __future__ import annotations

import io
from types import SimpleNamespace

import rich.progress
from rich.console import Console

from graphbench.bench import sweep as sweep_module
from graphbench.bench.sweep import SweepOutcome, SweepResult
from graphbench.bench.sweep_grid import SweepPoint
from graphbench.cli.sweep import _run_with_progress


def test_the_bar_counts_processes_that_run_and_a_log_says_each_start(monkeypatch):
    # a same-engine label and a point --resume keeps run no process: counted as done in no time, they made the
    # ETA say 1 s with minutes left; a CI log (no terminal) had no line between a point's start and its end
    ran, same, kept = SweepPoint("O2_default", {}), SweepPoint("O2_other", {}, same_as="O2_default"), \
        SweepPoint("O0_default", {})
    totals: list[float | None] = []

    def fake_run_sweep(points, results, run_args, *, on_start, on_done, **_):
        result = SweepResult()
        for point, status in ((kept, "skipped"), (ran, "ok"), (same, "same-engine")):
            if status == "ok":
                on_start(point)
            outcome = SweepOutcome(point, status, seconds=1.0 if status == "ok" else 0.0)
            on_done(outcome)
            result.outcomes.append(outcome)
        return result

    monkeypatch.setattr(sweep_module, "run_sweep", fake_run_sweep)
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=120)
    plan = SimpleNamespace(planned=[kept, ran, same], points=[kept, ran, same], run_args=[], gpu_ids=None, seed=0,
                           folders=[""], gpu=False)
    original_update = rich.progress.Progress.update

    def update(self, task_id, **kwargs):
        if "total" in kwargs:
            totals.append(kwargs["total"])
        return original_update(self, task_id, **kwargs)

    monkeypatch.setattr(rich.progress.Progress, "update", update)
    result, received = _run_with_progress(console, plan, None, 60.0, True, "local", None, 1)
    assert [o.status for o in result.outcomes] == ["skipped", "ok", "same-engine"] and received == []
    assert totals == [1]  # 2 processes planned, 1 kept from before: the bar's total drops to the one that ran
    text = out.getvalue()
    assert "  start O2_default (graphbench)" in text and "start O2_other" not in text
