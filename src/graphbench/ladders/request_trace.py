"""Per-request benchmark outputs as a trace of (input length, output length) to replay (pure Python).

Two layouts, told apart by their content, not by their suffix:

- vLLM's `vllm bench serve --save-result --save-detailed` JSON (vllm/benchmarks/serve.py): one object
  with per-request lists ``input_lens``, ``output_lens`` (the tokens each request actually generated; 0
  for a failed one), ``errors``, ``itls`` (each request's inter-token latencies, seconds) and the traffic
  settings ``request_rate`` (requests/s, or "inf") and ``max_concurrency`` (null: unbounded); newer vLLM
  also saves ``start_times`` (each request's send time on the client's clock, seconds). With
  ``--append-result`` the file holds one such object a line: each is a trace of its own. Without
  ``--save-detailed`` vLLM drops the per-request lists: that file is an error saying so, as is a pooling
  run's (input_lens, no output_lens) and a ramp-up run's (``ramp_up_strategy``: its rate changes through
  the run, while ``request_rate`` stays "inf").
- SGLang's ``python -m sglang.bench_serving --output-details`` JSONL (one result a line, the same per-request
  lists, ``request_rate`` a number, ``Infinity`` or "trace"): read alike; without --output-details, or sent at
  a trace's timestamps (which it does not save), it is an error saying so.
- Plain lists of lengths: a JSON array, or JSONL, of objects with ``input_len`` (or ``prompt_len``) and
  ``output_len``, and optionally ``arrival_s`` on every one (`graphbench run --trace`'s layout: send times in
  seconds; they record no step time, so a replay in steps cannot place them and says so).
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass
from typing import Any

from graphbench.errors import GraphbenchError
from graphbench.ladders.jsonl import json_lines, loads

INPUT_KEYS = ("input_len", "prompt_len")
MAX_LEN = 1 << 24  # tokens of one request's prompt
MAX_OUTPUT_LEN = 1 << 20  # tokens one request generates: the engine's cap (runner/request.py's MAX_OUTPUT_TOKENS)
BENCH_KEYS = ("request_throughput", "completed", "total_input_tokens")  # a bench serve result's summary
OLD_THROUGHPUT = "request_inthroughput"  # request_throughput as benchmark_serving.py spelt it in early 2024
# keys only SGLang's `python -m sglang.bench_serving` result has (sglang/bench_serving.py: its JSONL line, the
# per-request lists only with --output-details, request_rate "trace" with --use-trace-timestamps)
SGLANG_KEYS = ("dataset_name", "total_output_tokens_retokenized")


@dataclass(frozen=True, slots=True)
class RequestTrace:
    """The requests of one benchmark run, in the order they were sent, and how they were sent."""

    input_lens: tuple[int, ...]
    output_lens: tuple[int, ...]
    source: str
    max_concurrency: int | None = None  # None: every request sent at once
    request_rate: float | None = None  # requests per second; None: all at once ("inf")
    seconds_per_step: float | None = None  # the median recorded inter-token latency
    num_failed: int = 0  # failed requests (vLLM: an error, no output), left out
    arrival_s: tuple[float, ...] | None = None  # each request's send time after the first's (start_times)
    tool: str = "vLLM bench serve"  # what wrote it: "vLLM bench serve", "SGLang bench_serving" or "request lengths"

    def __post_init__(self) -> None:
        if self.request_rate is not None and self.seconds_per_step and len(self) > 1:
            # the replay sends request i at i / rate / seconds_per_step steps: a number it can count to
            last = (len(self) - 1) / self.request_rate / self.seconds_per_step
            if not math.isfinite(last):
                raise GraphbenchError(f"{self.source}: request_rate {self.request_rate:g}/s at a median inter-token "
                                      f"latency of {self.seconds_per_step:g} s sends the requests too far apart "
                                      "to replay (arrival steps overflow)")

    def __len__(self) -> int:
        return len(self.input_lens)


_RESULT_KIND_FIELD = re.compile(r'"kind"\s*:\s*"graphbench-result"')  # (written with sorted keys: anywhere)


def check_not_a_result(text: str, name: str, what: str) -> None:
    """GraphbenchError where the text is a graphbench result given as a trace or distribution (what)."""
    if _RESULT_KIND_FIELD.search(text):
        raise GraphbenchError(f"{name}: a graphbench result, not {what}: give it to `graphbench tune --from`, which "
                              "reads its batch sizes")


def is_request_trace(text: str) -> bool:
    """Whether the text looks like a bench serve result or a list of request lengths (a cheap sniff)."""
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return False
    if is_bench_serve_text(text):
        return True
    return '"output_len"' in text and any(f'"{k}"' in text for k in INPUT_KEYS)


def is_bench_serve_text(text: str) -> bool:
    """Whether a file's text holds a bench serve result (its per-request lists, or its summary alone)."""
    return '"input_lens"' in text or _bench_summary(lambda key: f'"{key}"' in text)


