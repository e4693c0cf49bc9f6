"""The on-disk compile cache: <root>/torch_compile_cache/<hash>/rank_<r>_<dp>/ (docs/MACHINERY.md §1.6).

No torch import at module level: `graphbench cache list|clear` must start fast.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator

from graphbench import __version__
from graphbench.config.hashing import hash_factors
from graphbench import env
from graphbench.errors import GraphbenchError

CACHE_SUBDIR = "torch_compile_cache"
KERNEL_CHOICES_SUBDIR = "kernel_choices"  # each GPU's timed kernel choices, shared by every entry (kernel_choice_store)
META_FILE = "graphbench_meta.json"
COMPLETE_MARKER = "compiled.ok"  # written once a start-up finished compiling into the directory
# Sources whose change changes the generated code (the model, its split, how pieces are compiled)
MODEL_SOURCES = ("model.py", "rope.py", "linear.py", "norms.py", "attention/op.py", "compile/splitting.py",
                 "compile/split.py", "compile/pieces.py", "lora/projection.py", "lora/weights.py")
# (lora: its ops' schemas, and the layer's adapter buffers and segments passed to them)


def cache_root() -> Path:
    """GRAPHBENCH_CACHE_ROOT, default ~/.cache/graphbench (checked in graphbench.env)."""
    return env.cache_root()


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def source_hash() -> str:
    runner = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for rel in MODEL_SOURCES:
        digest.update((runner / rel).read_bytes())
    return digest.hexdigest()[:10]



def environment_factors(torch_version: str) -> dict[str, str]:
    return {"torch": torch_version, "triton": _version("triton"), "graphbench": __version__,
            "model_source": source_hash()}


def config_factors(config: Any) -> dict[str, Any]:
    """A resolved EngineConfig's hash factors by name (what each section's compute_hash reads, see
    docs/CONFIG.md), and each section's hash (so a factor added to a compute_hash but not named here
    still shows as its section's hash)."""
    from graphbench.config.arch import load_arch  # local: reads a file

    model, comp = config.model, config.compilation
    factors: dict[str, Any] = {f"model.arch.{k}": v for k, v in load_arch(model.model).code_factors().items()}
    factors |= {
        "model.dtype": model.dtype, "model.device": model.device, "model.attention_backend": model.attention_backend,
        "model.kernels": model.kernels,
        "scheduler.max_num_seqs": config.scheduler.max_num_seqs,
        "scheduler.max_num_batched_tokens": config.scheduler.max_num_batched_tokens,
        "cache.block_size": config.cache.block_size,
        "compilation.mode": comp.mode.value if comp.mode else None,
        "compilation.splitting_ops": list(comp.effective_splitting_ops),
        "compilation.compile_sizes": comp.compile_sizes, "compilation.max_autotune": comp.max_autotune,
        "speculative.num_speculative_tokens": config.speculative.num_speculative_tokens,
        "parallel.tensor_parallel_size": config.parallel.tensor_parallel_size,
    }
    if config.lora.enabled:
        factors |= {f"lora.{k}": getattr(config.lora, k)
                    for k in ("enabled", "num_slots", "max_lora_rank", "cudagraph_specialize_lora")}
    sections = ["model", "scheduler", "cache", "compilation", "speculative", "parallel"] + ["lora"] * config.lora.enabled
    factors |= {f"{name} (section hash)": getattr(config, name).compute_hash() for name in sections}
    return json.loads(json.dumps(factors, default=str))  # as the metadata file holds them


def entry_factors(config: Any, torch_version: str) -> dict[str, Any]:
    """Every factor of the compile-cache hash of a resolved config, by name: the config's, then the
    environment's (torch, triton, graphbench, model_source)."""
    return config_factors(config) | environment_factors(torch_version)


def compile_hash(config_hash: str, torch_version: str) -> str:
    """Config factors + torch/triton/graphbench versions + model source. (What changes the compiled code
    is in the config: model.kernels, compilation.static_variants, ...; the debug hatches act at run time.)"""
    return hash_factors([config_hash, environment_factors(torch_version)])


def rank_dir(hash_: str, rank: int = 0, dp_rank: int = 0) -> Path:
    return cache_root() / CACHE_SUBDIR / hash_ / f"rank_{rank}_{dp_rank}"


