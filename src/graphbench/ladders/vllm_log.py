"""Batch sizes from a vLLM server log written with `--cudagraph-metrics` (pure Python, no torch).

vLLM logs, at intervals, a markdown table through its logger: a header
`| Unpadded Tokens | Padded Tokens | Num Paddings | Runtime Mode | Count |`, a separator, then one
row per (unpadded, padded, mode) with the number of steps since the previous table (vLLM's
`CUDAGraphLogging.generate_metric_table`, vllm/compilation/cuda_graph.py; the mode cell is the enum's
name, or its str() "CUDAGraphMode.FULL" in some versions). Every line may
carry a prefix (the logger's `INFO 11-30 10:05:00 [cuda_graph.py:118] `, or the engine-core
process's `(EngineCore_DP0 pid=4242) `). Every table in the log is summed: the distribution of the
steps' unpadded token counts, which is what a ladder is tuned for.
"""

from __future__ import annotations

import re
from collections import Counter

from graphbench.errors import GraphbenchError

HEADER = ("Unpadded Tokens", "Padded Tokens", "Num Paddings", "Runtime Mode", "Count")
MODES = ("NONE", "PIECEWISE", "FULL")
MAX_TOKENS = 1 << 20
MAX_COUNT = 10**15


def _cells(line: str) -> list[str] | None:
    """The cells of a markdown table row anywhere in the line (after any prefix), else None."""
    start = line.find("|")
    if start < 0 or not line.rstrip().endswith("|"):
        return None
    return [cell.strip() for cell in line[start:].rstrip()[1:-1].split("|")]


def is_cudagraph_log(text: str) -> bool:
    return "| Unpadded Tokens | Padded Tokens |" in text


def parse_cudagraph_metrics(text: str, name: str) -> Counter[int]:
    """Unpadded token count -> steps, summed over every table; GraphbenchError naming the line."""
    counts: Counter[int] = Counter()
    tables = 0
    in_table = False
    for number, line in enumerate(text.splitlines(), start=1):
        cells = _cells(line)
        if cells is not None and tuple(cells) == HEADER:
            in_table, tables = True, tables + 1
            continue
        if not in_table:
            continue
        if cells is not None and all(re.fullmatch(r":?-+:?", c) for c in cells):
            continue  # the separator
        if cells is None:
            if re.search(r"\|\s*\d+\s*\|", line):  # a row cut short (no closing |) is not the table's end
                raise GraphbenchError(f"{name}:{number}: a cudagraph-metrics row cut short: {line.strip()[:120]!r}")
            in_table = False  # the table ended
            continue
        if len(cells) != len(HEADER):
            raise GraphbenchError(f"{name}:{number}: a cudagraph-metrics row has {len(cells)} cells, expected "
                                  f"{len(HEADER)} ({' | '.join(HEADER)}): {line.strip()[:120]!r}")
        unpadded, padded, paddings, mode, count = cells
        # vLLM writes the mode as str() of its enum in some versions ("CUDAGraphMode.FULL")
        mode = mode.removeprefix("CUDAGraphMode.")
        try:
            values = [int(unpadded), int(padded), int(paddings), int(count)]
        except ValueError:
            raise GraphbenchError(f"{name}:{number}: a cudagraph-metrics row needs integer tokens, paddings "
                                  f"and count, got {line.strip()[:120]!r}") from None
        u, p, n, c = values
        if not (0 < u <= MAX_TOKENS and u <= p <= MAX_TOKENS and 0 <= n and 0 <= c <= MAX_COUNT):
            raise GraphbenchError(f"{name}:{number}: unpadded {u}, padded {p}, paddings {n} and count {c} "
                                  f"are not a possible row (1 <= unpadded <= padded <= {MAX_TOKENS})")
        if n != p - u:  # vLLM's num_paddings is padded - unpadded (CUDAGraphStat, gpu_model_runner.py)
            raise GraphbenchError(f"{name}:{number}: paddings {n} is not padded {p} - unpadded {u}")
        if mode not in MODES:
            raise GraphbenchError(f"{name}:{number}: unknown runtime mode {mode!r}; vLLM logs "
                                  f"{', '.join(MODES)}")
        counts[u] += c
    if not tables:
        raise GraphbenchError(f"{name}: no cudagraph-metrics table (vLLM's `| Unpadded Tokens | Padded Tokens | "
                              "... | Count |`): was the server started with --cudagraph-metrics?")
    if not counts:
        raise GraphbenchError(f"{name}: {tables} cudagraph-metrics table(s), but no steps in them")
    return counts
