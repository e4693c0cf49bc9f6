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
    start = fake.perf_counter()
    fake.sleep(1.0)
    assert 1.0 <= clock.lap(start, busy=True) < 1.5  # never ran: from its own start
    fake.sleep(DELAY)  # the caller, between two running steps
    assert DELAY <= clock.lap(fake.perf_counter(), busy=False) < DELAY + 0.5  # busy: from the end of the step before
    fake.sleep(DELAY)  # idle
    assert clock.lap(fake.perf_counter(), busy=True) < 0.5  # idle: its own start again
    fake.sleep(DELAY)
    clock.ended(busy=False)  # a step that ran nothing, or a drain() that took the last tokens
    assert clock.lap(fake.perf_counter(), busy=False) < 0.5


def test_a_drain_that_takes_the_last_tokens_leaves_the_engine_idle(fake_time):
    # asynchronous scheduling: the last step launched the last tokens; the caller takes them with drain()
    # (as the decode pool of `graphbench curve` does) and then waits: that wait is no step's time
    engine = tiny_engine(**{"scheduler.async_scheduling": True})
    request = engine.add_request(PROMPTS[0], SamplingParams(max_tokens=3))
    while len(request.output_token_ids) < 3:
        engine.step()
    assert engine.has_unfinished()  # its last token is still in flight
    assert engine.drain() == [request] and not engine.has_unfinished()
    fake_time.sleep(DELAY)
    engine.add_request(PROMPTS[2], SamplingParams(max_tokens=2))
    engine.step()
    assert engine.records[-1].seconds < DELAY


def test_a_drain_between_running_steps_is_the_next_steps_time(fake_time):
    engine = tiny_engine(**{"scheduler.async_scheduling": True})
    engine.add_request(PROMPTS[0], SamplingParams(max_tokens=8))
    engine.step()
    engine.step()
    engine.drain()
    assert engine.has_unfinished()
    fake_time.sleep(DELAY)
    engine.step()
    assert DELAY <= engine.records[-1].seconds < 2 * DELAY


def test_speculative_steps_run_on_the_same_clock(fake_time, monkeypatch):
    from graphbench.runner.speculative import decoding

    monkeypatch.setattr(decoding, "time", fake_time)
    engine = tiny_engine(**{"speculative.method": "ngram", "speculative.num_speculative_tokens": 2})
    engine.add_request(PROMPTS[3], SamplingParams(max_tokens=6))
    engine.step()
    assert engine.records[-1].seconds < DELAY
    fake_time.sleep(DELAY)
    engine.step()
    assert DELAY <= engine.records[-1].seconds < 2 * DELAY
    while engine.has_unfinished():
        engine.step()
    fake_time.sleep(DELAY)  # idle: every request finished
    engine.add_request(PROMPTS[2], SamplingParams(max_tokens=2))
    engine.step()
    assert engine.records[-1].seconds < DELAY


def test_compare_and_gate_say_where_one_side_timed_its_steps_before_the_step_clock(tmp_path):
    # a baseline written before the step clock timed each step from its own start: its step times leave out the
    # caller's time between steps, so step_*_ms and full_step_ms moved with the clock, not the code
    from graphbench.reports.compare import compare_sets
    from graphbench.reports.gate import run_gate
    from graphbench.reports.store import load_results
    from tests.test_gate import make_rounds, write_set

    def side(name: str, clock: int | None) -> list:
        results = make_rounds("O2-default", [{"closed-c4": [(t, 12.0)] * 2} for t in (1000.0, 1010.0, 990.0)],
                              sweep_id=name)
        for result in results:
            result["environment"].pop("step_clock", None)
            if clock is not None:
                result["environment"]["step_clock"] = clock
        return results

    old = write_set(tmp_path / "old", side("old", None))
    new = write_set(tmp_path / "new", side("new", StepClock.VERSION))
    again = write_set(tmp_path / "again", side("again", StepClock.VERSION))
    for base, cur in ((old, new), (new, old)):
        lines = [w for w in run_gate(base, cur).warnings if "step times" in w]
        assert len(lines) == 1 and lines[0].startswith("O2-default (graphbench): "), lines
        assert "from each step's own start" in lines[0] and "from the end of the step before" in lines[0]
    assert not any("step times" in w for w in run_gate(new, again).warnings)
    assert not any("step times" in w for w in run_gate(old, old).warnings)
    sets = compare_sets(load_results([old]), load_results([new]), metrics=["output_tokens_per_s"])
    assert any("step times" in w for w in sets.warnings)