@contextmanager
def cache_lock(directory: Path) -> Iterator[None]:
    """An exclusive lock on one config's cache entry (blocks until another start releases it)."""
    import fcntl

    directory.parent.mkdir(parents=True, exist_ok=True)
    # one lock per rank directory: the ranks of a tensor-parallel group compile side by side
    with open(directory.parent / f".lock.{directory.name}", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def write_meta(directory: Path, summary: str, factors: dict[str, Any]) -> None:
    meta = directory.parent / META_FILE
    if not meta.exists():
        meta.write_text(json.dumps({"created": time.time(), "summary": summary, "factors": factors}, indent=1))


@dataclass(frozen=True)
class CacheEntry:
    hash: str
    path: Path
    size_bytes: int
    created: float | None
    summary: str


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def made_by_graphbench(path: Path) -> bool:
    """A real folder (not a link) holding graphbench's metadata or a rank folder it finished compiling."""
    if path.is_symlink() or not path.is_dir():
        return False
    return (path / META_FILE).is_file() or any((rank / COMPLETE_MARKER).is_file() for rank in path.glob("rank_*"))


def list_entries() -> list[CacheEntry]:
    """Every compile-cache entry graphbench made under the cache root, newest first. What it did not make
    (a folder of someone's files, a link out of the root) is never an entry, so never removed."""
    base = cache_root() / CACHE_SUBDIR
    if base.is_symlink():
        raise GraphbenchError(f"{base} is a link (to {os.readlink(base)}): graphbench lists and removes entries "
                              "only in a folder of its own, never through a link; remove the link yourself")
    entries = []
    for path in sorted(base.glob("*")) if base.is_dir() else []:
        if not made_by_graphbench(path):
            continue
        created, summary = None, "?"
        meta = path / META_FILE
        if meta.is_file():
            try:
                data = json.loads(meta.read_text())
                created, summary = data.get("created"), data.get("summary", "?")
                if not isinstance(created, (int, float)) or isinstance(created, bool) or not math.isfinite(created):
                    created = None
                summary = summary if isinstance(summary, str) else "(unreadable metadata)"
            except (ValueError, OSError, AttributeError, RecursionError):  # not JSON, not UTF-8, not an object
                created, summary = None, "(unreadable metadata)"
        entries.append(CacheEntry(path.name, path, _size(path), created, summary))
    return sorted(entries, key=lambda e: -(e.created or 0))


def kernel_choices_dir() -> Path:
    return cache_root() / KERNEL_CHOICES_SUBDIR


def kernel_choice_files() -> list[Path]:
    """Each GPU's (and launch mode's) shared kernel choices (runner/kernel_choice_store.py); links are not followed."""
    folder = kernel_choices_dir()
    if folder.is_symlink() or not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.is_symlink() and p.suffix == ".json")


def kernel_choice_summary(path: Path) -> dict[str, Any]:
    """One store file for `cache list`: its name, path, and how many models' choices it holds (None: unreadable)."""
    try:
        sets = json.loads(path.read_text()).get("sets")
        models = len(sets) if isinstance(sets, dict) else None
    except (OSError, ValueError, AttributeError, RecursionError):
        models = None
    return {"file": path.name, "path": str(path), "models": models}


def clear_kernel_choices(files: list[Path]) -> list[Path]:
    """Remove these shared kernel-choice files (kernel_choice_files'); return those that could not be removed."""
    left = []
    for path in files:
        try:
            path.unlink(missing_ok=True)
        except OSError:
            left.append(path)
    return left


def select_entries(names: list[str]) -> list[CacheEntry]:
    """The entries named by hash or unique hash prefix (as `git` takes commits), each once, in the list's
    order (newest first); all when none is named. An unknown or ambiguous name is an error, raised before
    anything is done with the others."""
    entries = list_entries()
    if not names:
        return entries
    wanted: set[str] = set()
    for name in dict.fromkeys(names):
        exact = [e.hash for e in entries if e.hash == name]
        matches = exact or ([e.hash for e in entries if e.hash.startswith(name)] if name else [])
        if len(matches) > 1:
            raise GraphbenchError(f"{name!r} is the start of {len(matches)} compile-cache entries "
                                  f"({', '.join(sorted(matches)[:5])}): give more of it")
        if not matches:
            known = ", ".join(sorted(e.hash for e in entries)) or "none"
            raise GraphbenchError(f"no compile-cache entry {name!r} under {cache_root() / CACHE_SUBDIR} "
                                  f"(entries: {known})")
        wanted.add(matches[0])
    return [e for e in entries if e.hash in wanted]


def clear_entries(hashes: list[str] | None = None) -> list[CacheEntry]:
    """Remove the given entries (all when None); return what was removed."""
    entries = list_entries()
    if hashes:
        known = {e.hash for e in entries}
        unknown = [h for h in hashes if h not in known]
        if unknown:
            raise GraphbenchError(f"no compile-cache entry {unknown[0]!r} under {cache_root() / CACHE_SUBDIR}")
        entries = [e for e in entries if e.hash in hashes]
    for entry in entries:
        shutil.rmtree(entry.path, ignore_errors=True)
    return entries
