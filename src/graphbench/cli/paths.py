"""Paths a user names: output paths checked before any work, written without blocking on a FIFO; input
paths read once each."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from graphbench.errors import GraphbenchError
from graphbench.files import try_create, write_atomic


def _nearest_existing_parent(path: Path) -> Path:
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent


def cannot_create(folder: Path, kind: str) -> str | None:
    """Why a new file (or folder) cannot be made in `folder` (files.try_create), or None."""
    try:
        try_create(folder, kind)
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()
    return None


def check_output_folder(out: Path) -> None:
    """Fail before any work (and before printing anything) when `out` cannot become the output folder:
    it is an existing file, the nearest existing parent is a file or not writable, the name too long."""
    try:
        if out.exists():
            if not out.is_dir():
                raise GraphbenchError(f"output path exists and is not a folder: {out}")
            if why := cannot_create(out, "file"):
                raise GraphbenchError(f"cannot write into output folder {out}: {why}: name a folder you can write")
            return
        if out.is_symlink():  # (exists() is False for a link to nothing, or to itself: making the folder fails)
            raise GraphbenchError(f"output path {out} is a link that leads to no folder (dangling, or a loop): "
                                  "name another folder, or remove the link")
        parent = _nearest_existing_parent(out)
    except OSError as exc:  # a name too long, a link loop
        raise GraphbenchError(f"cannot use output folder {out}: {exc.strerror or exc}") from None
    if not parent.is_dir():
        raise GraphbenchError(f"cannot create output folder {out}: {parent} is not a folder")
    if why := cannot_create(parent, "folder"):
        raise GraphbenchError(f"cannot create output folder {out}: {why} in {parent}: name a folder you can write")


def check_output_file(path: Path, option: str) -> None:
    """`path` can be written: a regular file or a new one in a folder that can be made, or a stream
    (a FIFO, /dev/stdout); never a folder."""
    try:
        if path.exists():
            mode = path.stat().st_mode
            if stat.S_ISDIR(mode):
                raise GraphbenchError(f"{option} {path} is a folder, not a file")
            if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
                raise GraphbenchError(f"{option} {path} is not a file that can be written")
            if not stat.S_ISREG(mode):
                return  # a stream: written in place
            path = path.resolve()  # (a link: its target is written)
        parent = _nearest_existing_parent(path)
    except OSError as exc:
        raise GraphbenchError(f"cannot use {option} {path}: {exc.strerror or exc}") from None
    if not parent.is_dir():
        raise GraphbenchError(f"cannot create {option} {path}: {parent} is not a folder")
    # where write_atomic puts its temporary file (os.access passes root under /sys and /proc)
    if why := cannot_create(parent, "file" if parent == path.absolute().parent else "folder"):
        raise GraphbenchError(f"cannot write {option} {path}: {why} in {parent}: name a file in a folder you can write")


def write_output_text(path: Path, text: str, option: str) -> None:
    """Write `text` to `path` (its folders made): a file atomically (a link's target), a stream (a FIFO, a
    character device such as /dev/stdout) in place. A FIFO nobody reads is an error, not a wait forever."""
    try:
        mode = path.stat().st_mode if path.exists() else 0
        if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):  # never replaced by a file (as root: /dev/null itself)
            try:
                fd = os.open(path, os.O_WRONLY | (os.O_NONBLOCK if stat.S_ISFIFO(mode) else 0))
            except OSError as exc:
                if exc.errno == errno.ENXIO:
                    raise GraphbenchError(f"{option} {path} is a FIFO that no process reads") from None
                raise
            os.set_blocking(fd, True)
            with os.fdopen(fd, "w") as stream:
                stream.write(text)
            return
        path = path.resolve()  # a link to a file: the file is replaced, not the link
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
    except OSError as exc:
        raise GraphbenchError(f"cannot write {option} {path}: {exc.strerror or exc}") from None


def unique_inputs(paths: list[Path], option: str, warnings: list[str]) -> list[Path]:
    """`paths` without those another one already reads (the same file or folder by its resolved path,
    or a .json file or a folder inside a given folder), first kept; a warning for each one dropped."""
    resolved = []
    for path in paths:
        try:
            resolved.append(path.resolve())
        except (OSError, RuntimeError):  # a link loop: left for the reader to name
            resolved.append(path.absolute())
    kept: list[Path] = []
    for i, (path, real) in enumerate(zip(paths, resolved)):
        same = next((paths[j] for j in range(i) if resolved[j] == real), None)
        within = next((paths[j] for j, folder in enumerate(resolved) if folder != real and folder in real.parents
                       and folder.is_dir() and (real.is_dir() or real.suffix == ".json")), None)
        if same is not None:
            shown = "" if same == path else f" (as {same})"
            warnings.append(f"{option} {path} is given twice{shown}: read once")
        elif within is not None:
            warnings.append(f"{option} {path} is inside {option} {within}: read once")
        else:
            kept.append(path)
    return kept
