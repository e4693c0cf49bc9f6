"""The environment: the one module that reads it (no torch import).

graphbench's input is its config (`config/`). What the environment may still say, read here, lazily
(when asked, never at import) and validated (one line naming the variable and what it accepts):
- `GRAPHBENCH_CACHE_ROOT`: where compiled artefacts are kept (default `~/.cache/graphbench`);
- four debug hatches (DEBUG_HATCHES; docs/DEVELOPING.md), which results record when set off their default;
- what other programs set for a process: `CUDA_VISIBLE_DEVICES`, `XDG_CONFIG_HOME`, `TRITON_INTERPRET`,
  `TRITON_DEBUG`, and the tensor-parallel ranks' `RANK` / `LOCAL_RANK` / `WORLD_SIZE`;
- `GRAPHBENCH_INJECT_FAULT`: faults for the sweep's tests (bench/point.py).
check_all checks every GRAPHBENCH_* variable at once: the CLI calls it as a command starts, so a bad value is
refused even where nothing reads it (GRAPHBENCH_PDL on the CPU), before anything runs.
Code that starts processes builds their environments from `os.environ` (bench/, runner/tp_workers.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from graphbench.errors import GraphbenchError

CACHE_ROOT = "GRAPHBENCH_CACHE_ROOT"
DEFAULT_CACHE_ROOT = "~/.cache/graphbench"
# name -> default. Each turns one mechanism off, or one check on, to profile or debug it: PDL launches in
# the capture (kernels/pdl.py), the cached direct launch (kernels/launch.py), the check of every replay's
# input addresses (runner/cudagraph.py), the kept Triton key (kernels/triton_key.py).
PDL = "GRAPHBENCH_PDL"
DIRECT_LAUNCH = "GRAPHBENCH_DIRECT_LAUNCH"
CHECK_GRAPH_INPUTS = "GRAPHBENCH_CHECK_GRAPH_INPUTS"
TRITON_KEY_CACHE = "GRAPHBENCH_TRITON_KEY_CACHE"
DEBUG_HATCHES = {PDL: "1", DIRECT_LAUNCH: "1", CHECK_GRAPH_INPUTS: "0", TRITON_KEY_CACHE: "1"}
# set by graphbench for its own processes, not by users: a fault for the sweep's tests (bench/point.py),
# the flag of a tensor-parallel worker (runner/tp_workers.py)
INJECT_FAULT = "GRAPHBENCH_INJECT_FAULT"
TP_WORKER = "GRAPHBENCH_TP_WORKER"
# "label:kind[,label:kind]": in the point's process, or the Ray worker running it exits (bench/sweep_ray.py)
FAULT_KINDS = ("kill", "oom", "compile-error", "hang", "worker-exit")
KNOWN = (CACHE_ROOT, *DEBUG_HATCHES, INJECT_FAULT, TP_WORKER)


def value(name: str, default: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """The variable's value, or default when it is unset."""
    return (os.environ if environ is None else environ).get(name, default)


def is_set(name: str) -> bool:
    return name in os.environ


def flag(name: str) -> bool:
    """A variable other programs set as a flag (TRITON_INTERPRET=1): on unless unset, empty or 0."""
    return value(name, "0") not in ("", "0")


def hatch(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """A debug hatch: on ("1") or off ("0"), its default when unset (KeyError: not a hatch); a value it
    does not accept is an error naming it (a typo must not run as a silent default)."""
    text = value(name, DEBUG_HATCHES[name], environ)
    if text not in ("0", "1"):
        raise GraphbenchError(f"{name}={text!r}: expected 0 or 1 (default {DEBUG_HATCHES[name]})")
    return text == "1"


def hatches_set(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The debug hatches set off their default, sorted by name (what a result records)."""
    return {name: str(int(on)) for name in sorted(DEBUG_HATCHES)
            if (on := hatch(name, environ)) != (DEBUG_HATCHES[name] == "1")}


def hatches_text(recorded: object) -> str:
    """A result's recorded hatches as 'A=0 B=1', sorted ('' when none; a hand-edited non-dict as written).
    (Results before the hatches recorded the kernel switches of their day under the same key.)"""
    if isinstance(recorded, Mapping):
        return " ".join(f"{k}={v}" for k, v in sorted(recorded.items()))
    return str(recorded) if recorded else ""


def check_all(environ: Mapping[str, str] | None = None) -> list[str]:
    """Check the value of every GRAPHBENCH_* variable set (GraphbenchError naming the first bad one, its value
    and what it accepts); return the GRAPHBENCH_* names set that graphbench does not read (a typo, a removed
    switch: they change nothing), sorted."""
    environ = os.environ if environ is None else environ
    for name in DEBUG_HATCHES:
        hatch(name, environ)
    if CACHE_ROOT in environ:
        cache_root(environ)
    faults = environ.get(INJECT_FAULT, "")
    for item in filter(None, faults.split(",")):
        label, _, kind = item.partition(":")
        if not label or kind not in FAULT_KINDS:
            raise GraphbenchError(f"{INJECT_FAULT}={faults!r}: expected label:kind[,label:kind], kind one of "
                                  f"{', '.join(FAULT_KINDS)} (a hook for the sweep's tests: unset it)")
    if environ.get(TP_WORKER, "1") not in ("0", "1"):
        raise GraphbenchError(f"{TP_WORKER}={environ[TP_WORKER]!r}: expected 0 or 1 (graphbench sets it for its "
                              "tensor-parallel workers: unset it)")
    return sorted(name for name in environ if name.startswith("GRAPHBENCH_") and name not in KNOWN)


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """GRAPHBENCH_CACHE_ROOT (default ~/.cache/graphbench), checked: an empty value would put the cache in
    the current folder, and an unknown ~user cannot be expanded."""
    text = value(CACHE_ROOT, DEFAULT_CACHE_ROOT, environ)
    if not text or not text.strip():
        raise GraphbenchError(f"{CACHE_ROOT} is set but empty: give a folder, or unset it for {DEFAULT_CACHE_ROOT}")
    try:
        path = Path(text).expanduser()
    except RuntimeError:  # "Could not determine home directory"
        path = Path(text)
    if str(path).startswith("~"):
        raise GraphbenchError(f"{CACHE_ROOT}={text!r}: {text.split('/')[0]} is not a user on this machine")
    if path.exists() and not path.is_dir():  # (cache list said "empty", a compile failed mid start-up)
        raise GraphbenchError(f"{CACHE_ROOT}={text!r} is not a folder: give a folder, or unset it for "
                              f"{DEFAULT_CACHE_ROOT}")
    return path


def config_home() -> Path:
    """XDG_CONFIG_HOME, default ~/.config (where the compile cache's signing key lives)."""
    text = value("XDG_CONFIG_HOME")
    if not text:
        return Path.home() / ".config"
    try:
        return Path(text).expanduser()
    except RuntimeError:  # an unknown ~user
        raise GraphbenchError(f"XDG_CONFIG_HOME={text!r}: {text.split('/')[0]} is not a user on this machine") from None


def visible_devices() -> str | None:
    """CUDA_VISIBLE_DEVICES as set (None: unset)."""
    return value("CUDA_VISIBLE_DEVICES")