def _bench_summary(has) -> bool:
    """Whether a bench serve result's summary keys are there (has: key -> bool), in any vLLM's spelling."""
    return all(has(k) for k in BENCH_KEYS[1:]) and (has(BENCH_KEYS[0]) or has(OLD_THROUGHPUT))


def parse_request_trace(text: str, name: str) -> list[RequestTrace]:
    """The traces in a file's text: one per bench serve result, one for a list of request lengths."""
    check_not_a_result(text, name, "a request trace")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if _json_line(text.lstrip().split("\n", 1)[0]):  # JSON Lines (`--append-result`: one result a line)
            return _parse_lines(text, name)
        raise GraphbenchError(f"{name}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    except (ValueError, RecursionError):  # an int past 4300 digits, or nesting past the recursion limit
        loads(text, name)  # raises it as a GraphbenchError naming the file
        raise
    if isinstance(data, dict) and "output_len" in data and "input_lens" not in data:  # one request's lengths
        return [_from_pairs([_lengths(data, f"{name}:1")], name)]
    if isinstance(data, dict):
        return [_bench_result(data, name)]
    if isinstance(data, list):
        pairs = [_lengths(item, f"{name}: item {i}") for i, item in enumerate(data)]
        return [_from_pairs(pairs, name)]
    raise GraphbenchError(f"{name}: expected a vLLM bench serve result or a list of request lengths")


def _json_line(line: str) -> bool:
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return False
    return True


def _parse_lines(text: str, name: str) -> list[RequestTrace]:
    traces: list[RequestTrace] = []
    pairs: list[Request] = []
    for lineno, record in json_lines(text, name):
        where = f"{name}:{lineno}"
        if isinstance(record, dict) and ("input_lens" in record or _bench_summary(record.__contains__)):
            traces.append(_bench_result(record, where))
        else:
            pairs.append(_lengths(record, where))
        if traces and pairs:
            raise GraphbenchError(f"{where}: mixes bench serve results with request lengths: give one kind")
    if not traces and not pairs:
        raise GraphbenchError(f"{name}: no requests in the file")
    return traces or [_from_pairs(pairs, name)]


Request = tuple[int, int, "float | None"]  # input length, output length, send time (arrival_s; None: not given)


def _lengths(record: object, where: str) -> Request:
    if not isinstance(record, dict):
        raise GraphbenchError(f"{where}: expected an object with input_len (or prompt_len) and output_len")
    key = next((k for k in INPUT_KEYS if k in record), None)
    if key is None or "output_len" not in record:
        raise GraphbenchError(f"{where}: a request needs input_len (or prompt_len) and output_len")
    arrival = None
    if "arrival_s" in record:  # `graphbench run --trace`'s layout: the request's send time, seconds
        arrival = _number(record["arrival_s"])
        if arrival is None or not 0 <= arrival < math.inf:
            raise GraphbenchError(f"{where}: arrival_s must be a number of seconds >= 0, got {record['arrival_s']!r:.60}")
    return (_count(record[key], where, key, 1), _count(record["output_len"], where, "output_len", 1, MAX_OUTPUT_LEN),
            arrival)


def _from_pairs(requests: list[Request], name: str) -> RequestTrace:
    if not requests:
        raise GraphbenchError(f"{name}: no requests in the file")
    timed = sum(arrival is not None for _, _, arrival in requests)
    if 0 < timed < len(requests):
        raise GraphbenchError(f"{name}: {timed} of {len(requests)} requests have arrival_s: give it on every one, "
                              "or on none")
    arrival_s = None
    if timed:  # sent in the order of their times, as `graphbench run --trace` replays them
        requests = sorted(requests, key=lambda r: r[2])
        first = requests[0][2]
        arrival_s = tuple(t - first for _, _, t in requests)
    return RequestTrace(tuple(p for p, _, _ in requests), tuple(o for _, o, _ in requests), name,
                        arrival_s=arrival_s, tool="request lengths")


def _bench_result(data: dict[str, Any], name: str) -> RequestTrace:
    """One `vllm bench serve` result (see the module docstring)."""
    if "input_lens" in data and "output_lens" not in data:  # serve.py's pooling result keeps input_lens only
        raise GraphbenchError(f"{name}: a vLLM bench serve result with input_lens but no output_lens (a pooling "
                              "or embedding run): it generated no tokens, so there is nothing to replay")
    sglang = all(key in data for key in SGLANG_KEYS)
    if "input_lens" not in data or "output_lens" not in data:
        if sglang:
            raise GraphbenchError(f"{name}: an SGLang bench_serving result without per-request lengths (input_lens, "
                                  "output_lens): rerun `python -m sglang.bench_serving` with --output-details")
        raise GraphbenchError(f"{name}: a vLLM bench serve result without per-request lengths (input_lens, "
                              "output_lens): rerun `vllm bench serve` with --save-result --save-detailed")
    if sglang and data.get("request_rate") == "trace":  # --use-trace-timestamps: sent at times it does not save
        raise GraphbenchError(f"{name}: an SGLang bench_serving run sent at its trace's timestamps (request_rate "
                              "\"trace\"), which the result does not record: a replay at one rate (or all at once) "
                              "misreads it; replay the trace's own lengths and timestamps instead")
    if data.get("ramp_up_strategy") is not None:  # serve.py then keeps request_rate "inf"
        raise GraphbenchError(f"{name}: a ramp-up run (ramp_up_strategy {data['ramp_up_strategy']!r}, "
                              f"{data.get('ramp_up_start_rps')} to {data.get('ramp_up_end_rps')} requests/s): its "
                              "rate changes through the run, which a replay at one rate (or all at once) misreads")
    inputs, outputs = data["input_lens"], data["output_lens"]
    for key, values in (("input_lens", inputs), ("output_lens", outputs)):
        if not isinstance(values, list):
            raise GraphbenchError(f"{name}: key {key} must be a list of token counts, got {type(values).__name__}")
    if len(inputs) != len(outputs):
        raise GraphbenchError(f"{name}: key output_lens has {len(outputs)} entries but input_lens has {len(inputs)}")
    errors = _errors(data.get("errors"), len(inputs), name)
    starts = _start_times(data.get("start_times"), len(inputs), name)
    ttfts = data.get("ttfts") if isinstance(data.get("ttfts"), list) and len(data["ttfts"]) == len(inputs) else None
    kept: list[tuple[int, int, float | None]] = []
    for i, (n_in, n_out) in enumerate(zip(inputs, outputs)):
        n_out = _count(n_out, name, f"output_lens[{i}]", 0, MAX_OUTPUT_LEN)
        if _failed(errors, i, n_out, ttfts):
            continue
        # a success counted 0 tokens when its text tokenized to nothing (an end-of-sequence token at once): the
        # server still ran its prefill and sampled that one token; a prompt counted 0 tokens on the client (an
        # empty text in a chat template, an image-only prompt) still prefilled at least one on the server
        kept.append((max(_count(n_in, name, f"input_lens[{i}]", 0), 1), max(n_out, 1), starts[i] if starts else None))
    if not kept:
        raise GraphbenchError(f"{name}: no successful request (every request has an error, or output_lens 0 "
                              "where no errors are recorded)")
    first = min(t for _, _, t in kept) if starts else 0.0
    return RequestTrace(tuple(p for p, _, _ in kept), tuple(o for _, o, _ in kept), name,
                        max_concurrency=_concurrency(data.get("max_concurrency"), name),
                        request_rate=_rate(data.get("request_rate", "inf"), name),
                        seconds_per_step=_median_itl(data.get("itls"), name),
                        num_failed=len(inputs) - len(kept),
                        arrival_s=tuple(t - first for _, _, t in kept) if starts else None,
                        tool="SGLang bench_serving" if sglang else "vLLM bench serve")


def _failed(errors: list[object] | None, i: int, n_out: int, ttfts: list[object] | None) -> bool:
    """Whether request i failed: an error recorded; or no errors recorded and 0 tokens; or an empty error, 0
    tokens and no first token (vLLM keeps an HTTP error's reason, "" where the response gave none)."""
    if errors is not None and errors[i]:
        return True
    return n_out == 0 and (errors is None or (ttfts is not None and _number(ttfts[i]) == 0))


def _start_times(value: object, n: int, name: str) -> list[float] | None:
    """Each request's send time (seconds on one clock); absent or null: not recorded (older vLLM)."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != n:
        raise GraphbenchError(f"{name}: key start_times must be a list of {n} send times (one per request), got "
                              f"{type(value).__name__ if not isinstance(value, list) else f'{len(value)} entries'}")
    times = [_number(v) for v in value]
    for i, t in enumerate(times):
        if t is None or not math.isfinite(t):
            raise GraphbenchError(f"{name}: key start_times[{i}] holds {value[i]!r:.60}, not a time in seconds")
    return times  # type: ignore[return-value]


def _errors(value: object, n: int, name: str) -> list[object] | None:
    """Each request's error ("" or null: it succeeded); absent or null: not recorded (then a request with 0
    output tokens is the failed one)."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise GraphbenchError(f"{name}: key errors must be a list (one error string per request, \"\" for "
                              f"none), got {type(value).__name__}")
    if len(value) != n:
        raise GraphbenchError(f"{name}: key errors has {len(value)} entries but input_lens has {n}")
    for i, error in enumerate(value):
        if error is not None and not isinstance(error, str):
            raise GraphbenchError(f"{name}: key errors[{i}] must be a string or null, got {error!r:.60}")
    return value


