"""Run a snippet of kernel checks in a fresh process under the Triton interpreter (on the CPU).

The interpreter must be on before the kernels are defined, so the checks cannot run in the test
process itself. The snippet prints "ok" when every assertion in it held.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed")
    return dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT / "src"))


def run_interpreted(code: str, timeout: int = 300) -> None:
    """Run `code` with TRITON_INTERPRET=1 and the package on the path; fail with its stderr."""
    out = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


def run_at_once(commands: list[list[str]], env: dict[str, str], timeout: float,
                cwd: Path | None = None) -> list[tuple[int, str, str]]:
    """Run the commands in processes started at once (the interpreter runs on one core): each one's
    (exit code, stdout, stderr). Output goes to files, so that no process waits on a full pipe while
    another is read; whatever still runs at the deadline is killed."""
    files = [(tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")) for _ in commands]
    procs = [subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=err, text=True)
             for cmd, (out, err) in zip(commands, files)]
    deadline = time.monotonic() + timeout
    try:
        for proc in procs:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    results = []
    for proc, (out, err) in zip(procs, files):
        out.seek(0), err.seek(0)
        results.append((proc.returncode, out.read(), err.read()))
        out.close(), err.close()
    return results


def run_interpreted_at_once(codes: list[str], timeout: int = 300) -> None:
    """run_interpreted for each snippet, each in its own process, all started at once; fail with the
    stderr of the first snippet that failed."""
    for returncode, stdout, stderr in run_at_once([[sys.executable, "-c", code] for code in codes], _env(), timeout):
        assert returncode == 0 and stdout.strip() == "ok", stderr[-3000:]
