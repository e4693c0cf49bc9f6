"""`graphbench run --trace` takes a `vllm bench serve --save-result --save-detailed` result: its successful
requests replayed at their recorded send times (start_times, as vLLM's benchmarks/serve.py saves them)."""

from __future__ import annotations

import json

import pytest

from graphbench.bench.workloads import load_trace
from graphbench.errors import GraphbenchError


def bench_result(**changes) -> dict:
    """A result with the keys serve.py writes: four requests sent at 100.0, 100.5, 100.25 and 101.0 s on the
    client's perf_counter, the third failed (an error, 0 tokens)."""
    result = {"date": "20261205-021500", "backend": "vllm", "model_id": "m", "request_rate": 8.0,
              "burstiness": 1.0, "max_concurrency": None, "duration": 2.0, "completed": 3, "failed": 1,
              "total_input_tokens": 400, "total_output_tokens": 96, "request_throughput": 1.5,
              "input_lens": [100, 120, 80, 200], "output_lens": [32, 16, 0, 48],
              "ttfts": [0.01, 0.02, 0.0, 0.03], "itls": [[0.004] * 31, [0.004] * 15, [], [0.004] * 47],
              "start_times": [100.5, 100.0, 100.25, 101.0], "generated_texts": ["", "", "", ""],
              "errors": ["", "", "timeout", ""]}
    result.update(changes)
    return result


def write(tmp_path, data) -> str:
    path = tmp_path / "bench.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_successful_requests_replay_at_their_send_times(tmp_path):
    specs = load_trace(write(tmp_path, bench_result()))
    assert [(s.arrival_s, s.prompt_len, s.output_len) for s in specs] == [(0.0, 120, 16), (0.5, 100, 32), (1.0, 200, 48)]


def test_all_at_once_without_send_times_only_where_vllm_sent_them_so(tmp_path):
    specs = load_trace(write(tmp_path, bench_result(start_times=None, request_rate="inf")))
    assert [s.arrival_s for s in specs] == [0.0, 0.0, 0.0] and [s.prompt_len for s in specs] == [100, 120, 200]
    with pytest.raises(GraphbenchError, match="without start_times .* 8.0 requests/s .* send times are unknown"):
        load_trace(write(tmp_path, {k: v for k, v in bench_result().items() if k != "start_times"}))
    with pytest.raises(GraphbenchError, match="max_concurrency 4"):
        load_trace(write(tmp_path, bench_result(start_times=None, request_rate="inf", max_concurrency=4)))


def test_a_success_that_counted_no_tokens_ran_its_prefill_and_one_token(tmp_path):
    # vLLM counts a success's tokens from its text; an end-of-sequence token at once leaves 0
    specs = load_trace(write(tmp_path, bench_result(output_lens=[32, 0, 0, 48])))
    assert [(s.prompt_len, s.output_len) for s in specs] == [(120, 1), (100, 32), (200, 48)]
    # without recorded errors, 0 tokens is the only sign of a failure
    specs = load_trace(write(tmp_path, bench_result(output_lens=[32, 0, 0, 48], errors=None)))
    assert [(s.prompt_len, s.output_len) for s in specs] == [(100, 32), (200, 48)]


@pytest.mark.parametrize("changes, message", [
    ({"start_times": [100.0, 100.5]}, "start_times must be a list of 4 send times"),
    ({"start_times": [100.0, "soon", 100.25, 101.0]}, r"start_times\[1\] holds 'soon'"),
    ({"start_times": [100.0, 100.5, 100.25, 2e9]}, "arrival_s must be a number of seconds in"),
    ({"errors": ["timeout", "Bad Request", "timeout", "timeout"]}, "no successful request"),
    ({"output_lens": [0, 0, 0, 0], "errors": None}, "no successful request"),
    ({"input_lens": [100, 120, 80, 10**7]}, "prompt_len must be an integer in 1..1048576"),
])
def test_a_bad_bench_result_is_one_error_naming_the_file(tmp_path, changes, message):
    path = write(tmp_path, bench_result(**changes))
    with pytest.raises(GraphbenchError, match=message) as err:
        load_trace(path)
    assert path in str(err.value)


def test_appended_results_are_replayed_one_a_file(tmp_path):
    lines = json.dumps(bench_result()) + "\n" + json.dumps(bench_result(request_rate=16.0)) + "\n"
    with pytest.raises(GraphbenchError, match="holds 2 vLLM bench serve results"):
        load_trace(write(tmp_path, lines))


def test_a_trace_is_parsed_once_a_version_of_its_file(tmp_path, monkeypatch):
    """run reads a trace three times (checked before start-up, its lengths, the replay): one parse."""
    from pathlib import Path

    path = write(tmp_path, bench_result())
    reads = []
    real_read = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: reads.append(self) or real_read(self, *a, **k))
    first, again = load_trace(path), load_trace(path)
    assert first == again and len(first) == 3 and len(reads) == 1
    again.pop()  # a caller's list is its own
    assert len(load_trace(path)) == 3 and len(reads) == 1
    write(tmp_path, bench_result(output_lens=[32, 16, 0, 480], errors=None))  # a new version: parsed again
    assert [s.output_len for s in load_trace(path)][-1] == 480 and len(reads) == 2


def test_an_sglang_result_without_send_times_is_named_sglang(tmp_path):
    from pathlib import Path

    sglang = Path(__file__).parent / "data" / "sglang" / "bench-serving-output-details.jsonl"
    with pytest.raises(GraphbenchError) as caught:  # (max_concurrency 2: its send order is unknown)
        load_trace(str(sglang))
    message = str(caught.value)
    assert "a result of SGLang bench_serving without start_times" in message and "vLLM" not in message


def test_a_graphbench_result_is_named_as_one_wherever_a_trace_or_distribution_is_read(tmp_path):
    from graphbench.ladders.distributions import load_distribution
    from graphbench.reports.store import write_result
    from tests.test_gate import make_result

    path = write_result(tmp_path / "results", "h200", "O2", make_result("O2"))
    with pytest.raises(GraphbenchError, match=r"a graphbench result, not a request trace: give it to `graphbench tune --from`"):
        load_trace(str(path))
    with pytest.raises(GraphbenchError, match=r"a graphbench result, not batch sizes: give it to `graphbench tune --from`"):
        load_distribution(str(path))


@pytest.mark.parametrize("throughput", ["request_throughput", "request_inthroughput"])  # (early 2024's spelling)
def test_a_result_saved_without_its_per_request_lists_asks_for_them(tmp_path, throughput):
    # `--save-result` alone writes the summary only: named as a bench serve result, not as a trace of wrong keys
    summary = {k: v for k, v in bench_result().items() if not isinstance(v, list) and k != "request_throughput"}
    with pytest.raises(GraphbenchError, match="without per-request lengths .* --save-detailed"):
        load_trace(write(tmp_path, dict(summary, **{throughput: 1.5})))
