"""Why a start was cold: the compile-cache hash factors of two entries or engine configs, side by side.

No torch import (`graphbench cache diff` starts fast). An entry's factors are what its start recorded
in graphbench_meta.json (``factors.hash_factors``; entries written before that was recorded have only
their config, and are an error saying so). A config's factors are computed the way the engine would
compute them on this machine: its -O preset and device defaults applied (`EngineConfig.resolve`),
device "auto" as CUDA when nvidia-smi lists a GPU (and CUDA_VISIBLE_DEVICES does not hide it), dtype
"auto" as bfloat16 on CUDA and float32 on the CPU, torch's version from the installed package's
metadata. Where the GPU cannot be known here the factors are the CPU's, and a note says so.
"""

from __future__ import annotations

import json
import platform
import subprocess
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from graphbench import env
from graphbench.errors import GraphbenchError
from graphbench.runner.compile.cache import CACHE_SUBDIR, META_FILE, cache_root, compile_hash, entry_factors


@dataclass(frozen=True)
class FactorSet:
    """One side of a diff: what it is, its hash factors by name, and notes on how they were found."""

    kind: str  # "entry" or "config"
    label: str  # the entry's hash, or the config file
    path: str
    factors: dict[str, Any]
    notes: tuple[str, ...] = ()
    device_name: str | None = None  # the GPU (or CPU) it is for; not a hash factor
    summary: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "label": self.label, "path": self.path, "summary": self.summary,
                "device_name": self.device_name, "notes": list(self.notes)}


@dataclass(frozen=True)
class FactorDiff:
    name: str
    a: Any
    b: Any


MISSING = "(not a factor)"
SECTION_HASH = " (section hash)"  # the suffix of a section's hash in the factors (runner/compile/cache.py)


def diff_factors(a: FactorSet, b: FactorSet) -> list[FactorDiff]:
    """The factors whose values differ (a factor only one side has shows MISSING on the other)."""
    names = list(dict.fromkeys([*a.factors, *b.factors]))
    diffs = [FactorDiff(n, a.factors.get(n, MISSING), b.factors.get(n, MISSING)) for n in names
             if a.factors.get(n, MISSING) != b.factors.get(n, MISSING)]
    # a section's hash is shown only when none of its named factors explains it (a factor not named here)
    named = {d.name.partition(".")[0] for d in diffs if not d.name.endswith(SECTION_HASH)}
    return [d for d in diffs if not d.name.endswith(SECTION_HASH) or d.name.removesuffix(SECTION_HASH) not in named]


def factor_set(text: str) -> FactorSet:
    """A cache entry (hash, unique hash prefix, or its directory) or an engine config (TOML file)."""
    if not text.strip():  # (Path("") is ".", the working directory)
        raise GraphbenchError("cache diff takes two entries (a hash, a unique hash prefix or a folder) or config "
                              "files; got an empty one")
    path = Path(text).expanduser()
    if path.is_file() and path.name != META_FILE:
        return config_factor_set(path)
    return entry_factor_set(find_entry(text))


def find_entry(text: str) -> Path:
    """The entry directory named by a hash, a unique hash prefix, or a path to it (or into it)."""
    path = Path(text).expanduser()
    if path.exists():
        for candidate in (path, path.parent, path.parent.parent):
            if (candidate / META_FILE).is_file():
                return candidate
        raise GraphbenchError(f"{path} is not a compile-cache entry (no {META_FILE} in it or above it)")
    base = cache_root() / CACHE_SUBDIR
    names = sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
    matches = [n for n in names if n.startswith(text)] if text else []
    if len(matches) == 1:
        return base / matches[0]
    if matches:
        raise GraphbenchError(f"{text!r} is the start of {len(matches)} entries ({', '.join(matches[:5])}): give more of it")
    raise GraphbenchError(f"no compile-cache entry or config file {text!r} (entries under {base}: "
                          f"{', '.join(names[:8]) or 'none'}{' ...' if len(names) > 8 else ''})")


def entry_factor_set(entry: Path) -> FactorSet:
    meta_path = entry / META_FILE
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError, RecursionError) as exc:
        raise GraphbenchError(f"{meta_path}: unreadable entry metadata ({type(exc).__name__})") from None
    recorded = meta.get("factors") if isinstance(meta, dict) else None
    factors = recorded.get("hash_factors") if isinstance(recorded, dict) else None
    if not isinstance(factors, dict):
        raise GraphbenchError(f"entry {entry.name} predates hash-factor recording: its {META_FILE} holds no "
                              "factors.hash_factors (graphbench records them when it writes an entry); compare "
                              "configs instead, or clear the entry and start again to record them")
    device = recorded.get("device_name")
    summary = meta.get("summary")
    return FactorSet("entry", entry.name, str(entry), factors, device_name=device if isinstance(device, str) else None,
                     summary=summary if isinstance(summary, str) else "")


@dataclass(frozen=True)
class Machine:
    """What the engine would find here, read without torch."""

    device: str  # "cuda" or "cpu"
    name: str
    total_memory: int | None = None
    capability: tuple[int, int] | None = None
    notes: tuple[str, ...] = field(default=())


def this_machine() -> Machine:
    """The first visible GPU from nvidia-smi, else the CPU (with a note saying why)."""
    cpu = platform.processor() or platform.machine()
    if env.visible_devices() in ("", "-1"):
        return Machine("cpu", cpu, notes=("CUDA_VISIBLE_DEVICES hides every GPU: the CPU's factors",))
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,compute_cap", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
        name, memory, cap = [part.strip() for part in out.splitlines()[0].split(",")]
        major, _, minor = cap.partition(".")
        return Machine("cuda", name, int(float(memory)) << 20, (int(major), int(minor or 0)))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return Machine("cpu", cpu, notes=("no GPU found here (nvidia-smi lists none): the GPU is unknown, the "
                                          "factors are the CPU's",))


def config_factor_set(path: Path, machine: Machine | None = None) -> FactorSet:
    """A TOML engine config's hash factors as the engine would compute them on this machine."""
    from graphbench.config.engine_config import load_engine_config  # (no torch)

    config = load_engine_config(path)
    machine = machine or this_machine()
    notes = list(machine.notes)
    device = config.model.device
    if device == "auto":
        device = machine.device
    elif device == "cuda" and machine.device != "cuda":
        notes.append("device cuda, but no GPU is visible here: a start would fail; the GPU's defaults are unknown")
    cuda = device == "cuda" and machine.device == "cuda"
    resolved = config.resolve(blackwell=cuda and machine.capability is not None and machine.capability[0] == 10,
                              device_name=machine.name if cuda else None,
                              device_memory=machine.total_memory if cuda else None)
    resolved.model.device = device
    if resolved.model.dtype == "auto":
        from graphbench.config.arch import auto_dtype

        resolved.model.dtype = auto_dtype(resolved.model.model, device)
    if device != "cuda":
        resolved.compilation.max_autotune = False  # as the engine does on the CPU
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = "absent"
        notes.append("torch is not installed here: its version is unknown")
    notes.append(f"{path} compiles to entry {compile_hash(resolved.compute_hash(), torch_version)} here")
    return FactorSet("config", str(path), str(path), entry_factors(resolved, torch_version), tuple(notes),
                     device_name=machine.name if cuda else (machine.name if device == "cpu" else None),
                     summary=resolved.summary())
