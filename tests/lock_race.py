"""Processes racing for the sweep lock, for tests/test_sweep_interrupt.py.

`python tests/lock_race.py ROOT TRIALS PROCS` runs TRIALS trials, each in folder ROOT/t<trial>: PROCS
processes forked from this small process wait for one start signal, then each tries the lock and, when
it holds it, records the interval it held it for. It prints one JSON line: per trial, the intervals
(began, ended) of the holders, sorted. The test runs it as its own process because forking the test
process (torch and compiled engines loaded, hundreds of MB) took ~45 ms a fork, 160 forks ~8 s of the
suite; from here a fork takes well under a millisecond and the race is the same.
"""

from __future__ import annotations

import json
import multiprocessing
import sys
import time
from pathlib import Path

from graphbench.bench.sweep_lock import sweep_lock as lock
from graphbench.errors import GraphbenchError as Refused


def _race(folder: str, start, out) -> None:
    """One contender: wait for the start, try the lock; when held, record the interval it was held."""
    start.wait()
    try:
        with lock(Path(folder)):
            began = time.monotonic()
            time.sleep(0.002)
            out.put((began, time.monotonic()))
    except Refused:
        out.put(None)


def race(root: Path, trials: int, procs: int) -> list[list[tuple[float, float]]]:
    ctx = multiprocessing.get_context("fork")
    held_per_trial = []
    for trial in range(trials):
        folder = root / f"t{trial}"
        start, out = ctx.Event(), ctx.Queue()
        contenders = [ctx.Process(target=_race, args=(str(folder), start, out)) for _ in range(procs)]
        for p in contenders:
            p.start()
        start.set()
        results = [out.get(timeout=30) for _ in contenders]
        for p in contenders:
            p.join(timeout=30)
        held_per_trial.append(sorted(r for r in results if r is not None))
    return held_per_trial


if __name__ == "__main__":
    print(json.dumps(race(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))))
