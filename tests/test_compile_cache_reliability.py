"""The compile cache under faults: a corrupt entry is rebuilt with a warning; concurrent starts share it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphbench.config import load_engine_config
from graphbench.runner.engine import Engine
from graphbench.runner.request import SamplingParams

pytestmark = pytest.mark.slow
OVERRIDES = {"model.device": "cpu", "optimization_level": 1, "scheduler.max_num_seqs": 4,
             "scheduler.max_num_batched_tokens": 32}
PROMPTS = [[1, 2, 3], [9, 8, 7, 6]]


def _start_in_subprocess(cache_root: Path) -> dict:
    env = dict(os.environ, GRAPHBENCH_CACHE_ROOT=str(cache_root),
               PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(OVERRIDES)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_corrupt_cache_entry_is_rebuilt(tmp_path, monkeypatch, caplog):
    # the entry is written by another process (files mapped by this process must not be truncated)
    expected = _start_in_subprocess(tmp_path)
    assert not expected["loaded"]
    (directory,) = [p for p in (tmp_path / "torch_compile_cache").glob("*/rank_0_0")]
    # truncate every cached artefact: Inductor's and Triton's caches, the saved split graph and pieces
    files = [p for p in directory.rglob("*") if p.is_file() and p.name not in ("compiled.ok", "manifest.json")]
    assert len(files) > 5
    for path in files:
        path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 3])
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(tmp_path))
    with caplog.at_level("WARNING"):
        again = Engine(load_engine_config(overrides=OVERRIDES))
    assert again.generate(PROMPTS, SamplingParams(max_tokens=5)) == expected["tokens"]
    # detected before anything was loaded (a truncated compiled library would crash the process)
    assert again.report.compile_cache_rebuilt and not again.report.compile_loaded
    assert "is damaged" in caplog.text and "corrupt or truncated" in caplog.text
    # after the rebuild the entry is good again: the next start loads it
    assert _start_in_subprocess(tmp_path)["loaded"]


SCRIPT = """
import json, sys
from graphbench.config import load_engine_config
from graphbench.runner.engine import Engine
from graphbench.runner.request import SamplingParams
e = Engine(load_engine_config(overrides=json.loads(sys.argv[1])))
print(json.dumps({"loaded": e.report.compile_loaded,
                  "tokens": e.generate([[1, 2, 3], [9, 8, 7, 6]], SamplingParams(max_tokens=5))}))
"""


def test_concurrent_starts_share_one_cache_entry(tmp_path):
    env = dict(os.environ, GRAPHBENCH_CACHE_ROOT=str(tmp_path),
               PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, json.dumps(OVERRIDES)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr[-2000:]
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    assert outs[0]["tokens"] == outs[1]["tokens"]
    assert sorted(o["loaded"] for o in outs) == [False, True]  # one compiled, the other waited and loaded
