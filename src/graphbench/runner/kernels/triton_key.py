"""Triton's compiler key, kept across processes: a warm start does not hash libtriton again.

Triton names every compiled kernel in its cache by `triton_key()`: its version and a sha256 of its
compiler, backend and language sources and of libtriton (~500 MB). Each process computes it at its first
kernel compile or cache load: 0.35 s of a 6.3-s warm start on the H200 machine (cProfile; benchmarks/RESULTS.md,
2026-12-01, "a warm start that does not import the compile stack"), 1.4 s on a 2-core CPU.

`remember_triton_key(folder)` keeps the value in a file named after the identities of the files it
hashes (path, size, modification time: a reinstall or an edit changes them) and hands Triton's cache
lookup the kept value, the way Triton's own compile workers receive it from their parent
(`triton.runtime.cache.triton_key = lambda: key`). A missing, unreadable or implausible file: the key
is computed as before, and kept. GRAPHBENCH_TRITON_KEY_CACHE=0: never. Modules that copied the function
when imported (Triton's autotuner cache, Inductor's triton_compat) still compute it themselves if they
ask: neither does on a warm start of graphbench's own kernels.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from graphbench import env

HASHED_FOLDERS = ("compiler", "backends", "language")  # with runtime/cache.py and libtriton: what triton_key reads


def triton_files_identity(triton_root: Path) -> str:
    """A sha256 over (path, size, mtime) of every file triton_key hashes under this Triton package."""
    entries = []
    for name in HASHED_FOLDERS:
        for folder, _dirs, files in os.walk(triton_root / name):
            entries.extend(os.path.join(folder, f) for f in files if f.endswith(".py"))
    entries.append(str(triton_root / "runtime" / "cache.py"))
    entries.extend(str(p) for p in (triton_root / "_C").glob("libtriton*"))
    digest = hashlib.sha256()
    for path in sorted(entries):
        info = os.stat(path)
        digest.update(f"{os.path.relpath(path, triton_root)}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def remember_triton_key(folder: Path) -> str | None:
    """Make this process's triton_key() the kept value (computing and keeping it when there is none);
    returns how: "kept" (read back), "computed" (and written), or None (no Triton, the switch off,
    a Triton without this function, or its files unreadable)."""
    if not env.hatch(env.TRITON_KEY_CACHE):
        return None
    try:
        import triton
        import triton.runtime.cache as triton_cache
    except ImportError:
        return None
    compute = getattr(triton_cache, "triton_key", None)
    if compute is None:
        return None
    version = str(getattr(triton, "__version__", ""))
    if not version:  # nothing to check a kept value against
        return None
    try:
        identity = triton_files_identity(Path(triton_cache.__file__).resolve().parents[1])
    except OSError:
        return None
    kept = folder / f"{identity[:32]}.key"
    try:
        value = kept.read_text()
        how = "kept"
    except (OSError, UnicodeDecodeError):
        value = ""
    if not value or not value.startswith(version):  # (triton_key starts with Triton's version)
        value, how = compute(), "computed"
        _write_whole(kept, value)
    triton_cache.triton_key = lambda: value
    return how


def _write_whole(path: Path, text: str) -> None:
    """Write under a private name and rename into place: a reader sees the whole value or none."""
    part = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part.write_text(text)
        os.replace(part, path)
    except OSError:  # not kept: the next process computes it again
        with contextlib.suppress(OSError):
            part.unlink()
