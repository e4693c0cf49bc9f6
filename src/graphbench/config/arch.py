"""Model architecture: from a built-in preset (sample_configs/models/*.toml) or a checkpoint's config.json
(config/hf_config.py reads it); the shape itself is config/arch_shape.py's ArchConfig.

Pure Python (no torch): the CLI and the config hash read it without starting the engine.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from graphbench.config.arch_shape import SUPPORTED_ARCHITECTURES, ArchConfig
from graphbench.config.hf_config import arch_from_dict, arch_from_hf_dir
from graphbench.config.tomlio import read_toml
from graphbench.config.validate import suggest
from graphbench.errors import GraphbenchError

__all__ = ["SUPPORTED_ARCHITECTURES", "ArchConfig", "auto_dtype", "list_presets", "load_arch"]

PRESET_DIR = Path(__file__).resolve().parent.parent / "sample_configs" / "models"


def list_presets() -> list[str]:
    """Names of the built-in model presets."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def checkpoint_folder(model: str) -> Path | None:
    """The checkpoint folder `model` names, or None where it names a preset. A folder that shares a preset's name
    but holds no config.json (a results folder named after its model, where a command runs) is not one: the
    preset is meant, as it would be anywhere else."""
    path = Path(model).expanduser()
    if not path.is_dir():
        return None
    if (PRESET_DIR / f"{model}.toml").is_file() and not (path / "config.json").exists():
        return None
    return path


def load_arch(model: str) -> ArchConfig:
    """Resolve a preset name or a checkpoint folder to its architecture (folders are read afresh)."""
    path = Path(model).expanduser()
    if (folder := checkpoint_folder(model)) is not None:
        return arch_from_hf_dir(folder)
    if (PRESET_DIR / f"{model}.toml").is_file():
        return _load_preset(model)
    if path.exists() or "/" in model:
        raise GraphbenchError(f"model {model!r} is not a checkpoint folder (expected a folder with config.json)")
    raise GraphbenchError(
        f"unknown model {model!r}{suggest(model, list_presets())}; built-in presets: {', '.join(list_presets())}, "
        "or pass a checkpoint folder"
    )


def auto_dtype(model: str, device_type: str) -> str:
    """What --dtype auto means for this model on this device. On a GPU a checkpoint's own 16-bit dtype
    (config.json's dtype / torch_dtype), as vLLM keeps it; bfloat16 for float32 checkpoints and presets.
    On the CPU float32 (what the CPU path is tested and compiled in)."""
    if device_type != "cuda":
        return "float32"
    folder = checkpoint_folder(model)
    config = folder / "config.json" if folder is not None else None
    try:
        data = json.loads(config.read_text(encoding="utf-8")) if config is not None and config.is_file() else {}
    except (OSError, ValueError):
        data = {}  # (the architecture's own reading of the file says what is wrong with it)
    # (a null dtype is an absent one: transformers 5 writes dtype, older versions torch_dtype)
    named = (data.get("dtype") or data.get("torch_dtype")) if isinstance(data, dict) else None
    return named if named in ("bfloat16", "float16") else "bfloat16"


@lru_cache(maxsize=None)
def _load_preset(name: str) -> ArchConfig:
    return arch_from_dict(read_toml(PRESET_DIR / f"{name}.toml"), source=name)
