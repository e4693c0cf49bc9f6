"""Keep Python's bytecode where the interpreter would not, so that a warm start does not compile torch.

An interpreter told not to write bytecode (PYTHONDONTWRITEBYTECODE, common in container images) over a
site-packages that holds none compiles every module it imports from source, in every process. On the
H200 machine `import torch` then took 3.9-6.8 s against 2.1-2.4 s with bytecode kept, and importing
torch's compile stack 14.9-16.1 s against 5.6 s (benchmarks/RESULTS.md, 2026-12-01, "a warm start that does
not import the compile stack"). graphbench's commands then keep bytecode under the cache root, in `<cache root>/bytecode`
(Python's pycache prefix), for themselves and the processes they start: Inductor's compile workers,
a sweep's points. A .pyc there runs as you, so the folder must be yours and writable by nobody else,
as the compile cache is (otherwise nothing changes).
No torch import (it runs before torch is imported).
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from collections.abc import MutableMapping
from pathlib import Path


PROBE_PACKAGE = "torch"  # the imports that cost seconds


def bytecode_is_kept(source: Path) -> bool:
    """Whether this interpreter reads or writes bytecode for this module's source: its .pyc exists (where
    sys.pycache_prefix, if set, puts it), or the interpreter may write one."""
    cached = Path(importlib.util.cache_from_source(str(source)))
    if cached.is_file():
        return True
    if sys.dont_write_bytecode:
        return False
    folder = cached.parent
    while not folder.is_dir():  # (Python creates the missing folders)
        folder = folder.parent
    return os.access(folder, os.W_OK)


def _private_folder(folder: Path) -> bool:
    """Create the folder (0700) and check that it and its parent are this user's and nobody else's to write."""
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        for path in (folder, folder.parent):
            info = path.stat()
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
                return False
    except OSError:
        return False
    return True


def keep_bytecode(cache_root: Path, environ: MutableMapping[str, str] = os.environ,
                  probe: Path | None = None) -> Path | None:
    """Point Python's pycache prefix at <cache_root>/bytecode when torch's bytecode is neither cached nor
    written; returns that folder, or None when nothing was changed (bytecode already kept, the folder not
    private, torch not installed). Sets the environment so that child processes
    do the same. probe: a module source to test (default torch's __init__.py)."""
    if probe is None:
        try:
            spec = importlib.util.find_spec(PROBE_PACKAGE)  # (a top-level package: found, not imported)
        except (ImportError, ValueError):  # not installed, or an import hook refuses it
            return None
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            return None
        probe = Path(spec.origin)
    if bytecode_is_kept(probe):
        return None
    folder = cache_root / "bytecode"
    if not _private_folder(folder):
        return None
    sys.pycache_prefix, sys.dont_write_bytecode = str(folder), False
    environ["PYTHONPYCACHEPREFIX"] = str(folder)
    environ.pop("PYTHONDONTWRITEBYTECODE", None)
    return folder
