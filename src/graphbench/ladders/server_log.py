"""What a read of a vLLM server log gives (ladders/vllm_log.py reads it): the steps per size, the server's ladder,
and what was read and left out, said in words for the distribution's line. Pure Python."""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple


class ServerLog(NamedTuple):
    counts: Counter[int]  # unpadded token count -> steps
    capture_sizes: tuple[int, ...] | None  # the largest ladder its records announce; None: none announced
    unread_ladder_lines: tuple[int, ...] = ()  # `- Capture sizes:` lines that hold no list of sizes
    tables: int = 0  # the tables read (summed into counts)
    cut_off: int = 0  # tables the file ends inside, left out
    rows_before: int = 0  # rows before the file's first table header (a log begun inside a table), left out
    ladders: int = 0  # the different capture ladders its records announce (> 1: restarted with other settings)

    def summary(self) -> str:
        """What was read and what was left out, in words: `2 tables, 230 steps; 1 table cut off ... left out`."""
        read = f"{self.tables} cudagraph-metrics table{'s' * (self.tables != 1)}, {sum(self.counts.values()):g} steps"
        left = []
        if self.cut_off:
            left.append(f"{self.cut_off} table{'s' * (self.cut_off != 1)} the file ends inside left out")
        if self.rows_before:
            left.append(f"{self.rows_before} row{'s' * (self.rows_before != 1)} before the first table's header "
                        "left out (the log begins inside a table)")
        return "; ".join([read, *left])
