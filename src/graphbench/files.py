"""Writing a file so that a reader never sees half of it: all of it, or what was there before (no torch).

The bytes go to a temporary file beside the target, are flushed to disk, and replace the target in one
rename. A full disk or a killed process leaves the old file (and at most a `.tmp-*` file, which the result
loader skips), never a truncated report, chart or gate file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | Path, data: str | bytes, encoding: str = "utf-8") -> Path:
    """Write data to path atomically (temp file + fsync + rename); OSError as the system said it."""
    path = Path(path)
    payload = data.encode(encoding) if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{path.name[:40]}-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def try_create(folder: str | Path, kind: str = "file") -> None:
    """Make a file (or, kind "folder", a folder) in folder and remove it at once: OSError where none can be
    made. (os.access is not enough: root passes it in /proc and /sys, and on a read-only mount.)"""
    if kind == "folder":
        os.rmdir(tempfile.mkdtemp(prefix=".tmp-probe-", dir=folder))
    else:
        fd, name = tempfile.mkstemp(prefix=".tmp-probe-", dir=folder)
        os.close(fd)
        os.unlink(name)
