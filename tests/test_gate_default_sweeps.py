"""The gate on what a default sweep writes (3 repeats a point): it passes against itself and fails
when every tokens/s is 15% lower, on the CPU and on the GPU.

tests/data/gate/default-sweep-h200: `graphbench sweep --model llama-3.2-1b` on one H200, 2026-12-01,
tree 4d956fb (bench/RESULTS.md); default-sweep-cpu: the README's `graphbench sweep` on a 2-core CPU the
same day, tree 5f8aa60. Both trimmed to what the gate reads (step histograms and slowest steps dropped).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphbench.cli.main import app
from graphbench.reports.gate import RULE_THRESHOLD_ONLY, run_gate

DATA = Path(__file__).parent / "data" / "gate"
SWEEPS = ["default-sweep-h200", "default-sweep-cpu"]
runner = CliRunner()


def lowered(src: Path, dst: Path, factor: float) -> Path:
    """A copy of the results with every output and total tokens/s (repeats and summaries) times factor."""
    shutil.copytree(src, dst)
    for path in dst.glob("*.json"):
        data = json.loads(path.read_text())
        for workload in data["workloads"]:
            for repeat in workload["repeats"]:
                for key in ("output_tokens_per_s", "total_tokens_per_s"):
                    repeat[key] *= factor
            for key in ("output_tokens_per_s", "total_tokens_per_s"):
                for stat in ("median", "min", "max", "iqr"):
                    workload["summary"][key][stat] *= factor
        path.write_text(json.dumps(data))
    return dst


@pytest.mark.parametrize("sweep", SWEEPS)
def test_a_default_sweep_passes_against_itself(sweep):
    result = runner.invoke(app, ["gate", "-b", str(DATA / sweep), "-c", str(DATA / sweep)])
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output


@pytest.mark.parametrize("sweep", SWEEPS)
def test_a_default_sweep_fails_with_tokens_per_s_15_percent_lower(sweep, tmp_path):
    current = lowered(DATA / sweep, tmp_path / "current", 0.85)
    result = runner.invoke(app, ["gate", "-b", str(DATA / sweep), "-c", str(current)])
    assert result.exit_code == 1, result.output
    report = run_gate(DATA / sweep, current)
    tokens = [c for c in report.checks if c.metric == "output_tokens_per_s"]
    # every point x workload: 3 vs 3 repeats, gated on the medians' -15% against the -5% threshold
    assert tokens and all(c.status == "regressed" and c.rule == RULE_THRESHOLD_ONLY for c in tokens)
    assert all(c.comparison.change_pct == pytest.approx(-15.0) for c in tokens)
    assert {c.metric for c in report.regressions} == {"output_tokens_per_s"}