def _count(value: object, where: str, key: str, least: int, most: int = MAX_LEN) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise GraphbenchError(f"{where}: {key} must be an integer in {least}..{most}, got {value!r}")
    return value


def _concurrency(value: object, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise GraphbenchError(f"{name}: key max_concurrency must be a positive integer or null, got {value!r}")
    return value


def _rate(value: object, name: str) -> float | None:
    if value == "inf" or _number(value) == math.inf:
        return None
    rate = _number(value)
    if rate is None or not 0 < rate < math.inf:
        raise GraphbenchError(f"{name}: key request_rate must be a positive number or \"inf\", got {value!r:.60}")
    return rate


def _number(value: object) -> float | None:
    """A JSON number as a float; None for anything else (a bool, a string, an int past a float's range)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def _median_itl(itls: object, name: str) -> float | None:
    """The median of every recorded inter-token latency (seconds), None when none is recorded."""
    if itls is None:  # not recorded
        return None
    if not isinstance(itls, list):  # (like errors and start_times: a wrong shape is said, not taken for none)
        raise GraphbenchError(f"{name}: key itls must be a list (one list of seconds per request), got "
                              f"{type(itls).__name__}")
    values: list[float] = []
    for i, per_request in enumerate(itls):
        if not isinstance(per_request, list):
            raise GraphbenchError(f"{name}: key itls[{i}] must be a list of seconds, got {per_request!r:.60}")
        for value in per_request:
            seconds = _number(value)
            if seconds is None or not 0 <= seconds < math.inf:
                raise GraphbenchError(f"{name}: key itls[{i}] holds {value!r:.60}, not a number of seconds")
            values.append(seconds)
    positive = [v for v in values if v > 0]
    return statistics.median(positive) if positive else None
