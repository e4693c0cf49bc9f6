"""The benchmark scripts that start an engine refuse a model they cannot build in one line and exit 2, before
starting any process of their own; decode.py, roofline.py and lora.py a machine without CUDA too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True, text=True,
                          env=env, timeout=120, cwd=ROOT)


@pytest.mark.parametrize("script", ["decode.py", "roofline.py", "lora.py", "startup.py", "graph_memory.py", "tune_time.py",
                                    "speculative.py", "profile_step.py"])
def test_an_unknown_model_is_one_line_and_exit_2(script):
    done = _run(script, "--model", "no-such-model")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith("error: unknown model 'no-such-model'") and "smollm2-135m" in done.stderr


def test_a_checkpoint_folder_without_the_shape_is_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    done = _run("decode.py", "--model", str(tmp_path), "--load-format", "dummy", "--levels", "2", "--peers", "")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: model config") and str(tmp_path) in done.stderr


@pytest.mark.skipif(subprocess.run([sys.executable, "-c", "import torch, sys; sys.exit(torch.cuda.is_available())"])
                    .returncode != 0, reason="CUDA is here")
def test_a_machine_without_cuda_is_told_so():
    done = _run("roofline.py", "--model", "smollm2-135m")
    assert done.returncode == 2 and done.stderr.startswith("error: roofline.py times a CUDA GPU's")
    assert "this machine has none" in done.stderr and "Traceback" not in done.stderr


def test_profile_step_runs_the_cpu_s_built_in_model_with_typed_overrides():
    """profile_step.py on the CPU with tiny-llama (2048 positions: the context is capped to them), and a --set
    value that is a number reaches the config as one."""
    done = _run("profile_step.py", "--model", "tiny-llama", "--level", "0", "--batches", "1", "--steps", "3",
                "--set", "scheduler.max_num_batched_tokens=2048")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "batch 1 (NONE, padded 1): engine step" in done.stdout
    bad = _run("profile_step.py", "--model", "tiny-llama", "--set", "no-equals-sign")
    assert bad.returncode != 0 and "expected key=value" in bad.stderr


def test_host_step_runs_its_own_model_within_the_model_s_positions():
    """host_step.py times the host's side of a step on tiny-llama (2048 positions): its context fits them."""
    done = _run("host_step.py", "--batches", "1", "--steps", "20")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "batch    1: step" in done.stdout
