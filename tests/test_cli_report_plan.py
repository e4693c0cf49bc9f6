"""`graphbench report` and `graphbench plan` through the CLI (typer CliRunner)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from graphbench.cli.main import app
from graphbench.reports.figures import PNG_SIGNATURE
from tests.test_plan import EXPECTED
from tests.test_report import CHARTS, SYNTHETIC

runner = CliRunner()
SLO_ARGS = ["--slo", "tpot_p99_ms=50", "--slo", "ttft_p99_ms=1000"]


def run(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def test_report_writes_every_file(tmp_path):
    out = tmp_path / "report"
    result = run("report", SYNTHETIC, "-o", out, "--title", "H200 sweep")
    assert result.exit_code == 0, result.output
    for name in ("report.md", "report.html", "summary.csv", *CHARTS):
        assert (out / name).stat().st_size > 0, name
    for name in CHARTS:
        assert (out / name).read_bytes()[:8] == PNG_SIGNATURE
    lines = result.stdout.splitlines()
    for i, name in enumerate(CHARTS, start=1):
        assert f"[{i}/6] {name}: wrote {out / name}" in lines
    assert "best configuration per concurrency" in result.stdout
    assert f"wrote report.md, report.html, summary.csv and 6 charts to {out}" in result.stdout
    assert "warning: skipped" in result.stderr and "9999_future.json" in result.stderr
    assert (out / "report.md").read_text().startswith("# H200 sweep\n")


def test_report_prints_the_headline_whole(tmp_path):
    result = run("report", SYNTHETIC, "-o", tmp_path / "report")
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == 6  # one per concurrency: 1, 4, 8, 16, 32 (O3-default) and 64 (O2-tp2)
    assert all("O3-default" in row and "hf-compile" in row for row in rows[:5]) and "O2-tp2" in rows[5]
    assert "17,920.0" in rows[5]


def test_report_missing_input_is_a_one_line_error(tmp_path):
    result = run("report", tmp_path / "nope", "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [f"error: no such result file or folder: {tmp_path / 'nope'}"]


def test_plan_table(tmp_path):
    result = run("plan", SYNTHETIC, *SLO_ARGS, "--target-rps", "1000")
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert [row.split("│")[1].strip() for row in rows] == list(EXPECTED)
    o3 = rows[0].split("│")
    assert o3[4].strip() == "≥64" and o3[-3].strip() == "≤5" and o3[-2].strip() == "best"
    o2 = rows[list(EXPECTED).index("O2-default")].split("│")
    assert [cell.strip() for cell in o2[1:-1]] == [
        "O2-default", "graphbench", "1", "20", "tpot_p99_ms<=50", "5,000", "78.12", "250", "13",
        "n/a (1 vs 1 processes)"]  # fmt: skip
    assert rows[-1].split("│")[-3].strip() == "none meet the SLOs"
    assert "target 1000 requests/s" in result.stdout


def test_plan_json_and_output_folder(tmp_path):
    out = tmp_path / "plan"
    result = run("plan", SYNTHETIC, "--slo", "tpot_p99_ms=50,ttft_p99_ms=1000", "--target-users", "100",
                 "--format", "json", "-o", out)  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {c["series"]: c["gpus_needed"] for c in data["configurations"]} == {s: e[5] for s, e in EXPECTED.items()}
    assert data["target"] == {"kind": "users", "value": 100.0}
    o2 = next(c for c in data["configurations"] if c["series"] == "O2-default")
    assert o2["max_concurrency"] == 20.0 and o2["output_tokens_per_s_per_gpu"] == 5000.0
    eager = next(c for c in data["configurations"] if c["series"] == "hf-eager")
    assert eager["tokens_per_s_per_user"] is None and eager["gpus_needed"] is None
    for name in ("plan.json", "plan.csv", "plan_pareto.png", "plan_gpus.png"):
        assert (out / name).stat().st_size > 0
    assert "[1/2] plan_pareto.png" in result.stderr and "[2/2] plan_gpus.png" in result.stderr


def test_plan_without_target_has_no_gpu_column():
    result = run("plan", SYNTHETIC, "--slo", "tpot_p99_ms=50")
    assert result.exit_code == 0, result.output
    assert "GPUs needed" not in result.stdout and "O3-default" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--slo", "tpot_p99=50"], "error: unknown SLO metric 'tpot_p99' (did you mean 'tpot_p99_ms'?); choose from"),
        (["--slo", "tpot_p99_ms"], "error: bad SLO 'tpot_p99_ms': expected metric=value, e.g. tpot_p99_ms=50"),
        (["--slo", "tpot_p99_ms=-1"], "error: SLO tpot_p99_ms: limit must be a positive number of ms, got '-1'"),
        ([], "error: give at least one SLO, e.g. --slo tpot_p99_ms=50"),
        (["--slo", "tpot_p99_ms=50", "--target-rps", "5", "--target-users", "5"],
         "error: give one target: --target-rps or --target-users, not both"),
        (["--slo", "tpot_p99_ms=50", "--target-rps", "0"], "error: target requests/s must be a positive number"),
        (["--slo", "tpot_p99_ms=50", "--format", "yaml"], "error: unknown format 'yaml'; choose from table, json"),
    ],
)
def test_plan_bad_input_exits_2_with_one_line(args, message):
    result = run("plan", SYNTHETIC, *args)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("command", ["plan", "report"])
@pytest.mark.parametrize("where", ["file", "below-a-file"])
def test_bad_output_path_fails_before_any_work(tmp_path, command, where):
    afile = tmp_path / "afile"
    afile.write_text("keep me\n")
    out = afile if where == "file" else afile / "sub" / "plan"
    args = ["--slo", "tpot_p99_ms=50"] if command == "plan" else []
    result = run(command, SYNTHETIC, *args, "-o", out)
    assert result.exit_code == 2
    assert result.stdout == ""  # no table, no progress: nothing was computed
    expected = (f"error: output path exists and is not a folder: {afile}" if where == "file"
                else f"error: cannot create output folder {out}: {afile} is not a folder")  # fmt: skip
    assert result.stderr.splitlines() == [expected]  # not even the skipped-file warnings
    assert afile.read_text() == "keep me\n"


def test_plan_output_folder_is_created_with_its_parents(tmp_path):
    out = tmp_path / "a" / "b"
    result = run("plan", SYNTHETIC, "--slo", "tpot_p99_ms=50", "-o", out)
    assert result.exit_code == 0, result.output
    assert (out / "plan.json").is_file()
    assert result.stdout.splitlines()[-1] == f"wrote plan.json, plan.csv, plan_pareto.png, plan_gpus.png to {out}"


def test_help_lists_both_commands():
    result = run("--help")
    assert result.exit_code == 0 and "report" in result.stdout and "plan" in result.stdout
