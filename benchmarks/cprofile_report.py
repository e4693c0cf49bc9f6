"""A cProfile written for people: the pstats file and a text summary beside it (benchmarks/startup.py --profile,
benchmarks/profile_step.py --host-profile)."""

from __future__ import annotations

import io
import pstats
from typing import Any


def write_cprofile(profiler: Any, path: str, limit: int = 40) -> None:
    """`path` (pstats, for `python -m pstats` or snakeviz) and `path`.txt: the `limit` functions of most own
    time, then of most cumulative time."""
    profiler.dump_stats(path)
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text).strip_dirs()
    stats.sort_stats("tottime").print_stats(limit)
    stats.sort_stats("cumulative").print_stats(limit)
    with open(path + ".txt", "w") as f:
        f.write(text.getvalue())
