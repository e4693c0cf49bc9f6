"""One sweep point as a `graphbench run` child process: its command line, its run under a time limit,
and why it failed.

Both sweep executors run a point through here, so that a point is the same process wherever it runs:
the local one in the sweep's own process (the child writes its result into the sweep's folder), the
Ray one inside a Ray task on some node (the child writes into a temporary folder there, and the task
sends the file's text back to the sweep).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphbench.bench.cold_start import die_with_parent, kill_group
from graphbench.bench.sweep_grid import SweepPoint

# Env for every child: NVLink multicast stays off on shared machines.
CHILD_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


@dataclass
class ChildExit:
    """How a point's process ended: its exit code (negative: the signal), its stderr, and whether the
    time limit or a stop request ended it."""

    returncode: int | None
    stderr: str
    seconds: float
    timed_out: bool = False
    stopped: bool = False


def point_args(point: SweepPoint, run_args: list[str], identity: dict[str, Any]) -> list[str]:
    """The point's `graphbench run` options, less --config and --results (which depend on where it runs)."""
    args = ["--label", point.label, "--quiet", *run_args]
    if point.cold:
        args.append("--cold")
    if point.system != "graphbench":
        args += ["--system", point.system]
    if point.stands_for:
        args += ["--stands-for", ",".join(point.stands_for), "--same-engine-reason", point.same_engine_reason]
    if point.round:
        args += ["--sweep-round", json.dumps(point.round)]
    return [*args, "--sweep-identity", json.dumps(identity)]


def point_command(config_file: Path, results_dir: Path, args: list[str]) -> list[str]:
    """`python -m graphbench run --config CONFIG --results RESULTS ARGS` with this interpreter."""
    return [sys.executable, "-m", "graphbench", "run", "--config", str(config_file), "--results", str(results_dir),
            *args]


def run_child(cmd: list[str], env: dict[str, str], timeout_s: float, stop: Callable[[], bool] = lambda: False,
              poll_s: float = 0.25) -> ChildExit:
    """Run cmd until it exits, runs past timeout_s or stop() says so (checked every poll_s); then its
    whole process group is killed. An exception in the caller's thread while it waits (a Ray task's
    cancellation is a KeyboardInterrupt) kills the group too, and is raised again."""
    started = time.perf_counter()
    # its own process group: a timeout or a stop kills the point's children too (cold-start process,
    # tensor-parallel ranks); and it dies with its parent if that is killed outright
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True, preexec_fn=die_with_parent if os.name == "posix" else None)
    try:
        while True:
            try:
                _stdout, stderr = proc.communicate(timeout=poll_s)
                return ChildExit(proc.returncode, stderr, time.perf_counter() - started)
            except subprocess.TimeoutExpired:
                overdue = time.perf_counter() - started > timeout_s
                if overdue or stop():
                    kill_group(proc)
                    _stdout, stderr = proc.communicate()
                    return ChildExit(proc.returncode, stderr, time.perf_counter() - started, timed_out=overdue,
                                     stopped=not overdue)
    except BaseException:
        kill_group(proc)
        proc.wait()
        raise


def exit_reason(code: int, stderr: str) -> str:
    """A failed point's reason in one line: the signal or exit code, and stderr's last line."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    last = lines[-1][:300] if lines else ""
    if code < 0:
        return f"killed by signal {-code}" + (f": {last}" if last else "")
    if "out of memory" in stderr.lower():
        return f"out of memory: {last}"
    return f"exit code {code}: {last}"
