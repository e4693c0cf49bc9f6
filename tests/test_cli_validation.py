"""`graphbench run` and `sweep` reject bad workload options before anything starts (exit 2, one line)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from graphbench.cli.main import app
from graphbench.cli.run import build_workloads

runner = CliRunner()


def _trace(tmp_path, *rows: tuple[float, int, int]):
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(f'{{"arrival_s": {a}, "prompt_len": {p}, "output_len": {o}}}\n' for a, p, o in rows))
    return str(path)


def test_rates_or_a_trace_alone_replace_the_default_closed_loops(tmp_path):
    def names(concurrency, rate, trace):
        return [w.name for w in build_workloads(concurrency, rate, trace, "16", "4", None, 0)]

    trace = _trace(tmp_path, (0.0, 8, 4), (0.5, 16, 2))
    # none given: the default traffic, closed loops at off-rung levels and one Poisson point (concurrency 12
    # went to make room for three rounds of every point)
    assert names(None, None, None) == ["closed-c1", "closed-c6", "closed-c64", "poisson-r64"]
    assert names(None, "4,16", None) == ["poisson-r4", "poisson-r16"]
    assert names(None, None, trace) == ["trace-trace"]
    assert names("2", "4", trace) == ["closed-c2", "poisson-r4", "trace-trace"]  # asked for: all of them


@pytest.mark.parametrize("args, message", [
    (["--trace", "/nope/t.jsonl"], "error: trace file not found: /nope/t.jsonl"),
    (["--concurrency", "0"], "error: --concurrency levels must be >= 1, got 0"),
    (["--num-requests", "0"], "error: --num-requests must be >= 1, got 0"),
    (["--request-rate", "0"], "error: --request-rate must be > 0, got 0"),
    (["--repeats", "0"], "error: --repeats must be in 1..1000, got 0"),
    (["--concurrency", "1", "--prompt-len", "2040", "--output-len", "100"],
     "error: --prompt-len 2040 + --output-len 100 reach 2140 tokens, over max_model_len 2048 (--max-model-len)"),
    (["--concurrency", "1", "--prompt-len", "uniform:100-2000", "--output-len", "64", "--max-model-len", "1024"],
     "error: --prompt-len uniform:100-2000 + --output-len 64 reach 2064 tokens, over max_model_len 1024 (--max-model-len)"),
])
def test_run_refuses_before_starting_an_engine(args, message):
    result = runner.invoke(app, ["run", "--device", "cpu", "-O0", *args])
    assert result.exit_code == 2
    assert result.output.strip() == message


def test_run_checks_a_traces_lengths_and_its_results_folder(tmp_path):
    trace = _trace(tmp_path, (0.0, 8, 4), (0.1, 2000, 100))
    result = runner.invoke(app, ["run", "--device", "cpu", "-O0", "--trace", trace])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: trace {trace} has a request of 2100 tokens, over max_model_len 2048 (--max-model-len)"
    (tmp_path / "afile").write_text("")
    result = runner.invoke(app, ["run", "--device", "cpu", "-O0", "--concurrency", "1", "--results", str(tmp_path / "afile" / "x")])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: results folder {tmp_path / 'afile' / 'x'}: {tmp_path / 'afile'} exists and is not a folder"


@pytest.mark.parametrize("args, message", [
    (["--repeats", "-3"], "error: --repeats must be in 1..1000, got -3"),
    (["--concurrency", "x"], "error: --concurrency must be comma-separated integers like 1,2,4; got 'x'"),
    (["--prompt-len", "-1"], "error: --prompt-len must be at least 1 token, got -1"),
    (["--num-requests", "-1"], "error: --num-requests must be >= 1, got -1"),
    (["--num-requests", "0"], "error: --num-requests must be >= 1, got 0"),
    (["--order-seed", "-1"], "error: --order-seed must be in 0..2**63-1, got -1"),
    (["--prompt-len", "0"], "error: --prompt-len must be at least 1 token, got 0"),
    (["--target-repeat-s", "-1"], "error: --target-repeat-s must be in 0..3600 seconds, got -1.0"),
    (["--timeout", "0"], "error: --timeout must be in (0, 604800] seconds, got 0"),
    (["--gpus", "0,1"], "error: --gpus 0,1: no CUDA GPU is visible (--device cpu)"),
    (["--max-num-seqs", "0"], "error: --max-num-seqs must be >= 1, got 0"),
])
def test_sweep_refuses_what_its_points_would_refuse_even_in_a_dry_run(args, message, tmp_path):
    result = runner.invoke(app, ["sweep", "--device", "cpu", "--levels", "0", "--results", str(tmp_path), "--dry-run", *args])
    assert result.exit_code == 2
    assert result.output.strip() == message


def test_sweep_file_workload_keys_are_checked(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text("[workload]\nconcurrenc = [1]\n")
    result = runner.invoke(app, ["sweep", "--device", "cpu", "--sweep-file", str(path), "--dry-run"])
    assert result.exit_code == 2
    assert " ".join(result.output.split()) == (
        f"error: {path}: unknown key workload.concurrenc (did you mean 'concurrency'?); choose from concurrency, "
        "request_rate, prompt_len, output_len, num_requests, repeats, target_repeat_s, prompt_kind, lora_share")
    path.write_text("[workload]\nrequest_rate = [2, 8]\n")  # open loop only: no default closed loops added
    result = runner.invoke(app, ["sweep", "--device", "cpu", "--levels", "0", "--sweep-file", str(path), "--dry-run",
                                 "--results", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "--request-rate 2,8" in " ".join(result.output.split()) and "--concurrency" not in result.output


@pytest.mark.parametrize("args, message", [
    (["sweep", "--dry-run", "--timeout", "nan"], r"error: --timeout must be in (0, 604800] seconds, got nan"),
    (["sweep", "--dry-run", "--levels", ""], "error: --levels names nothing (got ''): give at least one, e.g. --levels 2"),
    (["sweep", "--dry-run", "--target-repeat-s", "nan"], "error: --target-repeat-s must be in 0..3600 seconds, got nan"),
    (["sweep", "--dry-run", "--repeats", "100000000"], "error: --repeats must be in 1..1000, got 100000000"),
    (["sweep", "--results", "/etc/passwd", "--levels", "0", "--ladders", "default"],
     "error: results folder /etc/passwd: /etc/passwd exists and is not a folder"),
    (["tune", "--model", "uniform:1-1000000000000", "--max-graphs", "4"],
     "error: bad model 'uniform:1-1000000000000': expected uniform:A-B with 1 <= A <= B <= 1048576"),
    (["run", "--request-rate", "inf"], "error: a poisson workload needs a --request-rate in [0.001, 1e+06] requests/s, got inf"),
])
def test_unbounded_or_non_finite_options_are_one_line_errors(args, message):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1] == message


def test_a_dry_run_counts_the_processes_that_will_run(tmp_path):
    # on the CPU -O1 and -O2 (x both ladders) are one engine: 3 engines x 5 rounds (the CPU's default) = 15
    # processes (a sweep of these 8 labels writes 15 result files), not the 8 labels + 4 later rounds of each
    result = runner.invoke(app, ["sweep", "--device", "cpu", "--results", str(tmp_path), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "8 points, 15 processes (5 round(s) of each graphbench point;" in " ".join(result.output.split())
    result = runner.invoke(app, ["sweep", "--device", "cpu", "--results", str(tmp_path), "--dry-run", "--rounds", "3"])
    assert "8 points, 9 processes (3 round(s) of each graphbench point;" in " ".join(result.output.split())


def test_a_sweep_into_a_folder_another_sweep_holds_is_one_line(tmp_path):
    from graphbench.bench.sweep_lock import sweep_lock

    # it printed the CPU banner and an empty progress bar before the refusal
    results = tmp_path / "results"
    with sweep_lock(results):
        result = runner.invoke(app, ["sweep", "--device", "cpu", "--levels", "0", "--ladders", "default",
                                     "--results", str(results)])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("error: another sweep (pid ") and len(result.stderr.strip().splitlines()) == 1
