"""Repeats long enough to average the host's jitter: the scale rule, the scaled workload, the calibration."""

from __future__ import annotations

import pytest

from graphbench.bench.repeats import measure_repeats, repeat_scale, scaled
from graphbench.bench.workloads import LengthDist, Workload


@pytest.mark.parametrize(("pass_s", "target_s", "scale"), [
    (0.27, 1.0, 4), (0.30, 1.0, 3), (0.34, 1.0, 3), (0.46, 1.0, 2), (0.6, 1.0, 2), (0.7, 1.0, 1),
    (0.99, 1.0, 1), (1.0, 1.0, 1), (2.6, 1.0, 1),  # already about as long as the target: as it is
    (0.01, 1.0, 100), (0.5, 0.0, 1), (0.0, 1.0, 1),  # no target; a pass that took no time
])
def test_repeat_scale(pass_s, target_s, scale):
    assert repeat_scale(pass_s, target_s) == scale


def test_scaled_closed_loop_draws_the_same_stream_further():
    w = Workload(kind="closed", concurrency=4, num_requests=16, prompt_len=LengthDist("uniform", 10, 90),
                 output_len=LengthDist("uniform", 5, 50), seed=3)
    three = scaled(w, 3)
    assert (three.num_requests, three.concurrency, three.name, three.seed) == (48, 4, "closed-c4", 3)
    assert three.requests()[:16] == w.requests()  # the first pass is the unscaled workload
    assert scaled(w, 1) is w
    poisson = Workload(kind="poisson", request_rate=4.0, num_requests=10)
    assert scaled(poisson, 5) is poisson  # an open loop's length is its arrivals'


def _fake_run(durations):
    calls = []

    def run_once(workload, seed_offset):
        calls.append((workload.num_requests, seed_offset))
        return {"duration_s": durations[len(calls) - 1], "n": workload.num_requests}
    return run_once, calls


def test_a_short_pass_calibrates_and_every_repeat_runs_the_scaled_requests():
    w = Workload(kind="closed", concurrency=64, num_requests=256)
    run_once, calls = _fake_run([0.46, 0.93, 0.91, 0.95])
    messages = []
    measured, results, calibration = measure_repeats(run_once, w, 3, 1.0, messages.append)
    # the 0.46 s pass is a calibration only; the three repeats run 2 x 256 requests, seeds 0, 1, 2
    assert calls == [(256, 0), (512, 0), (512, 1), (512, 2)]
    assert [r["duration_s"] for r in results] == [0.93, 0.91, 0.95]
    assert measured.num_requests == 512 and measured.to_dict()["num_requests"] == 512
    assert calibration == {"target_repeat_s": 1.0, "first_pass_s": 0.46, "scale": 2}
    assert any("2 x the requests" in m for m in messages)


def test_a_long_enough_pass_is_the_first_repeat():
    w = Workload(kind="closed", concurrency=1, num_requests=4)
    run_once, calls = _fake_run([2.6, 2.5, 2.7])
    measured, results, calibration = measure_repeats(run_once, w, 3, 1.0)
    assert calls == [(4, 0), (4, 1), (4, 2)]  # no extra pass
    assert measured is w and [r["duration_s"] for r in results] == [2.6, 2.5, 2.7]
    assert calibration == {"target_repeat_s": 1.0, "first_pass_s": 2.6, "scale": 1}


def test_no_target_or_an_open_loop_runs_the_repeats_as_given():
    for w, target in ((Workload(kind="closed", concurrency=2, num_requests=8), 0.0),
                      (Workload(kind="poisson", request_rate=2.0, num_requests=8), 1.0)):
        run_once, calls = _fake_run([0.1, 0.1])
        measured, results, calibration = measure_repeats(run_once, w, 2, target)
        assert calls == [(8, 0), (8, 1)] and measured is w and len(results) == 2
        assert calibration == {"target_repeat_s": None, "first_pass_s": None, "scale": 1}
