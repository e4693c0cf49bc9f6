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
    ("0", "must be at least 1 token, got 0"),
    ("uniform:0-8", "must be at least 1 token, got uniform:0-8"),
    ("normal:128,-3", "spread must be >= 0, got normal:128,-3"),
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
def test_a_trace_replays_from_its_first_request_and_a_day_long_one_is_refused(tmp_path):
    # an excerpt of a day's trace starts hours in: the replay once waited them out in silence (28 h for one
    # request at 100000 s); it starts at the first request, and a span no benchmark means is refused
    excerpt = tmp_path / "excerpt.jsonl"
    excerpt.write_text('{"arrival_s": 36000.5, "prompt_len": 8, "output_len": 4}\n'
                       '{"arrival_s": 36000.0, "prompt_len": 9, "output_len": 4}\n')
    assert [(r.arrival_s, r.prompt_len) for r in load_trace(excerpt)] == [(0.0, 9), (0.5, 8)]
    day = tmp_path / "day.jsonl"
    day.write_text('{"arrival_s": 0, "prompt_len": 8, "output_len": 4}\n'
                   '{"arrival_s": 90000, "prompt_len": 8, "output_len": 4}\n')
    with pytest.raises(GraphbenchError, match=r"spans 25\.0 h from its first request to its last, replayed in real "
                                              r"time: more than 24 h; give an excerpt"):
        load_trace(day)


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


def test_tuning_and_comparing_have_caps():
    from graphbench.ladders.distributions import BatchSizeDistribution
    from graphbench.ladders.tune import pareto_curve

    dist = BatchSizeDistribution({1: 3, 9: 1})
    with pytest.raises(GraphbenchError, match="max graphs must be at most 4096, got 1000000000000"):
        pareto_curve(dist, 10**12)
    with pytest.raises(GraphbenchError, match="top must be at most 1048576 tokens"):
        pareto_curve(dist, 4, top=10**12)
    with pytest.raises(GraphbenchError, match=r"max_size must be an integer in 1\.\.1048576"):
        BatchSizeDistribution.uniform(10**12)


def test_a_sharded_index_may_only_name_the_checkpoints_own_files(tmp_path):
    from graphbench.runner.loader import checkpoint_files

    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "../../etc/x.safetensors"}}))
    with pytest.raises(GraphbenchError, match="outside the checkpoint folder"):
        checkpoint_files(tmp_path)


def test_a_point_whose_label_holds_a_path_or_an_emoji_gets_a_readable_config_file(tmp_path):
    from graphbench.bench.sweep import write_point_config
    from graphbench.bench.sweep_grid import SweepPoint
    from graphbench.config.tomlio import read_toml

    point = SweepPoint("O2_model=/data/ckpt \U0001F600", {"model.model": "/data/ckpt \U0001F600", "optimization_level": 2})
    path = write_point_config(point, tmp_path)
    assert path.parent == tmp_path and path.name == "O2_model-data-ckpt.toml"
    assert read_toml(path)["model"]["model"] == "/data/ckpt \U0001F600"
