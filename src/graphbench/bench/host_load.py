"""Was the host busy during a repeat? What each repeat records of it, and which repeats to flag.

A repeat's speed is the engine's only if the process got the CPU when it wanted it. Three signs
that it did not, from the cheapest evidence the OS keeps:
- the main thread's run-queue wait (Linux schedstat: time it was runnable but not running) is a
  large share of the repeat: something else held the cores it needed;
- where the OS keeps no such count: the host's 1-minute load average is above its cores (it lags by
  a minute, so it is only the fallback: after a burst it would flag the quiet repeats that follow);
- the process got clearly less CPU time per second than its sibling repeats of the same workload.
Flagged repeats keep their numbers; the summary and the report say the host was busy instead of
presenting their spread as the engine's.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

# a repeat whose main thread waited this share of its wall time for a CPU ran on a contended host
MAX_CPU_WAIT_FRACTION = 0.10
# a repeat whose process got less than this share of its siblings' median CPU per second was starved
MIN_CPU_SHARE_OF_SIBLINGS = 0.7


def host_cpus() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def main_thread_wait_s() -> float | None:
    """Seconds the main thread has spent runnable but waiting for a CPU (None where the OS does not say:
    no schedstat, or one that counts nothing, as in some sandboxes)."""
    try:
        run_ns, wait_ns = (int(x) for x in Path(f"/proc/self/task/{os.getpid()}/schedstat").read_text().split()[:2])
    except (OSError, ValueError):
        return None
    return wait_ns / 1e9 if run_ns > 0 else None


class HostProbe:
    """Started before a repeat, read after it: the repeat's host-load record."""

    def __init__(self) -> None:
        self.cpu_start = time.process_time()
        self.wait_start = main_thread_wait_s()

    def record(self, duration_s: float) -> dict[str, Any]:
        cpu_s = time.process_time() - self.cpu_start
        wait_end = main_thread_wait_s()
        wait = None if self.wait_start is None or wait_end is None else wait_end - self.wait_start
        positive = duration_s > 0
        return {
            "host_cpus": host_cpus(),
            "host_load_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
            "process_cpu_fraction": cpu_s / duration_s if positive else None,
            "cpu_wait_fraction": wait / duration_s if positive and wait is not None else None,
        }


def busy_host_reason(repeat: dict[str, Any], siblings: list[dict[str, Any]]) -> str | None:
    """Why this repeat ran on a busy host, in one line, or None. siblings: every repeat of its workload."""
    wait = repeat.get("cpu_wait_fraction")
    if isinstance(wait, (int, float)) and wait >= MAX_CPU_WAIT_FRACTION:
        return f"its main thread waited {100 * wait:.0f}% of the repeat for a CPU"
    load, cpus = repeat.get("host_load_1m"), repeat.get("host_cpus")
    if wait is None and isinstance(load, (int, float)) and isinstance(cpus, int) and load > cpus:
        return f"host load {load:.1f} > {cpus} cores"
    shares = [s.get("process_cpu_fraction") for s in siblings]
    shares = [x for x in shares if isinstance(x, (int, float))]
    mine = repeat.get("process_cpu_fraction")
    if len(shares) >= 3 and isinstance(mine, (int, float)):
        median = statistics.median(shares)
        if median > 0 and mine < MIN_CPU_SHARE_OF_SIBLINGS * median:
            return f"the process got {100 * mine / median:.0f}% of the CPU its sibling repeats got"
    return None


def flag_busy_repeats(repeats: list[dict[str, Any]]) -> list[int]:
    """Set each repeat's "busy_host" (reason or None); return the indices of the flagged ones."""
    for repeat in repeats:
        repeat["busy_host"] = busy_host_reason(repeat, repeats)
    return [i for i, r in enumerate(repeats) if r["busy_host"]]
