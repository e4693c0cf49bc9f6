"""The parts of one line of a vLLM log (pure Python; ladders/vllm_log.py reads the log with them): its prefix (an
outer tool's columns, process tags, the record's logger prefix) and the --cudagraph-metrics cells, checked as vLLM
writes them:
a table row (vllm/compilation/cuda_graph.py, CUDAGraphLogging.generate_metric_table: unpadded, padded, padded -
unpadded, the runtime mode as str() of CUDAGraphMode or its name, the step count) and the settings header's
`- Capture sizes: [...]` line (str() of a list of ints)."""

from __future__ import annotations

import functools
import re

from graphbench.ascii_numbers import INTEGER
from graphbench.errors import GraphbenchError

HEADER = ("Unpadded Tokens", "Padded Tokens", "Num Paddings", "Runtime Mode", "Count")
# CUDAGraphMode's names (vllm/config/compilation.py): rows carry a runtime mode (the first three); the
# others are accepted too, a row's count being the same whatever its mode
MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
MAX_TOKENS = 1 << 20
MAX_COUNT = 10**15
_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[A-Za-z]?)?")  # colour codes; one cut short at the file's end too
_TAG = re.compile(r"\((?:[^()]|\([^()]*\))*\)")  # (APIServer pid=1), (API (0)): one level of nesting
_LEVEL = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\b")
# vLLM's logger prefix (vllm/logger.py: "%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] ", dates "%m-%d
# %H:%M:%S"; older versions "%(filename)s:%(lineno)d]"): a file with such lines is a server log
VLLM_LINE = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? "
                        r"\[?[\w./-]+\.py:\d+\]")
_LADDER = re.compile(r"- Capture sizes: \[([0-9, ]*)\]\s*$")


def read_ladder(line: str) -> tuple[int, ...] | None:
    """The sizes of a settings header's `- Capture sizes: [...]` line (() for "[]": none captured); None where
    the line holds no such list (cut short, or a size that cannot be)."""
    found = _LADDER.search(line)
    if not found:
        return None
    cells = found.group(1).replace(",", " ").split()
    if any(len(cell) > 7 or not 0 < int(cell) <= MAX_TOKENS for cell in cells):
        return None
    return tuple(sorted({int(cell) for cell in cells}))


def check_row(cells: list[str], where: str, line: str) -> tuple[int, int]:
    """A row's unpadded token count and its steps, checked as vLLM writes them."""
    if len(cells) != len(HEADER):
        raise GraphbenchError(f"{where}: a cudagraph-metrics row has {len(cells)} cells, expected "
                              f"{len(HEADER)} ({' | '.join(HEADER)}): {line.strip()[:120]!r}")
    unpadded, padded, paddings, mode, count = cells
    # vLLM writes the mode as str() of its enum in some versions ("CUDAGraphMode.FULL")
    mode = mode.removeprefix("CUDAGraphMode.")
    try:  # ASCII digits, as vLLM writes them (int() also takes '1_000' and other scripts' digits, e.g. '\u0661')
        if not all(INTEGER.fullmatch(cell) for cell in (unpadded, padded, paddings, count)):
            raise ValueError(unpadded)
        u, p, n, c = int(unpadded), int(padded), int(paddings), int(count)  # (past 4300 digits: ValueError)
    except ValueError:
        raise GraphbenchError(f"{where}: a cudagraph-metrics row needs integer tokens, paddings "
                              f"and count, got {line.strip()[:120]!r}") from None
    if not (0 < u <= MAX_TOKENS and u <= p <= MAX_TOKENS and 0 <= n):
        raise GraphbenchError(f"{where}: unpadded {u}, padded {p} and paddings {n} "
                              f"are not a possible row (1 <= unpadded <= padded <= {MAX_TOKENS})")
    if not 0 <= c <= MAX_COUNT:
        raise GraphbenchError(f"{where}: a count of {c} steps is not a possible row's (0..{MAX_COUNT})")
    if n != p - u:  # vLLM's num_paddings is padded - unpadded (CUDAGraphStat, gpu_model_runner.py)
        raise GraphbenchError(f"{where}: paddings {n} is not padded {p} - unpadded {u}")
    if mode not in MODES:
        raise GraphbenchError(f"{where}: unknown runtime mode {mode!r}; vLLM logs {', '.join(MODES[:3])}")
    return u, c


def clean_line(raw: str) -> str:
    line = raw.rstrip("\r\n")
    if "\r" in line:  # a progress bar's redraws: the terminal shows what follows the last "\r"
        line = line[line.rfind("\r") + 1:]
    return _ANSI.sub("", line) if "\x1b" in line else line


@functools.lru_cache(maxsize=4096)  # a record's lines share one prefix
def line_sources(head: str, pipes: int) -> tuple[str, tuple[str, ...]]:
    """Whose line it is: the columns an outer tool put before it (docker compose's `name  | `) and, each after
    them, the process tags before the log level (none, one, or more where processes' writes interleaved: vLLM
    writes a line's tag and its rest apart): each process's tables are read on their own when processes'
    lines interleave (data-parallel API servers, engine cores)."""
    *outer, rest = head.split("|", pipes)
    level = _LEVEL.search(rest)
    end = min(level.start() if level else len(rest), 256)  # a tag starts the line
    columns = "|".join(outer).strip()
    return columns, tuple(columns + tag.group() for tag in _TAG.finditer(rest, 0, end))


def line_source(head: str, pipes: int) -> str:
    """The line's process: its outer columns and its first tag ('' for none)."""
    columns, tags = line_sources(head, pipes)
    return tags[0] if tags else columns


@functools.lru_cache(maxsize=4096)
def record_prefix(head: str) -> str | None:
    """What vLLM's NewLineFormatter repeats on every line of one record, the same on each: the prefix from the
    log level on (`INFO 12-02 16:51:04 [loggers.py:257]`; a tag or an outer tool's columns before it may differ);
    None where the prefix holds no log level (a formatter that does not repeat it)."""
    level = _LEVEL.search(head)
    return head[level.start():].rstrip() if level else None


def of_record(head: str, record: str) -> bool:
    """Whether a line's prefix is the record's (or begins with it: another writer's output inside the line)."""
    found = record_prefix(head)
    return found is not None and (found == record or found.startswith(record + " "))


def split_table(line: str, pipes: int) -> tuple[str, str | None]:
    """(prefix, table part from the first '|' after the prefix's own `pipes` ones, or None)."""
    at = -1
    for _ in range(pipes + 1):
        at = line.find("|", at + 1)
        if at < 0:
            return line, None
    return line[:at], line[at:]


def _shape(prefix: str) -> str:
    return re.sub(r"\d+", "", prefix).rstrip()  # a prefix less its numbers: per-line timestamps differ


def begun(table_head: str, head: str, part: str | None, line: str) -> bool:
    """Whether the file's unfinished last line began a line of the table whose header line's prefix is
    table_head: a row (the table's prefix, then fewer '|' than a whole row has) or the line vLLM ends it with
    (a part of that prefix)."""
    if part is None:
        return _shape(table_head).startswith(_shape(line))
    return _shape(head) == _shape(table_head) and part.count("|") <= len(HEADER)
