"""Workload inputs that would never end, overflow or sample garbage are refused with one line."""

from __future__ import annotations

import json
import math
import os

import pytest

from graphbench.bench.workloads import LengthDist, Workload, load_trace
from graphbench.errors import GraphbenchError


@pytest.mark.parametrize("text, message", [
    ("normal:nan,3", "must be finite numbers"),
    ("normal:128,inf", "must be finite numbers"),
    ("uniform:1-1000000000000", "must stay within 1048576 tokens"),
    ("0", "must be positive"),
])
def test_length_distributions(text, message):
    with pytest.raises(GraphbenchError, match=message):
        LengthDist.parse(text, "--output-len")


@pytest.mark.parametrize("kwargs, message", [
    ({"kind": "closed", "concurrency": 10**12}, r"concurrency must be in 1\.\.65536"),
    ({"kind": "poisson", "request_rate": math.inf}, "request-rate in"),
    ({"kind": "poisson", "request_rate": math.nan}, "request-rate in"),
    ({"kind": "closed", "num_requests": 10**9}, r"num_requests must be in 1\.\.1048576"),
])
def test_workload_bounds(kwargs, message):
    with pytest.raises(GraphbenchError, match=message):
        Workload(**kwargs)


@pytest.mark.parametrize("row, message", [
    ({"arrival_s": math.nan, "prompt_len": 8, "output_len": 4}, "arrival_s must be a number of seconds"),
    ({"arrival_s": 1e400, "prompt_len": 8, "output_len": 4}, "arrival_s must be a number of seconds"),
    ({"arrival_s": 0.5, "prompt_len": 8.5, "output_len": 4}, "prompt_len must be an integer"),
    ({"arrival_s": 0.5, "prompt_len": 8, "output_len": 10**12}, "output_len must be an integer in 1..1048576"),
    ({"arrival_s": "0", "prompt_len": 8, "output_len": 4}, "arrival_s must be a number"),
])
def test_trace_fields(tmp_path, row, message):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"arrival_s": 0.0, "prompt_len": 8, "output_len": 4}) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(GraphbenchError, match=f"{path}:2: {message}"):
        load_trace(path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_trace_that_is_not_a_regular_file_is_refused_unread(tmp_path):
    os.mkfifo(tmp_path / "t.jsonl")
    with pytest.raises(GraphbenchError, match="is not a regular file"):
        load_trace(tmp_path / "t.jsonl")


@pytest.mark.parametrize("kwargs, message", [
    ({"temperature": math.nan}, r"temperature must be a number in \[0, 100\], got nan"),
    ({"temperature": math.inf}, "temperature must be a number"),
    ({"temperature": -1.0}, "temperature must be a number"),
    ({"top_p": math.nan}, r"top_p must be in \(0, 1\]"),
    ({"max_tokens": 10**12}, "max_tokens must be at most 1048576"),
])
def test_sampling_params(kwargs, message):
    from graphbench.runner.request import SamplingParams

    with pytest.raises(GraphbenchError, match=message):
        SamplingParams(**kwargs)
