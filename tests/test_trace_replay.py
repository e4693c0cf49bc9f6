"""Request traces (vLLM bench serve JSON, lists of lengths) replayed through graphbench's scheduler with no
model: exact step histograms for small hand-checked cases, the formats told apart by content, errors
naming the key or line, and `tune --from` on a trace without torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import graphbench
from graphbench.cli.main import app
from graphbench.errors import GraphbenchError
from graphbench.ladders.distributions import load_distribution
from graphbench.ladders.request_trace import is_request_trace, parse_request_trace
from graphbench.tuning.trace_replay import ReplayLimits, replay_files, replay_steps

BENCH = Path(__file__).parent / "data" / "vllm" / "bench-serve-detailed.json"
SMALL = ReplayLimits(max_num_seqs=4, max_num_batched_tokens=8, block_size=4)


def steps(inputs, outputs, limits=SMALL, **kw) -> dict[int, int]:
    return dict(sorted(replay_steps(inputs, outputs, limits, **kw).items()))


def test_all_at_once_prefills_together_then_decodes():
    # step 1: both prompts (3 + 5 = 8); step 2: both decode (the first request's last token);
    # step 3: that token is in flight (asynchronous scheduling), the second decodes alone
    assert steps([3, 5], [2, 3]) == {8: 1, 2: 1, 1: 1}


def test_concurrency_one_runs_the_requests_one_after_the_other():
    # 3, 1 | 5, 1, 1: the second request is sent once the first has finished
    assert steps([3, 5], [2, 3], concurrency=1) == {3: 1, 1: 3, 5: 1}
    sync = ReplayLimits(4, 8, 4, async_scheduling=False)
    assert steps([3, 5], [2, 3], sync, concurrency=1) == {3: 1, 1: 3, 5: 1}


def test_a_long_prompt_is_chunked_by_the_token_budget():
    assert steps([10], [2]) == {8: 1, 2: 1, 1: 1}  # chunk of 8, the last 2 (first token), one decode


def test_max_num_seqs_bounds_a_decode_step():
    # 3 one-token prompts, 2 sequences at most: 2 prefill, 2 decode, then the third alone
    assert steps([1, 1, 1], [2, 2, 2], ReplayLimits(2, 8, 4)) == {2: 2, 1: 2}


def test_a_request_larger_than_the_kv_cache_is_an_error_naming_it():
    with pytest.raises(GraphbenchError, match=r"request 1 \(9 \+ 8 tokens\) needs 5 KV blocks"):
        replay_steps([2, 9], [2, 8], ReplayLimits(4, 8, 4, num_kv_blocks=4))


def test_bench_serve_fixture_replays_to_the_exact_histogram():
    dist, warnings = replay_files([BENCH], SMALL)
    # A (3, 2) and B (5, 3) at concurrency 2: 8, 2, then B alone 1; D (2, 2) once A is done: 2, 1
    assert dict(dist) == {1: 0.4, 2: 0.4, 8: 0.2}
    assert warnings == [f"{BENCH}: 1 failed request(s) left out"]
    assert "3 requests, concurrency 2" in dist.source


def test_request_rate_sends_at_the_mean_spacing_in_steps_of_the_median_itl(tmp_path):
    data = json.loads(BENCH.read_text())
    data["request_rate"] = 100.0  # 10 ms apart; median ITL 5 ms: one request every 2 steps
    path = tmp_path / "rate.json"
    path.write_text(json.dumps(data))
    dist, _ = replay_files([path], SMALL)
    # A: 3, 1 | B sent at step 2: 5, 1 | D at step 4 with B's last decode: 3 | D: 1
    assert {n: round(p * 6) for n, p in dist.items()} == {1: 3, 3: 2, 5: 1}


def test_a_rate_without_latencies_is_ignored_with_a_warning(tmp_path):
    data = json.loads(BENCH.read_text()) | {"request_rate": 5, "itls": []}
    path = tmp_path / "rate.json"
    path.write_text(json.dumps(data))
    _, warnings = replay_files([path], SMALL)
    assert any("request_rate 5/s ignored" in w for w in warnings)


def test_lists_of_lengths_in_json_and_jsonl_whatever_the_suffix(tmp_path):
    listing = tmp_path / "lengths.json"
    listing.write_text(json.dumps([{"input_len": 3, "output_len": 2}, {"input_len": 5, "output_len": 3}]))
    lines = tmp_path / "lengths.txt"
    lines.write_text('{"prompt_len": 3, "output_len": 2}\n# a comment\n{"prompt_len": 5, "output_len": 3}\n')
    for path in (listing, lines):
        dist, _ = replay_files([path], SMALL)
        assert {n: round(p * 3) for n, p in dist.items()} == {8: 1, 2: 1, 1: 1}


def test_a_run_trace_is_read_and_its_send_times_are_said_to_be_dropped(tmp_path):
    # `graphbench run --trace`'s layout (arrival_s, prompt_len, output_len) holds no step time: the replay
    # cannot count its send times in steps, and says it replays them all at once rather than dropping them quietly
    trace = tmp_path / "run_trace.jsonl"
    trace.write_text('{"arrival_s": 0.25, "prompt_len": 5, "output_len": 3}\n'
                     '{"arrival_s": 0.0, "prompt_len": 3, "output_len": 2}\n')
    (parsed,) = parse_request_trace(trace.read_text(), str(trace))
    assert parsed.input_lens == (3, 5) and parsed.arrival_s == (0.0, 0.25)  # in the order of their times
    dist, warnings = replay_files([trace], SMALL)
    assert {n: round(p * 3) for n, p in dist.items()} == {8: 1, 2: 1, 1: 1}
    assert any("arrival_s (sends over 0.25 s) ignored" in w for w in warnings), warnings


@pytest.mark.parametrize("text, message", [
    ('{"input_len": 3, "output_len": 2, "arrival_s": 0}\n{"input_len": 3, "output_len": 2}',
     "1 of 2 requests have arrival_s"),
    ('{"input_len": 3, "output_len": 2, "arrival_s": -1}', r"x\.json:1: arrival_s must be a number of seconds"),
    ('{"input_lens": [3, 5], "output_lens": [2, -1]}', r"x\.json: output_lens\[1\] must be an integer"),
    ('{"input_lens": [3, 5], "output_lens": [2]}', r"x\.json: key output_lens has 1 entries but input_lens has 2"),
    ('{"input_lens": [3], "output_lens": [2], "max_concurrency": 0}', "key max_concurrency must be"),
    ('{"input_lens": [3], "output_lens": [2], "request_rate": "fast"}', "key request_rate must be"),
    ('{"completed": 4, "request_throughput": 1.0, "total_input_tokens": 9}', "rerun `vllm bench serve` with"),
    ('{"input_len": 3, "output_len": 2}\n{"input_len": 3, "output_len": 2', r"x\.json:2: invalid JSON"),
    ('{"input_len": 3, "output_len": 2}\n{"input_len": 0, "output_len": 2}', r"x\.json:2: input_len must be"),
    ('[{"input_len": 3, "output_len": 2}, {"output_len": 2}]', "item 1: a request needs input_len"),
])
def test_malformed_traces_are_one_error_naming_the_key_or_line(text, message):
    assert is_request_trace(text)
    with pytest.raises(GraphbenchError, match=message):
        parse_request_trace(text, "x.json")


def test_batch_size_files_are_not_request_traces():
    assert not is_request_trace('{"1": 3, "8": 1}')
    assert not is_request_trace('{"batch_size": 4}\n')
    assert not is_request_trace("batch_size,count\n1,2\n")


def test_load_distribution_points_a_trace_to_the_replay():
    with pytest.raises(GraphbenchError, match="a per-request trace"):
        load_distribution(BENCH)


def test_tune_from_and_distribution_replay_a_trace(tmp_path):
    args = ["--max-graphs", "2", "--max-num-seqs", "4", "--max-num-batched-tokens", "8", "--block-size", "4",
            "--format", "json"]
    for source in (["--from", str(BENCH)], ["--distribution", str(BENCH)]):
        result = CliRunner().invoke(app, ["tune", *source, *args])
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        assert doc["distribution"]["source"].startswith(f"replay of {BENCH}")
        assert doc["tuned"]["sizes"] == [2, 8]
    bad = tmp_path / "bad.json"
    bad.write_text('{"input_lens": [3], "output_lens": ["x"]}')
    result = CliRunner().invoke(app, ["tune", "--from", str(bad), "--max-graphs", "2"])
    assert result.exit_code == 2 and "output_lens[0] must be an integer" in result.output


def test_tune_replays_a_trace_without_importing_torch():
    src = str(Path(graphbench.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom graphbench.cli.main import app\n"
        f"r = CliRunner().invoke(app, ['tune', '--from', {str(BENCH)!r}, '--max-graphs', '2'])\n"
        "assert r.exit_code == 0, r.output\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "assert 'graphbench.runner.scheduler' in sys.modules, 'no replay ran'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)


def test_replay_only_options_warn_when_the_source_is_no_trace() -> None:
    result = CliRunner().invoke(app, ["tune", "--model", "closed:8", "--max-graphs", "2", "--block-size", "32"])
    assert result.exit_code == 0, result.output
    assert "shape a request trace's replay only" in result.stderr
    quiet = CliRunner().invoke(app, ["tune", "--model", "closed:8", "--max-graphs", "2"])
    assert quiet.exit_code == 0 and "replay only" not in quiet.stderr


def test_a_timed_trace_run_replays_at_its_recorded_send_times(tmp_path):
    # `vllm bench serve --dataset-name timed_trace` (vllm-project/vllm PR #39795; vllm/benchmarks/serve.py at
    # 009e6d4a) sends each request at its trace timestamp while result_json keeps request_rate "inf" and
    # max_concurrency null; start_times (PR #32667) records each send. 62.5 ms apart at a 15.625 ms median ITL:
    # sent at steps 0, 4 and 8, each request runs alone (not all three prefilled at once)
    timed = BENCH.parent / "bench-serve-timed-trace.json"
    dist, warnings = replay_files([timed], SMALL)
    # A: 3, 1 | B at step 4: 5, 1, 1 | C at step 8: 2, 1
    assert {n: round(p * 7) for n, p in dist.items()} == {1: 4, 2: 1, 3: 1, 5: 1} and warnings == []
    # without latencies the send times cannot be counted in steps: all at once, with a warning
    path = tmp_path / "timed.json"
    path.write_text(json.dumps(json.loads(timed.read_text()) | {"itls": [[], [], []]}))
    dist, warnings = replay_files([path], SMALL)
    assert 8 in dist and any("start_times (sends over 0.125 s) ignored" in w for w in warnings)


def test_an_sglang_bench_serving_result_is_read_and_its_unreadable_kinds_say_why(tmp_path):
    # sglang python/sglang/bench_serving.py: one JSON line a run, the per-request lists only with
    # --output-details, request_rate float("inf") dumped as Infinity, or "trace" with --use-trace-timestamps
    sglang = BENCH.parent.parent / "sglang" / "bench-serving-output-details.jsonl"
    (trace,) = parse_request_trace(sglang.read_text(), str(sglang))
    assert trace.input_lens == (3, 5, 4) and trace.output_lens == (2, 3, 3)
    assert trace.request_rate is None and trace.max_concurrency == 2 and trace.seconds_per_step == 0.005
    record = json.loads(sglang.read_text())
    summary = {k: v for k, v in record.items() if k not in ("input_lens", "output_lens", "ttfts", "itls",
                                                             "generated_texts", "errors")}
    with pytest.raises(GraphbenchError, match="rerun `python -m sglang.bench_serving` with --output-details"):
        parse_request_trace(json.dumps(summary), "s.jsonl")
    with pytest.raises(GraphbenchError, match=r"sent at its trace's timestamps \(request_rate \"trace\"\)"):
        parse_request_trace(json.dumps(record | {"request_rate": "trace"}), "s.jsonl")


def test_bench_serve_quirks_across_vllm_versions_are_read_as_vllm_wrote_them(tmp_path):
    # vllm/benchmarks/serve.py (009e6d4a) and benchmarks/benchmark_serving.py: a failed request keeps the HTTP
    # response's reason as its error, "" where the response gave none, with 0 tokens and ttft 0.0 (no first
    # token); a success's input_lens is the client's count, 0 for an empty text in a chat template
    record = {"completed": 3, "failed": 1, "request_throughput": 1.0, "total_input_tokens": 9,
              "request_rate": "inf", "max_concurrency": None, "input_lens": [3, 5, 0, 4],
              "output_lens": [2, 0, 3, 0], "ttfts": [0.01, 0.0, 0.02, 0.03], "errors": ["", "", "", ""],
              "itls": [[0.004], [], [0.004, 0.004], []], "generated_texts": ["ab", "", "cde", ""]}
    (trace,) = parse_request_trace(json.dumps(record), "r.json")
    # request 1 failed (no error text, no first token); request 3 ran and counted no tokens: 1
    assert trace.input_lens == (3, 1, 4) and trace.output_lens == (2, 3, 1) and trace.num_failed == 1
    # benchmark_serving.py of early 2024 spelt request_throughput "request_inthroughput" and saved no lists
    old = '{"completed": 4, "request_inthroughput": 1.0, "total_input_tokens": 9, "request_rate": "inf"}'
    assert is_request_trace(old)
    with pytest.raises(GraphbenchError, match="old.json: a vLLM bench serve result without per-request lengths"):
        parse_request_trace(old, "old.json")


def test_tune_from_a_bench_serve_result_it_cannot_read_says_why(tmp_path, monkeypatch):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "run.json").write_text(BENCH.read_text())
    result = CliRunner().invoke(app, ["tune", "--from", str(tmp_path / "runs"), "--max-graphs", "2"])
    assert result.exit_code == 2
    assert "run.json is a request trace (a `vllm bench serve` result): give it as a file of its own" in result.output
    monkeypatch.setattr("graphbench.tuning.trace_replay.MAX_TRACE_BYTES", 1 << 10)  # (1 GiB: a file too big)
    result = CliRunner().invoke(app, ["tune", "--from", str(tmp_path / "runs" / "run.json"), "--max-graphs", "2"])
    assert result.exit_code == 2 and "over the 0 MiB a trace is read up to" in result.output
