"""Gaps an adversarial pass over the commands that read results folders found (report, compare, gate, plan,
tune): each bad input now ends in one `error:` line with exit code 2 or is skipped by name, and each odd
but valid input works (the style of tests/test_cli_bad_inputs.py)."""

from __future__ import annotations

import json
import math

from graphbench.bench.metrics import summarize
from tests.test_cli_bad_inputs import invoke


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
