"""`graphbench tune --from`: the ladder's top and multiple come from the engine the results were measured
with (max_num_seqs, max_num_batched_tokens, num_speculative_tokens, its max capture size); flags win."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphbench.cli.main import app
from graphbench.errors import GraphbenchError
from graphbench.ladders import capture_sizes
from graphbench.ladders.tune_inputs import EngineLimits, engine_limits, tune_bounds
from graphbench.reports.store import write_result

runner = CliRunner()


def result(label: str, histogram: dict[int, int], *, seqs: int, tokens: int = 2048, k: int = 0) -> dict:
    """A measured point as run_point writes it: the resolved config and the ladder it captured."""
    ladder = list(capture_sizes(seqs, num_speculative_tokens=k, max_num_batched_tokens=tokens).sizes)
    return {
        "label": label, "system": "graphbench", "status": "ok", "failure": None, "model": "tiny-llama",
        "config": {
            "scheduler": {"max_num_seqs": seqs, "max_num_batched_tokens": tokens},
            "speculative": {"num_speculative_tokens": k},
            "compilation": {"cudagraph_capture_sizes": ladder, "max_cudagraph_capture_size": max(ladder)},
        },
        "startup": {"capture_sizes": ladder, "cudagraph_mode": {"requested": "FULL", "resolved": "FULL"}},
        "workloads": [{"name": "closed", "kind": "closed",
                       "repeats": [{"batch_size_histogram": {str(n): c for n, c in histogram.items()}}]}],
    }


SEQS64 = {1: 4, 3: 2, 60: 8, 100: 2, 600: 2}  # 18 steps; 600 is a mixed batch above any top


def folder(tmp_path: Path, *results: dict) -> Path:
    for r in results:
        write_result(tmp_path, "h200", r["label"], r)
    return tmp_path


def tune(*args):
    return runner.invoke(app, ["tune", *map(str, args)])


def test_the_top_is_the_measured_engines_max_capture_size(tmp_path: Path) -> None:
    # max_num_seqs 64: the engine's ladder stops at 128 (2 x 64); before, tune proposed a ladder topped at 512.
    results = folder(tmp_path, result("seqs64", SEQS64, seqs=64))
    out = tune("--from", results, "--max-graphs", 3, "--format", "json")
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert (doc["top"], doc["top_from"], doc["multiple_of"]) == (128, "results", 1)
    assert doc["engine"] == {"max_num_seqs": 64, "max_num_batched_tokens": 2048, "num_speculative_tokens": 0,
                             "max_capture_size": 128}
    # [3 60 128]: 1->3 (2 x 4 steps), 100->128 (28 x 2) = 64 tokens over 18 steps; [1 60 128] pays 170,
    # [3 100 128] 328; 600 runs eager (2 of 18 steps)
    assert doc["tuned"]["sizes"] == [3, 60, 128]
    assert doc["tuned"]["expected_padded_tokens"] == pytest.approx(64 / 18)
    assert doc["tuned"]["eager_pct"] == pytest.approx(100 * 2 / 18)
    assert doc["ladders"][1]["sizes"] == list(capture_sizes(64).sizes)
    assert doc["apply"]["graphbench"] == "--capture-sizes 3,60,128"
    table = tune("--from", results, "--max-graphs", 3)
    assert "objective: tokens (padding tokens per step); at most 3 graphs; top 128\n" in table.stdout
    assert ("measured engine: max_num_seqs 64, max_num_batched_tokens 2048, max capture size 128 "
            "(the top is its max capture size)\n") in table.stdout
    assert "warning: 11.11% of batches are above the top 128 and run eager" in table.output


def test_speculative_results_give_rungs_the_engine_keeps(tmp_path: Path) -> None:
    # k = 1: the engine rounds capture sizes up to multiples of 2, so the tuned ladder must be of them:
    # [38 128] (2->38, 37->38, 64->128: 36 + 10 + 64 = 110 over 12 steps), not [37 128] (99/12)
    results = folder(tmp_path, result("spec", {2: 1, 37: 10, 64: 1}, seqs=32, k=1))
    doc = json.loads(tune("--from", results, "--max-graphs", 2, "--format", "json").stdout)
    assert (doc["top"], doc["multiple_of"], doc["tuned"]["sizes"]) == (128, 2, [38, 128])
    assert doc["tuned"]["expected_padded_tokens"] == pytest.approx(110 / 12)
    engine = capture_sizes(32, num_speculative_tokens=1, max_num_batched_tokens=2048, user_sizes=[38, 128])
    assert engine.sizes == (38, 128)  # kept as given: nothing rounded up or dropped, only 128's use said
    assert engine.warnings == ("no decode batch uses the capture sizes above max_num_seqs 32 x decode_query_len 2 "
                               "= 64 tokens: 128 (only mixed (prefill) batches can; FULL_DECODE_ONLY captures no "
                               "graph for them)",)


def test_engines_with_different_tops_are_refused_naming_the_choices(tmp_path: Path) -> None:
    results = folder(tmp_path, result("seqs64", SEQS64, seqs=64), result("seqs256", SEQS64, seqs=256))
    out = tune("--from", results, "--max-graphs", 3)
    assert out.exit_code == 2 and out.stdout == ""
    assert out.output == (
        "error: the results were measured with different ladder tops (max capture size): 128 (seqs64); "
        "512 (seqs256); pick one with --top 128 or --top 512, or give --from one engine's results\n")


def test_flags_win_over_the_results(tmp_path: Path) -> None:
    results = folder(tmp_path, result("seqs64", SEQS64, seqs=64), result("seqs256", SEQS64, seqs=256))
    doc = json.loads(tune("--from", results, "--max-graphs", 3, "--top", 128, "--format", "json").stdout)
    assert (doc["top"], doc["top_from"], doc["engine"]["max_num_seqs"]) == (128, "--top", 64)
    doc = json.loads(tune("--from", results, "--max-graphs", 3, "--max-num-seqs", 16, "--format", "json").stdout)
    assert (doc["top"], doc["top_from"], doc["ladders"][1]["sizes"]) == (32, "--max-num-seqs", [1, 2, 4, 8, 16, 24, 32])
    out = tune("--from", results, "--max-graphs", 3, "--top", 4096, "--multiple-of", 1, "--format", "json")
    assert json.loads(out.stdout)["top"] == 4096
    assert ("warning: the top 4096 is above the measured max_num_batched_tokens 2048: that engine drops "
            "capture sizes above 2048") in out.output


def test_results_without_an_engine_config_keep_the_defaults_and_say_so() -> None:
    bounds = tune_bounds([{"label": "peer", "config": {}}])
    assert (bounds.top, bounds.multiple_of, bounds.max_num_seqs, bounds.top_from, bounds.engine) == (
        512, 1, 256, "default", None)
    assert bounds.warnings == ("the results record no engine config (config.scheduler): the top and the "
                               "comparison ladders assume --max-num-seqs 256",)
    assert tune_bounds().warnings == ()


def test_engine_limits_read_the_ladder_as_recorded() -> None:
    r = result("a", {}, seqs=64, tokens=96, k=2)
    assert engine_limits(r) == EngineLimits(64, 96, 2, 96)  # min(64 x 3 x 2, 512) capped at 96 tokens
    del r["config"]["compilation"]["max_cudagraph_capture_size"]
    r["config"]["compilation"]["cudagraph_capture_sizes"] = None
    r["startup"]["capture_sizes"] = [3, 9, 27]
    assert engine_limits(r) == EngineLimits(64, 96, 2, 27)
    r["startup"]["capture_sizes"] = []  # NONE mode captured nothing: the engine's default top
    assert engine_limits(r).max_capture_size == 96
    assert engine_limits({"config": {"scheduler": {}}}) is None
    with pytest.raises(GraphbenchError, match="different num_speculative_tokens: 0 \\(a\\); 1 \\(b\\); pick one "
                       "with --multiple-of 1 or --multiple-of 2"):
        tune_bounds([result("a", {}, seqs=64), result("b", {}, seqs=64, k=1)])


def test_the_choices_name_at_most_three_results_each() -> None:
    runs = [result(f"a{i}", {}, seqs=64) for i in range(5)] + [result("b", {}, seqs=256)]
    with pytest.raises(GraphbenchError) as error:
        tune_bounds(runs)
    assert str(error.value) == (
        "the results were measured with different ladder tops (max capture size): 128 (a0, a1, a2 and 2 more); "
        "512 (b); pick one with --top 128 or --top 512, or give --from one engine's results")
