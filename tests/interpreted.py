"""Run a snippet of kernel checks in a fresh process under the Triton interpreter (on the CPU).

The interpreter must be on before the kernels are defined, so the checks cannot run in the test
process itself. The snippet prints "ok" when every assertion in it held.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_interpreted(code: str, timeout: int = 300) -> None:
    """Run `code` with TRITON_INTERPRET=1 and the package on the path; fail with its stderr."""
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT / "src"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
