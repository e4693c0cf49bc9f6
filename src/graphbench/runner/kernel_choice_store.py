"""The GPU's kernel choices, shared by every config: <cache root>/kernel_choices/<GPU>-<pdl|no-pdl>-<sources>.json.

Which kernel is fastest for a projection shape depends on the GPU, the kernels' sources, torch's and
Triton's versions, the launch mode, the weight's shape, dtype and bias and the row classes the engine
meets, not on the -O level, the ladder or the cudagraph mode. So a cold start whose compile-cache entry
is new (another max_num_seqs, -O3) loads the choices an earlier start timed for the same model shapes
on this GPU instead of timing them again (~20-35 s), as Triton's autotuner keeps its results outside any
one program. A cold start that clears its entry to be measured (`--cold`, a sweep's) times them again:
it stands for a first start, and every point of a sweep pays the same. The start-up report says where
they came from ("shared"). `graphbench cache clear` removes the store with the entries. One file per kernel sources:
two trees timed in turn (an A/B) keep theirs apart.

The file holds data only (kernel names and block sizes, each checked by KernelChoice.from_dict, and a set
is used only where it covers every shape and row class asked for), under the cache root that cache_trust
requires to be this user's (its kernel_choices/ folder too); a linked folder or file is neither read nor
written. No torch import: the caller makes the signature of (op, n, k, bias, dtype) tuples.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from graphbench.files import write_atomic
from graphbench.runner.compile.cache import kernel_choices_dir
from graphbench.runner.kernel_choice import KernelChoice

log = logging.getLogger("graphbench.engine")


def store_path(conditions: dict) -> Path:
    """The file for this GPU, launch mode and kernel sources, and the named search apart where there is one
    (conditions: kernel_timing.timing_conditions)."""
    name = re.sub(r"[^A-Za-z0-9.]+", "-", conditions["device"]).strip("-") or "gpu"
    sources = re.sub(r"[^0-9a-f]", "", str(conditions["sources"]))[:12]
    search = re.sub(r"[^A-Za-z0-9._-]", "", str(conditions.get("search") or ""))[:64]
    return kernel_choices_dir() / f"{name}-{'pdl' if conditions['pdl'] else 'no-pdl'}-{sources}{'-' + search if search else ''}.json"


def signature(projections: list[tuple[str, int, int, bool, str]], classes: list[int]) -> str:
    """One model's key in the store: its projections' (op, n, k, bias, dtype) and the row classes timed."""
    parts = [f"{op}:{n}x{k}:{'bias' if bias else 'nobias'}:{dtype}" for op, n, k, bias, dtype in projections]
    return ";".join(parts) + "|rows:" + ",".join(map(str, classes))


def lookup(conditions: dict, key: str, expected: set[tuple[str, int, int, int]]) -> list[KernelChoice] | None:
    """The choices stored for this model signature under these conditions, or None: absent, stale,
    unreadable, or not one choice for each (op, n, k, rows) expected."""
    path = store_path(conditions)
    stored = _read(path, conditions).get(key)
    if stored is None:
        return None
    try:
        return parse_choices(stored["choices"], expected)
    except (ValueError, KeyError, TypeError, ArithmeticError) as exc:
        log.warning("shared kernel choices in %s unreadable (%s); measuring again", path, exc)
        return None


def timed_under(data: dict, conditions: dict) -> bool:
    """Whether a stored file (the store's or a compile-cache entry's) was timed under these conditions."""
    return all(data.get(name) == value for name, value in conditions.items())


def parse_choices(stored: list, expected: set[tuple[str, int, int, int]]) -> list[KernelChoice]:
    """The stored choices (the store's or a compile-cache entry's copy); ValueError (or the KeyError or
    TypeError of a malformed one) unless they are one runnable choice for each (op, n, k, rows) expected."""
    choices = [KernelChoice.from_dict(c) for c in stored]
    if {c.key() for c in choices} != expected:
        raise ValueError(f"{len(choices)} choices, not one for each of the {len(expected)} shapes and row classes")
    return choices


def remember(conditions: dict, key: str, choices: list[KernelChoice], seconds: float) -> None:
    """Add this model's choices to the store (kept: the other models' under these conditions). A store that
    cannot be written only costs the next cold start its timing: a warning, not an error. Two processes
    writing at once (a sweep on several GPUs of one host) each replace the file whole: one's new set may be
    lost, and is timed again by a later cold start."""
    path = store_path(conditions)
    if path.parent.is_symlink() or path.is_symlink():
        log.warning("kernel choices not shared: %s is a link (neither read nor written)", path)
        return
    sets = _read(path, conditions, warn=False)  # (lookup warned of an unreadable file: this write replaces it)
    sets[key] = {"seconds": round(seconds, 3), "choices": [c.to_dict() for c in choices]}
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(path, json.dumps({**conditions, "sets": sets}, indent=1))
    except OSError as exc:
        log.warning("kernel choices not shared (%s): the next cold start times them again", exc)


def _read(path: Path, conditions: dict, warn: bool = True) -> dict:
    """signature -> stored set; empty where the file is missing, linked, unreadable or written under other
    conditions (another torch or Triton)."""
    if path.parent.is_symlink() or path.is_symlink():
        return {}
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, RecursionError) as exc:
        if warn:
            log.warning("shared kernel choices in %s unreadable (%s); measuring again", path, exc)
        return {}
    if not isinstance(data, dict) or not timed_under(data, conditions):
        return {}
    sets = data.get("sets")
    return {k: v for k, v in sets.items() if isinstance(v, dict)} if isinstance(sets, dict) else {}
