"""One sweep per results folder at a time: a lock file holding the sweep's pid."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from graphbench.errors import GraphbenchError


@contextmanager
def sweep_lock(results_dir: Path) -> Iterator[None]:
    """One sweep per results folder at a time; a lock left by a dead sweep is taken over."""
    results_dir.mkdir(parents=True, exist_ok=True)
    lock = results_dir / ".sweep.lock"
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                pid = int(lock.read_text().strip() or 0)
            except (OSError, ValueError):
                pid = 0
            if pid and _alive(pid):
                raise GraphbenchError(
                    f"another sweep (pid {pid}) is writing to {results_dir}; wait for it, or use another --results "
                    f"(remove {lock} if that process is gone)") from None
            lock.unlink(missing_ok=True)  # stale: its sweep died
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        break
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
