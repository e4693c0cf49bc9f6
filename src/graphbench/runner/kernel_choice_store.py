"""The GPU's kernel choices, shared by every config: <cache root>/kernel_choices/<GPU>-<pdl|no-pdl>.json.

Which kernel is fastest for a projection shape depends on the GPU, the kernels' sources, the launch mode,
the weight's shape, dtype and bias and the row classes the engine meets, not on the -O level, the ladder
or the cudagraph mode. So a cold start of a new config (a new compile-cache entry: every point of a sweep,
a level, a ladder) loads the choices an earlier start timed for the same model shapes on this GPU
instead of timing them again (~20-35 s), as Triton's autotuner keeps its results outside any one
program. The start-up report says where they came from ("shared"). `graphbench cache clear` removes the
store with the entries; a change of the kernels' sources makes the file's choices stale (rewritten).

The file holds data only (kernel names and block sizes, each checked by KernelChoice.from_dict as a
compile-cache entry's copy is), under the cache root that cache_trust requires to be this user's.
No torch import: the signature is made of (op, n, k, bias, dtype) tuples by the caller.
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
    """The file for this GPU and launch mode (conditions: kernel_timing.timing_conditions)."""
    name = re.sub(r"[^A-Za-z0-9.]+", "-", conditions["device"]).strip("-") or "gpu"
    return kernel_choices_dir() / f"{name}-{'pdl' if conditions['pdl'] else 'no-pdl'}.json"


def signature(projections: list[tuple[str, int, int, bool, str]], classes: list[int]) -> str:
    """One model's key in the store: its projections' (op, n, k, bias, dtype) and the row classes timed."""
    parts = [f"{op}:{n}x{k}:{'bias' if bias else 'nobias'}:{dtype}" for op, n, k, bias, dtype in projections]
    return ";".join(parts) + "|rows:" + ",".join(map(str, classes))


def lookup(conditions: dict, key: str) -> list[KernelChoice] | None:
    """The choices stored for this model signature under these conditions, or None (absent, stale, unreadable)."""
    stored = _read(store_path(conditions), conditions).get(key)
    if stored is None:
        return None
    try:
        return [KernelChoice.from_dict(c) for c in stored["choices"]]
    except (ValueError, KeyError, TypeError, ArithmeticError) as exc:
        log.warning("shared kernel choices in %s unreadable (%s); measuring again", store_path(conditions), exc)
        return None


def remember(conditions: dict, key: str, choices: list[KernelChoice], seconds: float) -> None:
    """Add this model's choices to the store (kept: the other models' still valid under these conditions).
    A store that cannot be written only costs the next cold start its timing: a warning, not an error. Two
    processes writing at once (a sweep on several GPUs of one host) each replace the file whole: one's
    new set may be lost, and is timed again by a later cold start."""
    path = store_path(conditions)
    sets = _read(path, conditions, warn=False)  # (lookup warned of an unreadable file: this write replaces it)
    sets[key] = {"seconds": round(seconds, 3), "choices": [c.to_dict() for c in choices]}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({**conditions, "sets": sets}, indent=1))
    except OSError as exc:
        log.warning("kernel choices not shared (%s): the next cold start times them again", exc)


def _read(path: Path, conditions: dict, warn: bool = True) -> dict:
    """signature -> stored set; empty where the file is missing, unreadable or written under other conditions
    (other kernels' sources: those choices are stale and are dropped at the next write)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        if warn:
            log.warning("shared kernel choices in %s unreadable (%s); measuring again", path, exc)
        return {}
    if not isinstance(data, dict) or any(data.get(name) != value for name, value in conditions.items()):
        return {}
    sets = data.get("sets")
    return {k: v for k, v in sets.items() if isinstance(v, dict)} if isinstance(sets, dict) else {}
