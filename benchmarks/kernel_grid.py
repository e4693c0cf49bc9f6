"""A kernel's blocks over a grid, as benchmarks/decode_blocks.py searches them: the grid
compiled by several processes at once (a wide grid is mostly Triton compile time), then each config timed
in a CUDA graph in this one process (runner/kernel_bench.graph_time_us), against a reference output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Callable


def precompile(script: str, jobs: list[list], processes: int) -> None:
    """Run `python script --compile-jobs JSON` on `processes` slices of the jobs at once, and wait: each
    launches its configs once, which leaves them in Triton's cache for the timing process."""
    procs = [subprocess.Popen([sys.executable, script, "--compile-jobs", json.dumps(jobs[i::processes])],
                              env=dict(os.environ)) for i in range(min(processes, len(jobs)))]
    for i, proc in enumerate(procs):
        if proc.wait():  # its configs then compile one by one in the timing process: say so
            print(f"compile worker {i} exited with {proc.returncode}", flush=True)


def time_grid(label: str, configs: list[Any], run: Callable[[int, Any], Any], num_calls: int, reference,
              baseline: str) -> list[dict]:
    """Per config: the largest absolute difference of run(0, config) from `reference` and the median time a
    call of run(i, config), i < num_calls, in a CUDA graph; a config the GPU cannot run is reported and
    skipped. Prints a line a config (`baseline` follows its time)."""
    from graphbench.runner.kernel_bench import graph_time_us

    rows = []
    for config in configs:
        try:
            err = (run(0, config).float() - reference).abs().max().item()
            us = graph_time_us(lambda i, c=config: run(i, c), num_calls)
        except Exception as exc:  # noqa: BLE001 - a config this GPU cannot run (shared memory, registers)
            print(f"{label} {config}: {type(exc).__name__}", flush=True)
            continue
        rows.append({"config": config, "us": us, "max_abs_err": err})
        print(f"{label} {config}: {us:8.2f} us ({baseline}), max err {err:.3g}", flush=True)
    return rows
