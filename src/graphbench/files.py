"""Writing a file so that a reader never sees half of it: all of it, or what was there before (no torch).

The bytes go to a temporary file beside the target, are flushed to disk, and replace the target in one
rename. A full disk or a killed process leaves the old file (and at most a `.tmp-*` file, which the result
loader skips), never a truncated report, chart or gate file. The file gets the mode any new file gets under
the user's umask (0644 under umask 022), not tempfile.mkstemp's 0600: reports and results are shared.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path

NEW_FILE_MODE = 0o666  # what open() asks for a new file; the kernel takes the umask off


def create_temp(folder: str | Path, prefix: str = ".tmp-", suffix: str = "") -> tuple[int, str]:
    """A new file in folder, opened for writing: (fd, path), as tempfile.mkstemp, but with the umask's mode
    (mkstemp's files are 0600, and a rename keeps that mode). Never a file that exists or a link's target."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        path = os.path.join(folder, f"{prefix}{secrets.token_hex(6)}{suffix}")
        try:
            return os.open(path, flags, NEW_FILE_MODE), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder}")


def write_atomic(path: str | Path, data: str | bytes, encoding: str = "utf-8") -> Path:
    """Write data to path atomically (temp file + fsync + rename); OSError as the system said it."""
    path = Path(path)
    payload = data.encode(encoding) if isinstance(data, str) else data
    fd, tmp = create_temp(path.parent, prefix=f".tmp-{path.name[:40]}-")
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
