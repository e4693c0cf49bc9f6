"""A step's recorded time runs from the end of the step before while requests were running (runner/records.py:
StepClock): what the caller does between steps is the step's cost too. Timed from its own start alone, a step
hid a host delay between steps (with asynchronous scheduling its wait for tokens shrank by as much): on an H100
0.3 ms of delay a step read as SmolLM2's steps 61% shorter while tokens/s fell 18%. The clock here is faked
(every module's perf_counter reads real time plus the delays "slept"), so nothing depends on this host's speed."""

from __future__ import annotations

import time

import pytest

from graphbench.runner import engine as engine_module
from graphbench.runner import records
from graphbench.runner.records import StepClock
from graphbench.runner.request import SamplingParams
from tests.test_engine import PROMPTS, tiny_engine

DELAY = 100.0  # seconds "slept" between steps: far beyond any real step on any host


class FakeTime:
    """time for the engine's modules: perf_counter is real time plus what sleep() added."""

    def __init__(self) -> None:
        self.offset = 0.0

    def perf_counter(self) -> float:
        return time.perf_counter() + self.offset

    def sleep(self, seconds: float) -> None:
        self.offset += seconds


@pytest.fixture
def fake_time(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(engine_module, "time", fake)
    monkeypatch.setattr(records, "time", fake)
    return fake


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_a_delay_between_running_steps_is_the_next_steps_time_and_an_idle_one_is_not(fake_time, async_scheduling):
    engine = tiny_engine(**{"scheduler.async_scheduling": async_scheduling})
    for prompt in PROMPTS[:2]:
        engine.add_request(prompt, SamplingParams(max_tokens=6))
    engine.step()  # the prefill: the engine was idle before it
    assert engine.records[-1].seconds < DELAY
    while engine.has_unfinished():
        fake_time.sleep(DELAY)  # the caller, between two steps of running requests
        count = len(engine.records)
        engine.step()
        if len(engine.records) > count:  # (a last call that only took tokens in records nothing)
            record = engine.records[-1]
            assert DELAY <= record.seconds < 2 * DELAY and record.launch_seconds < DELAY
    assert len(engine.records) >= 5
    # idle: every request finished; a wait for the next arrival is no step's time
    fake_time.sleep(DELAY)
    engine.add_request(PROMPTS[2], SamplingParams(max_tokens=2))
    engine.step()
    assert engine.records[-1].seconds < DELAY


def test_the_clock_alone(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(records, "time", fake)
    clock = StepClock()
    assert clock.began(5.0) == 5.0  # never ran: its own start
    end = clock.ended(busy=True)
    assert clock.began(end + 1.0) == end  # busy: from the end of the step before
    clock.ended(busy=False)
    assert clock.began(end + 2.0) == end + 2.0  # idle: its own start again
