"""The gate on what a default sweep writes, on the CPU and on the GPU.

tests/data/gate/default-sweep-h200: `graphbench sweep --model llama-3.2-1b` on one H200, 2026-12-01,
tree 4d956fb (benchmarks/RESULTS.md); default-sweep-cpu: the README's `graphbench sweep` on a 2-core CPU the
same day, tree 5f8aa60. Both trimmed to what the gate reads (step histograms and slowest steps dropped).
They predate rounds: each point is ONE process (3 repeats), so the gate has no test and no noise
estimate for them: against itself it passes, a 15% drop it cannot judge (exit 3).
`as_rounds` replays each file's 3 repeats as 3 processes (a sweep's rounds, one repeat each): the
drop is then judged over the processes, called only where it is significant and beyond the noise
the measurements themselves show.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphbench.cli.main import app
from graphbench.reports.compare import compare_sets
from graphbench.reports.compare_match import load_side
from graphbench.reports.gate import DEFAULT_THRESHOLDS, run_gate

DATA = Path(__file__).parent / "data" / "gate"
SWEEPS = ["default-sweep-h200", "default-sweep-cpu"]
runner = CliRunner()


def _lower(workload: dict, factor: float) -> None:
    for repeat in workload["repeats"]:
        for key in ("output_tokens_per_s", "total_tokens_per_s"):
            repeat[key] *= factor
    for key in ("output_tokens_per_s", "total_tokens_per_s"):
        for stat in ("median", "min", "max", "iqr"):
            workload["summary"][key][stat] *= factor


def lowered(src: Path, dst: Path, factor: float) -> Path:
    """A copy of the results with every output and total tokens/s (repeats and summaries) times factor."""
    shutil.copytree(src, dst)
    for path in dst.glob("*.json"):
        data = json.loads(path.read_text())
        for workload in data["workloads"]:
            _lower(workload, factor)
        path.write_text(json.dumps(data))
    return dst


def as_rounds(src: Path, dst: Path, factor: float = 1.0, sweep_id: str = "fixture") -> Path:
    """Each result file's repeats as that many processes of one sweep: round k holds repeat k (its busy
    flag with it), every tokens/s times factor."""
    dst.mkdir(parents=True)
    for path in sorted(src.glob("*.json")):
        data = json.loads(path.read_text())
        n = len(data["workloads"][0]["repeats"])
        for k in range(n):
            one = copy.deepcopy(data)
            one["sweep"] = dict(one.get("sweep") or {},
                                round={"id": sweep_id, "index": k + 1, "of": n, "seed": 0, "position": k + 1})
            for workload in one["workloads"]:
                workload["busy_host_repeats"] = [0] if k in (workload.get("busy_host_repeats") or []) else []
                workload["repeats"] = [workload["repeats"][k]]
                for key, stats in workload["summary"].items():
                    value = workload["repeats"][0][key] if key in workload["repeats"][0] else \
                        workload["repeats"][0][key.rsplit("_", 2)[0] + "_ms"][key.rsplit("_", 2)[1]]
                    workload["summary"][key] = dict(stats, median=value, min=value, max=value, iqr=0.0, n=1,
                                                    spread_pct=0.0)
                _lower(workload, factor)
            (dst / f"{path.stem}_r{k + 1}.json").write_text(json.dumps(one))
    return dst


@pytest.mark.parametrize("sweep", SWEEPS)
def test_a_default_sweep_passes_against_itself(sweep):
    result = runner.invoke(app, ["gate", "-b", str(DATA / sweep), "-c", str(DATA / sweep)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("gate: PASS")
    report = run_gate(DATA / sweep, DATA / sweep)
    assert report.checks and all(c.comparison.n_baseline == c.comparison.n_current == 1 for c in report.checks)
    assert {c.status for c in report.checks} <= {"untestable", "pass"} and not report.inconclusive


@pytest.mark.parametrize("sweep", SWEEPS)
def test_a_default_sweep_with_tokens_per_s_15_percent_lower_cannot_be_judged(sweep, tmp_path):
    current = lowered(DATA / sweep, tmp_path / "current", 0.85)
    result = runner.invoke(app, ["gate", "-b", str(DATA / sweep), "-c", str(current)])
    assert result.exit_code == 3, result.output
    assert result.stdout.startswith("gate: CANNOT JUDGE") and "REGRESSED" not in result.stdout
    report = run_gate(DATA / sweep, current)
    tokens = [c for c in report.checks if c.metric == "output_tokens_per_s"]
    # every point x workload: one process a side, -15% beyond the -5% threshold: inconclusive, not a regression
    assert tokens and all(c.status == "inconclusive" and "1 vs 1 processes: no test" in c.reason for c in tokens)
    assert all(c.comparison.change_pct == pytest.approx(-15.0) for c in tokens)
    assert not report.regressions and {c.metric for c in report.inconclusive} == {"output_tokens_per_s"}
    assert any("too few processes for a verdict" in w for w in report.warnings)


@pytest.mark.parametrize("sweep", SWEEPS)
def test_a_default_sweep_measured_as_rounds(sweep, tmp_path):
    base = as_rounds(DATA / sweep, tmp_path / "a")
    again = as_rounds(DATA / sweep, tmp_path / "b", sweep_id="again")
    same = run_gate(base, again)
    assert same.exit_code == 0 and not same.inconclusive
    # a CPU records no graph: its graph memory is n/a ("not measured"), every other check a tie
    assert {c.comparison.verdict for c in same.checks if c.metric != "graph_memory_bytes"} == {"tie"}
    assert {c.comparison.verdict for c in same.checks if c.metric == "graph_memory_bytes"} == (
        {"n/a"} if "cpu" in sweep else {"tie"})
    assert all(c.comparison.n_baseline == c.comparison.n_current for c in same.checks)
    assert max(c.comparison.n_baseline for c in same.checks) == 3
    slower = as_rounds(DATA / sweep, tmp_path / "slower", 0.85, sweep_id="slower")
    report = run_gate(base, slower)
    tokens = [c for c in report.checks if c.metric == "output_tokens_per_s"]
    assert tokens and all(c.comparison.change_pct == pytest.approx(-15.0) for c in tokens)
    # a drop is a regression exactly where it is significant over the processes and beyond their spread;
    # on these hosts some workloads' processes differ by more than 15%: there the drop is within the noise
    for c in tokens:
        beyond = c.comparison.significant and c.comparison.noise_pct < 15.0 and not any(c.comparison.busy_rounds)
        assert (c.status == "regressed") == beyond, (c.comparison.where, c.reason)
        if c.comparison.noise_pct >= 15.0:
            assert c.status == "pass" and "within noise" in c.reason
    assert report.regressions and any(c.status == "pass" for c in tokens)
    assert {c.metric for c in report.regressions} == {"output_tokens_per_s"} and report.exit_code == 1
    # compare calls the same rows (its minimum effect is the gate's threshold); the gate leaves the peers out
    # (references, one process each in a real sweep), compare does not
    assert {c.comparison.system for c in report.checks} == {"graphbench"}
    b, _ = load_side(base, "baseline")
    s, _ = load_side(slower, "current")
    verdicts = {(c.label, c.system, c.workload): c.verdict
                for c in compare_sets(b, s, metrics=list(DEFAULT_THRESHOLDS)).comparisons
                if c.metric == "output_tokens_per_s" and c.system == "graphbench"}
    assert verdicts == {(c.comparison.label, c.comparison.system, c.comparison.workload):
                        "regressed" if c.status in ("regressed", "inconclusive") else c.comparison.verdict
                        for c in tokens}
