"""`graphbench tune --phase decode|mixed`: each phase's ladder tuned from that phase's steps (measured
results keep a histogram per phase; a request trace's replay knows each step's phase), and emitted as the
servers with two ladders take it."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from graphbench.bench.metrics import step_metrics
from graphbench.cli.main import app
from graphbench.runner.records import StepRecord
from graphbench.runner.scheduler import BatchDescriptor
from graphbench.tuning.trace_replay import ReplayLimits, replay_steps
from tests.test_tune_engine_limits import folder, result

runner = CliRunner()
SMALL = ReplayLimits(max_num_seqs=4, max_num_batched_tokens=8, block_size=4)


def tune(*args):
    return runner.invoke(app, ["tune", *map(str, args)])


def test_the_results_keep_a_histogram_per_phase():
    records = [StepRecord(BatchDescriptor(n, r, uniform), 0.001, "FULL", n)
               for n, r, uniform in ((8, 2, False), (2, 2, True), (2, 2, True), (1, 1, True), (3, 1, False))]
    m = step_metrics(records)
    assert m["batch_size_histogram"] == {"1": 1, "2": 2, "3": 1, "8": 1}
    assert m["decode_size_histogram"] == {"1": 1, "2": 2} and m["mixed_size_histogram"] == {"3": 1, "8": 1}


def test_a_replayed_trace_counts_each_phase_apart():
    # prefill of both (8 tokens: mixed), both decode (2), the second alone (1); a prompt of 10 chunked 8 + 2
    assert replay_steps([3, 5], [2, 3], SMALL, phase="decode") == {2: 1, 1: 1}
    assert replay_steps([3, 5], [2, 3], SMALL, phase="mixed") == {8: 1}
    assert replay_steps([10], [2], SMALL, phase="mixed") == {8: 1, 2: 1}
    assert replay_steps([10], [2], SMALL, phase="decode") == {1: 1}


def _phased(label: str, decode: dict[int, int], mixed: dict[int, int], seqs: int) -> dict:
    r = result(label, {**decode, **mixed}, seqs=seqs)
    r["workloads"][0]["repeats"][0].update(
        decode_size_histogram={str(n): c for n, c in decode.items()},
        mixed_size_histogram={str(n): c for n, c in mixed.items()})
    return r


DECODE = {1: 10, 3: 6, 16: 20, 30: 4}
MIXED = {40: 3, 300: 5, 700: 2, 1500: 1}


def test_each_phase_gets_its_own_ladder(tmp_path: Path) -> None:
    results = folder(tmp_path, _phased("p", DECODE, MIXED, seqs=32))
    decode = tune("--from", results, "--phase", "decode", "--max-graphs", 4, "--format", "json")
    assert decode.exit_code == 0, decode.output
    doc = json.loads(decode.stdout)
    # decode steps hold at most 32 tokens here: the top is 32, not the engine's ladder top of 64
    assert doc["top"] == 32 and doc["tuned"]["sizes"] == [1, 3, 16, 32]
    assert "decode steps" in doc["distribution"]["source"]
    mixed = tune("--from", results, "--phase", "mixed", "--max-graphs", 3, "--format", "json")
    assert mixed.exit_code == 0, mixed.output
    doc = json.loads(mixed.stdout)
    # the top is the largest mixed step (1500 tokens), every size allowed; SGLang's token ladder compared
    assert (doc["top"], doc["multiple_of"], doc["top_from"]) == (1500, 1, "mixed steps")
    assert doc["tuned"]["sizes"] == [300, 700, 1500]
    assert {row["name"] for row in doc["ladders"]} == {"tuned", "default", "interactivity", "tokens"}
    emitted = tune("--from", results, "--phase", "mixed", "--max-graphs", 3, "--emit", "sglang")
    assert emitted.stdout.strip() == "--cuda-graph-bs-prefill 300 700 1500 --cuda-graph-max-bs-prefill 1500"
    emitted = tune("--from", results, "--phase", "decode", "--max-graphs", 4, "--emit", "trtllm")
    assert emitted.stdout.strip() == "cuda_graph_config:\n  enable_padding: true\n  batch_sizes: [1, 3, 16, 32]"


def test_what_has_no_phase_is_refused(tmp_path: Path) -> None:
    results = folder(tmp_path / "phased", _phased("p", DECODE, MIXED, seqs=32))
    for phase in ("mixed", "decode"):
        refused = tune("--from", results, "--phase", phase, "--max-graphs", 4, "--emit", "vllm")
        assert refused.exit_code == 2 and "one capture ladder" in refused.output
    out = tune("--model", "closed:16", "--phase", "decode", "--max-graphs", 4)
    assert out.exit_code == 2 and "needs steps that know their phase" in out.output
    old = folder(tmp_path / "old", result("old", DECODE, seqs=32))  # before per-phase histograms
    out = tune("--from", old, "--phase", "decode", "--max-graphs", 4)
    assert out.exit_code == 2 and "decode_size_histogram" in out.output
    out = tune("--from", results, "--phase", "prefill", "--max-graphs", 4)
    assert out.exit_code == 2 and "unknown phase 'prefill'" in out.output


def test_two_ladder_results_top_one_ladder_at_the_mixed_ladders_top():
    from graphbench.ladders.tune_inputs import engine_limits

    r = _phased("p", DECODE, MIXED, seqs=32)
    r["config"]["compilation"].update(cudagraph_capture_sizes=[1, 2, 4, 8, 16, 24, 32], max_cudagraph_capture_size=32,
                                      mixed_capture_sizes=[4, 8, 512, 2048])
    assert engine_limits(r).max_capture_size == 2048  # --phase all: one ladder for every step the engine recorded
    r["config"]["compilation"]["mixed_capture_sizes"] = None
    assert engine_limits(r).max_capture_size == 32


def test_both_phases_in_one_call(tmp_path: Path) -> None:
    results = folder(tmp_path, _phased("p", DECODE, MIXED, seqs=32))
    both = tune("--from", results, "--phase", "both", "--max-graphs", 3, "--format", "json")
    assert both.exit_code == 0, both.output
    docs = json.loads(both.stdout)
    assert docs["decode"]["top"] == 32 and docs["mixed"]["tuned"]["sizes"] == [300, 700, 1500]
    emitted = tune("--from", results, "--phase", "both", "--max-graphs", 3, "--emit", "sglang")
    decode = docs["decode"]["tuned"]["sizes"]
    assert emitted.stdout.strip() == (f"--cuda-graph-bs-decode {' '.join(map(str, decode))} --cuda-graph-max-bs "
                                      f"{decode[-1]} --cuda-graph-bs-prefill 300 700 1500 --cuda-graph-max-bs-prefill 1500")
    table = tune("--from", results, "--phase", "both", "--max-graphs", 3)
    assert table.exit_code == 0 and "decode steps:" in table.stdout and "mixed steps:" in table.stdout
    assert tune("--from", results, "--phase", "both", "--max-graphs", 3, "--emit", "vllm").exit_code == 2
