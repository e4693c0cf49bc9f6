"""A cold start in a process of its own, so that the warm start after it is a first start too.

A second start in a process skips what a fresh process pays: importing torch's compile stack and loading
the compiled code (on the CPU, tiny-llama at -O3: a warm start after the cold one in its process took 0.9 s,
a fresh process's 5.0 s), and on CUDA the first graph capture's costs (measured on the H200: ~95 MiB of graph
memory and Triton's kernel loading). A point that compiles and measures a cold and a warm start therefore runs
the cold one here, in a child process, and the warm one (which then serves the workloads) as its own
process's first start, on every device: every reported start is a fresh-process start, so a sweep's first
round measures its warm start as the later rounds do theirs (benchmarks/RESULTS.md, 2026-12-07).

    python -m graphbench.bench.cold_start CONFIG.json   # prints "RESULT {startup}" on success

A sweep round that runs on a kernel search of its own (config.model.kernel_search) starts warm here first
(`--warm`), unmeasured: its choices may name blocks the compile-cache entry's Triton cache lacks, and the
measured warm start would compile them (inferred from capture times: up to ~0.8 s more than round 1's on a
1.8 s qwen2.5-0.5b warm start on an H100, benchmarks/RESULTS.md, 2026-12-07); this start compiles them into the
entry, as its cold start did its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from graphbench.config import EngineConfig
from graphbench.errors import GraphbenchError

def die_with_parent() -> None:
    """preexec_fn (Linux): the child is killed when the process that started it dies."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def cold_start_in_child(config: EngineConfig) -> dict[str, Any]:
    """Start `config` cold in a child process; return its startup record (see engine_start.startup_dict)."""
    return start_in_child(config, cold=True)


def start_in_child(config: EngineConfig, cold: bool) -> dict[str, Any]:
    """Start `config` in a child process, cold (its compile cache cleared first) or warm; its startup record."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(config.to_dict(), f)
    try:
        # its own process group, killed once it has answered: nothing it started (Inductor's compile
        # workers) may still be running while this process measures its warm start and workloads
        # (output to files, not pipes: a leftover worker holding a pipe open would keep us waiting)
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            child = subprocess.Popen([sys.executable, "-m", "graphbench.bench.cold_start", f.name,
                                      *([] if cold else ["--warm"])], stdout=out,
                                     stderr=err, text=True, start_new_session=os.name == "posix",
                                     preexec_fn=die_with_parent if os.name == "posix" else None)
            try:
                child.wait()
            finally:
                kill_group(child)
            out.seek(0)
            err.seek(0)
            proc = subprocess.CompletedProcess(child.args, child.returncode, out.read(), err.read())
    finally:
        os.unlink(f.name)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        sys.stderr.write(proc.stderr[-6000:])  # the point's stderr tail then explains the failure
        tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()][-1:] or [f"exit code {proc.returncode}"]
        what = "the cold start" if cold else "the unmeasured warm start before the measured one"
        raise GraphbenchError(f"{what} (own process) failed: {tail[0][:300]}")
    return json.loads(lines[-1][len("RESULT "):])


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group a child leads (start_new_session=True): the child and all it started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):  # (no groups on this OS, or none left)
        proc.kill()


def main(argv: list[str]) -> None:
    from graphbench.bench.engine_start import startup_dict
    from graphbench.config import config_from_dict
    from graphbench.runner.engine import Engine

    with open(argv[0]) as f:
        config = config_from_dict(json.load(f), source=argv[0])
    cold = "--warm" not in argv[1:]
    started = time.perf_counter()
    engine = Engine(config, fresh_compile=cold)
    startup = dict(startup_dict(engine, cold, time.perf_counter() - started), own_process=True)
    engine.close()
    print("RESULT " + json.dumps(startup), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
