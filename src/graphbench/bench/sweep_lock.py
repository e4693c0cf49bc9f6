"""One sweep per results folder at a time: an OS lock (filelock) on `.sweep.lock`.

The lock is the operating system's (flock on Unix): it is held while the sweep's process holds the
file open and dies with that process, so there is no stale lock to guess about and no window in
which two sweeps both think they hold it. Who holds it is written, after it is taken, to
`.sweep.holder`, for the message a second sweep gets.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from graphbench.bench.environment import utc_now
from graphbench.errors import GraphbenchError

LOCK_NAME = ".sweep.lock"
HOLDER_NAME = ".sweep.holder"


@contextmanager
def sweep_lock(results_dir: Path) -> Iterator[None]:
    """Hold the results folder's sweep lock for the block; another sweep holding it is an error."""
    results_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(results_dir / LOCK_NAME, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise GraphbenchError(_held(results_dir)) from None
    try:
        (results_dir / HOLDER_NAME).write_text(f"pid {os.getpid()} on {socket.gethostname()}, since {utc_now()}\n")
        yield
    finally:
        (results_dir / HOLDER_NAME).unlink(missing_ok=True)
        lock.release()


def check_unlocked(results_dir: Path) -> None:
    """GraphbenchError now, before a sweep prints anything, when another sweep holds the folder's lock
    (sweep_lock takes it when the sweep starts)."""
    if not (results_dir / LOCK_NAME).is_file():
        return
    lock = FileLock(results_dir / LOCK_NAME, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise GraphbenchError(_held(results_dir)) from None
    lock.release()


def _held(results_dir: Path) -> str:
    return f"another sweep ({holder(results_dir)}) is writing to {results_dir}; wait for it, or use another --results"


def holder(results_dir: Path) -> str:
    """Who holds the folder's lock, as its holder wrote it ('holder unknown' before it has written)."""
    try:
        return (results_dir / HOLDER_NAME).read_text().strip()[:200] or "holder unknown"
    except (OSError, UnicodeDecodeError):
        return "holder unknown"
