"""The signed compile cache on the GPU: a second start of a configuration loads what the first compiled
and captured (Triton's kernels compiled for the capture included), without rebuilding the entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

SCRIPT = """
import json, sys
from graphbench.config import load_engine_config
from graphbench.runner.engine import Engine
from graphbench.runner.request import SamplingParams
e = Engine(load_engine_config(overrides={"model.model": "tiny-llama", "model.device": "cuda", "optimization_level": 2,
                                         "scheduler.max_num_seqs": 8, "cache.gpu_memory_utilization": 0.2,
                                         **json.loads(sys.argv[1])}))
print(json.dumps({"loaded": e.report.compile_loaded, "rebuilt": e.report.compile_cache_rebuilt,
                  "kernels": e.report.kernel_choices,
                  "tokens": e.generate([[1, 2, 3], [9, 8, 7, 6]], SamplingParams(max_tokens=6))}))
"""


def _start(tmp_path: Path, **overrides) -> dict:
    env = dict(os.environ, GRAPHBENCH_CACHE_ROOT=str(tmp_path / "cache"), XDG_CONFIG_HOME=str(tmp_path / "config"),
               PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(overrides)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_warm_start_loads_the_signed_entry(tmp_path):
    """The same config again loads its entry; another config loads the kernel choices the first timed."""
    cold = _start(tmp_path)
    warm = _start(tmp_path)
    assert not cold["loaded"] and warm["loaded"] and not warm["rebuilt"]
    assert warm["tokens"] == cold["tokens"]
    # the projections' kernels: timed by the cold start, loaded by the warm one (no timing), the same
    assert cold["kernels"]["source"] == "measured" and warm["kernels"]["source"] == "loaded"
    assert warm["kernels"]["choices"] == cold["kernels"]["choices"] and len(cold["kernels"]["choices"]) >= 5
    (entry,) = (tmp_path / "cache" / "torch_compile_cache").glob("*/rank_0_0")
    signed = json.loads((entry / "manifest.json").read_text())["files"]
    assert any(name.startswith("triton/") for name in signed)  # the kernels the capture compiled
    # another config (a new entry: max_num_seqs is a hash factor, max_num_batched_tokens and so the row
    # classes the same) with the same projection shapes: this GPU's choices, not timed again
    other = _start(tmp_path, **{"scheduler.max_num_seqs": 4})
    assert not other["loaded"] and other["kernels"]["source"] == "shared"
    assert other["kernels"]["choices"] == cold["kernels"]["choices"]


SEARCH = """
import json, sys
from graphbench.config import load_engine_config
from graphbench.runner.kernel_search import search_apart_for
config = load_engine_config(overrides={"model.model": "tiny-llama", "model.device": "cuda", "optimization_level": 2,
                                       "scheduler.max_num_seqs": 8, "cache.gpu_memory_utilization": 0.2})
done = set()
print(json.dumps([search_apart_for(config, sys.argv[1], done), search_apart_for(config, sys.argv[1], done)]))
"""


def test_a_round_s_search_apart_is_what_its_warm_start_runs(tmp_path):
    """bench/round_searches.py's search process (one layer, no engine) stores choices under the round's name;
    a warm start with model.kernel_search = that name loads them as shared, times nothing, keeps its entry's
    own choices for the next start without the name."""
    env = dict(os.environ, GRAPHBENCH_CACHE_ROOT=str(tmp_path / "cache"), XDG_CONFIG_HOME=str(tmp_path / "config"),
               PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    cold = _start(tmp_path)
    proc = subprocess.run([sys.executable, "-c", SEARCH, "abc-r2"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, again = json.loads(proc.stdout.strip().splitlines()[-1])
    assert first["choices"] == len(cold["kernels"]["choices"]) and first["seconds"] > 0
    assert again is None  # the same model shapes in one search process: timed once
    (stored,) = (tmp_path / "cache" / "kernel_choices").glob("*-abc-r2.json")
    searched = next(iter(json.loads(stored.read_text())["sets"].values()))["choices"]
    round_two = _start(tmp_path, **{"model.kernel_search": "abc-r2"})
    assert round_two["loaded"] and round_two["kernels"]["source"] == "shared"
    assert round_two["kernels"]["search"] == "abc-r2" and round_two["kernels"]["choices"] == searched
    assert _start(tmp_path)["kernels"] == {**cold["kernels"], "source": "loaded", "seconds": pytest.approx(0, abs=5)}
