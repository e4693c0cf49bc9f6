"""Whether a compile-cache entry may be loaded: a manifest signed with this user's key.

A cache entry holds pickles (the split graph, Inductor's and AOTAutograd's caches) and compiled
libraries: loading one runs code. Whoever can write the cache root could otherwise make a later
start run theirs (a shared cache folder, a CI cache restored from an untrusted branch). So:
- each complete entry has a manifest: the size and sha256 of every file in it, and an HMAC-SHA256 of
  that list under a key only this user can read (`<config dir>/graphbench/cache.key`, created 0600
  on first use, never inside the cache root);
- before anything in an entry is loaded, the signature and every listed file are checked; an entry
  that fails is deleted and compiled afresh, never loaded; files the manifest does not list (a kernel
  compiled after the entry was signed, or one planted) are deleted, so they are compiled again;
- a cache root that another user owns or can write is refused.
An entry signed by another user's key (a cache copied from elsewhere) is rebuilt, not trusted.
No torch import: `graphbench cache` uses it too.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path

from graphbench import env
from graphbench.errors import GraphbenchError

MANIFEST = "manifest.json"
KEY_BYTES = 32


def key_path() -> Path:
    """$XDG_CONFIG_HOME/graphbench/cache.key (default ~/.config/graphbench/cache.key)."""
    return env.config_home() / "graphbench" / "cache.key"


def signing_key(cache_root: Path) -> bytes:
    """This user's key (created on first use), checked to be private and outside the cache root."""
    path = key_path()
    if _inside(path, cache_root):
        raise GraphbenchError(f"the cache key {path} is inside the cache root {cache_root}: whoever can write the "
                              f"cache could replace it; set XDG_CONFIG_HOME or {env.CACHE_ROOT} elsewhere")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:  # a read-only home, or a file where the folder goes
        raise GraphbenchError(f"cannot create the cache key's folder {path.parent}: {exc.strerror or exc}; set "
                              "XDG_CONFIG_HOME to a folder you can write") from exc
    if not path.exists():
        # written whole under a private name, then linked into place: a start racing this one (two first
        # starts at once) finds either no key or all of it, never an empty file
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(secrets.token_bytes(KEY_BYTES))
            try:
                os.link(tmp, path)
            except FileExistsError:  # the other start's key won: use it
                pass
            except OSError:  # no hard links here (vfat, some FUSE and SMB mounts): a rename is atomic too,
                # though a racing start's key may replace this one (before anything is signed with it)
                if not path.exists():
                    os.replace(tmp, path)
        except OSError as exc:
            raise GraphbenchError(f"cannot create the cache key {path}: {exc.strerror or exc}; set XDG_CONFIG_HOME "
                                  "to a folder you can write") from exc
        finally:
            tmp.unlink(missing_ok=True)
    info = path.stat()
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise GraphbenchError(f"the cache key {path} must be a regular file only you can read (chmod 600 {path})")
    key = path.read_bytes()
    if len(key) < KEY_BYTES:
        raise GraphbenchError(f"the cache key {path} is damaged ({len(key)} bytes); delete it (cached entries are "
                              "then compiled afresh)")
    return key


def check_private_root(root: Path) -> None:
    """The cache root (and its torch_compile_cache and kernel_choices folders) must be this user's and not
    writable by others (kernel choices are copied into the signed entries)."""
    for folder in (root, root / "torch_compile_cache", root / "kernel_choices"):
        try:
            info = folder.stat()
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            raise GraphbenchError(f"cache root {folder} is not a folder ({env.CACHE_ROOT})")
        if info.st_uid != os.getuid() or info.st_mode & 0o022:
            raise GraphbenchError(
                f"cache root {folder} is owned or writable by another user: an entry planted there would run as you; "
                f"use a private {env.CACHE_ROOT} (or chmod go-w it)")


def write_manifest(directory: Path, key: bytes) -> None:
    """Sign the size and sha256 of every file of a complete entry. A file the entry's current signed
    manifest lists with the same size, not modified since that manifest was written, keeps its digest
    (a warm start would otherwise hash the whole entry twice more); nothing is written when no file changed.
    A stale digest cannot bless an altered file: admit_entry checks every digest before the next load."""
    previous, signed_at = _signed_files(directory, key)
    files = {}
    for path in sorted(directory.rglob("*")):
        if not path.is_file() or path.name == MANIFEST:
            continue
        name, info = str(path.relative_to(directory)), path.stat()
        known = previous.get(name)
        fresh = known is not None and known[0] == info.st_size and info.st_mtime_ns < signed_at
        files[name] = [info.st_size, known[1] if fresh else _digest(path)]
    if files == previous:
        return
    tmp = directory / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps({"files": files, "hmac": _sign(key, files)}))
    os.replace(tmp, directory / MANIFEST)


def _signed_files(directory: Path, key: bytes) -> tuple[dict, int]:
    """(the files the entry's manifest lists, the manifest's mtime in ns) when it is signed with key; else ({}, 0)."""
    path = directory / MANIFEST
    try:
        manifest = json.loads(path.read_text())
        files, signature = manifest["files"], manifest["hmac"]
        if isinstance(files, dict) and isinstance(signature, str) and hmac.compare_digest(signature, _sign(key, files)):
            return files, path.stat().st_mtime_ns
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        pass
    return {}, 0


def admit_entry(directory: Path, key: bytes) -> str | None:
    """Check an entry before anything in it is loaded: None when it may be (files it does not list are
    deleted first); else what is wrong with it. Nothing in it is loaded here."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
        files, signature = manifest["files"], manifest["hmac"]
        if not isinstance(files, dict) or not isinstance(signature, str):
            raise TypeError("fields of the wrong type")
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        return f"manifest unreadable or unsigned ({exc})"
    if not hmac.compare_digest(signature, _sign(key, files)):
        return "manifest not signed with this user's cache key (written elsewhere, or altered)"
    for name, entry in files.items():
        path = directory / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != entry[0] or _digest(path) != entry[1]:
            return f"{name} is corrupt or truncated"
    for path in directory.rglob("*"):
        if (path.is_file() or path.is_symlink()) and path.name != MANIFEST and str(path.relative_to(directory)) not in files:
            path.unlink()
    return None


def _sign(key: bytes, files: dict) -> str:
    return hmac.new(key, json.dumps(files, sort_keys=True).encode(), hashlib.sha256).hexdigest()


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.expanduser().resolve())
        return True
    except ValueError:
        return False
