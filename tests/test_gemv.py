"""The decode GEMV kernel (runner/gemv.py) against torch's matmul, in the Triton interpreter on the CPU."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CODE = """
import torch
from graphbench.runner.gemv import gemv
g = torch.Generator().manual_seed(0)
for m, n, k, bn, bk in [(1, 48, 64, 16, 32), (3, 40, 100, 16, 32), (8, 17, 33, 8, 16), (16, 32, 64, 16, 64)]:
    x = torch.randn(m, k, generator=g)
    w = torch.randn(n, k, generator=g)
    y = gemv(x, w, block_n=bn, block_k=bk)
    torch.testing.assert_close(y, x @ w.T, rtol=1e-5, atol=1e-4)
    xb, wb = x.to(torch.bfloat16), w.to(torch.bfloat16)
    yb = gemv(xb, wb, block_n=bn, block_k=bk)
    ref = (xb.float() @ wb.float().T)
    assert yb.dtype == torch.bfloat16 and ((yb.float() - ref).norm() / ref.norm()).item() < 1e-2
print("ok")
"""


def test_gemv_matches_matmul_in_the_interpreter():
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT / "src"))
    out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
