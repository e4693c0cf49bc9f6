"""Sweep points spread over several GPUs: one point per GPU (or per tensor-parallel group) at a time.

Each child sees only its GPUs (CUDA_VISIBLE_DEVICES). Order is kept where it matters: a warm point
waits for every earlier cold point (so that it finds the compile cache those fill), a tuned:N point
waits for every earlier point (its ladder is tuned on their measured batch sizes), a round on its own kernel
search for the earlier processes of its engine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from graphbench.bench.sweep_grid import SweepPoint
from graphbench.errors import GraphbenchError


def parse_gpus(text: str | None) -> list[str]:
    """'0,1,3' -> ['0', '1', '3'] (CUDA device ids); None or '' -> []."""
    if not text:
        return []
    gpus = [part.strip() for part in text.split(",") if part.strip()]
    if any(not g.isdigit() for g in gpus) or len(set(gpus)) != len(gpus):
        raise GraphbenchError(f"--gpus takes distinct device ids like 0,1,2; got {text!r}")
    return gpus


def gpus_needed(point: SweepPoint) -> int:
    return int(point.overrides.get("parallel.tensor_parallel_size", 1))


class GpuPool:
    """Hands out sets of GPU ids; blocks until enough are free."""

    def __init__(self, gpus: list[str]):
        self.free = list(gpus)
        self.total = len(gpus)
        self.cond = threading.Condition()

    def take(self, count: int) -> list[str]:
        if count > self.total:
            raise GraphbenchError(f"a point needs {count} GPUs; --gpus lists {self.total}")
        with self.cond:
            self.cond.wait_for(lambda: len(self.free) >= count)
            taken, self.free = self.free[:count], self.free[count:]
            return taken

    def give(self, gpus: list[str]) -> None:
        with self.cond:
            self.free += gpus
            self.cond.notify_all()


def run_spread(points: list[SweepPoint], gpus: list[str], run_one: Callable[[SweepPoint, dict], object],
               skip: Callable[[SweepPoint], object | None]) -> list[object]:
    """run_one(point, extra_env) for every point, at most one point per free GPU set; outcomes in point order.

    skip(point) returns an outcome for a point that must not run (e.g. already measured), else None."""
    pool = GpuPool(gpus)
    futures: list[Future] = []

    def task(index: int, point: SweepPoint):
        # (and a round on its own kernel search after the earlier processes of its engine: its unmeasured start
        # writes the round's kernels into the compile-cache entry, which a start beside it would find half-written)
        waits = [f for j, f in enumerate(futures[:index])
                 if point.tuned_graphs is not None or (not point.cold and points[j].cold)
                 or (point.kernel_search and points[j].label == point.label)]
        for f in waits:
            f.exception()  # wait (a failed dependency still lets this point run)
        taken = pool.take(gpus_needed(point))
        try:
            return run_one(point, {"CUDA_VISIBLE_DEVICES": ",".join(taken)})
        finally:
            pool.give(taken)

    with ThreadPoolExecutor(max_workers=max(1, len(gpus))) as executor:
        for i, point in enumerate(points):
            skipped = skip(point)
            if skipped is not None:
                done: Future = Future()
                done.set_result(skipped)
                futures.append(done)
            else:
                futures.append(executor.submit(task, i, point))
        return [f.result() for f in futures]
