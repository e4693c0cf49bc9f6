"""Busy-host flags: which repeats ran on a contended host, from what each repeat records."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from graphbench.bench.host_load import (
    MIN_CPU_SHARE_OF_SIBLINGS,
    HostProbe,
    busy_host_reason,
    flag_busy_repeats,
)


def rep(wait=0.0, load=0.5, cpus=2, share=1.9):
    return {"cpu_wait_fraction": wait, "host_load_1m": load, "host_cpus": cpus, "process_cpu_fraction": share}


def test_reasons():
    quiet = [rep(), rep(), rep()]
    assert busy_host_reason(rep(), quiet) is None
    assert busy_host_reason(rep(wait=0.31), quiet) == "its main thread waited 31% of the repeat for a CPU"
    assert busy_host_reason(rep(wait=0.099), quiet) is None
    # the load average lags a minute: only where the OS does not count the waits
    assert busy_host_reason(rep(load=3.1), quiet) is None
    assert busy_host_reason(rep(wait=None, load=3.1), quiet) == "host load 3.1 > 2 cores"
    starved = [rep(), rep(share=1.0), rep()]
    assert busy_host_reason(starved[1], starved) == "the process got 53% of the CPU its sibling repeats got"
    assert busy_host_reason(starved[1], starved[:2]) is None  # two repeats: no sibling median to trust


def test_flags_are_set_on_every_repeat():
    repeats = [rep(), rep(wait=0.5), rep(wait=None, load=9.0)]
    assert flag_busy_repeats(repeats) == [1, 2]
    assert [r["busy_host"] is None for r in repeats] == [True, False, False]


def host_already_busy(seconds: float = 0.5) -> str | None:
    """Why the host is busy now, by the evidence a repeat is flagged by (bench/host_load.py), or None: a
    spinning main thread probed as a repeat is (its wait for a CPU, the load average where the OS keeps no
    wait count), and its share of one core (a quiet host gives a spinning thread all of one)."""
    probe = HostProbe()
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        pass
    record = probe.record(time.perf_counter() - start)
    reason = busy_host_reason(record, [record])
    share = record["process_cpu_fraction"]
    if reason is None and share is not None and share < MIN_CPU_SHARE_OF_SIBLINGS:
        reason = f"a spinning thread got {100 * share:.0f}% of a core"
    return reason


def test_host_already_busy_reads_the_probe(monkeypatch):
    import graphbench.bench.host_load as host_load

    monkeypatch.setattr(HostProbe, "record", lambda self, duration_s: rep(wait=0.4))
    assert host_already_busy(0.01) == "its main thread waited 40% of the repeat for a CPU"
    monkeypatch.setattr(HostProbe, "record", lambda self, duration_s: rep(share=0.3))
    assert host_already_busy(0.01) == "a spinning thread got 30% of a core"
    monkeypatch.setattr(HostProbe, "record", lambda self, duration_s: rep(share=0.95))
    assert host_already_busy(0.01) is None
    assert host_load.MAX_CPU_WAIT_FRACTION == 0.10  # (what rep(wait=0.4) is above)


def _runnable_elsewhere() -> int | None:
    """Threads of other processes running or waiting for a CPU now: /proc/stat's procs_running less this
    process's own running threads (None where Linux does not say)."""
    try:
        with open("/proc/stat") as f:
            total = next(int(line.split()[1]) for line in f if line.startswith("procs_running"))
        own = 0
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/stat") as f:
                own += f.read().rsplit(")", 1)[1].split()[0] == "R"
        return total - own
    except (OSError, StopIteration, ValueError, IndexError):
        return None


class _OtherLoad(threading.Thread):
    """Samples _runnable_elsewhere every 20 ms into the current repeat's list: whether other processes (another
    pytest worker on a 2-core CI machine) competed for the CPU during a repeat."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples: dict[int, list[int]] = {}
        self.repeat: int | None = None
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(0.02):
            count, repeat = _runnable_elsewhere(), self.repeat
            if count is not None and repeat is not None:
                self.samples.setdefault(repeat, []).append(count)

    def competed(self, repeat: int) -> bool:
        """Another process was runnable in at least a quarter of the repeat's samples (or nothing was sampled)."""
        samples = self.samples.get(repeat, [])
        return not samples or sum(c > 0 for c in samples) >= len(samples) / 4


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the hog test reads Linux schedstat")
def test_a_cpu_hog_during_one_repeat_flags_that_repeat():
    busy = host_already_busy()
    if busy:  # the quiet repeats would be flagged with the hogged one: nothing this test could tell
        pytest.skip(f"the host is busy before the test starts: {busy}")
    from graphbench.bench.driver import run_engine_workload, warm_up
    from graphbench.bench.repeats import measure_repeats, workload_record
    from graphbench.bench.workloads import LengthDist, Workload
    from graphbench.config import load_engine_config
    from graphbench.runner.engine import Engine

    engine = Engine(load_engine_config(overrides={"model.model": "tiny-llama", "model.device": "cpu",
                                                  "optimization_level": 0}))
    workload = Workload(kind="closed", concurrency=4, num_requests=8, prompt_len=LengthDist("fixed", 16),
                        output_len=LengthDist("fixed", 24))
    warm_up(engine, workload)
    hogs: list[subprocess.Popen] = []
    other_load = _OtherLoad()

    def run_once(w, i):
        if i == 1:  # more busy processes than cores, for this repeat only
            hogs.extend(subprocess.Popen([sys.executable, "-c", "while True: pass"])
                        for _ in range((os.cpu_count() or 1) + 1))
            time.sleep(0.3)
        other_load.repeat = i
        try:
            return run_engine_workload(engine, w, seed_offset=i)
        finally:
            other_load.repeat = None
            for hog in hogs:
                hog.kill()
                hog.wait()
            hogs.clear()

    other_load.start()
    try:
        measured, repeats, calibration = measure_repeats(run_once, workload, 3)
        record = workload_record(measured, repeats, calibration)
    finally:
        other_load.stop.set()
        engine.close()
    assert 1 in record["busy_host_repeats"], [(r["cpu_wait_fraction"], r["process_cpu_fraction"]) for r in repeats]
    assert repeats[1]["busy_host"].startswith(("its main thread waited", "the process got", "host load"))
    # a quiet repeat is not flagged along with it; one that other processes competed with (another test worker
    # on a 2-core machine) may rightly be, so it is not held to that
    for quiet in (0, 2):
        if not other_load.competed(quiet):
            assert quiet not in record["busy_host_repeats"], (quiet, repeats[quiet]["busy_host"])
    if len(record["busy_host_repeats"]) == 1:
        assert record["quiet_spread_pct"] is not None


def test_the_hog_test_is_skipped_off_linux():
    # its skip mark belongs on the test (it reads /proc and schedstat), not on a helper above it
    marks = [m for m in getattr(test_a_cpu_hog_during_one_repeat_flags_that_repeat, "pytestmark", []) if m.name == "skipif"]
    assert [m.kwargs.get("reason") for m in marks] == ["the hog test reads Linux schedstat"]
    assert not hasattr(_runnable_elsewhere, "pytestmark")
