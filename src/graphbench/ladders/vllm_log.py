"""Batch sizes from a vLLM server log written with `--cudagraph-metrics` (pure Python, no torch).

vLLM logs, at intervals, a markdown table through its logger: a header
`| Unpadded Tokens | Padded Tokens | Num Paddings | Runtime Mode | Count |`, a separator, then one
row per (unpadded, padded, mode) with the number of steps since the previous table (vLLM's
`CUDAGraphLogging.generate_metric_table`, vllm/compilation/cuda_graph.py; the mode cell is the enum's
name, or its str() "CUDAGraphMode.FULL" in some versions). The table is one log record: vLLM's
NewLineFormatter (vllm/logging_utils/formatter.py) repeats the record's prefix (`INFO 12-02 16:51:04
[cuda_graph.py:118] `, ANSI-coloured or not) on every line, joins the lines with "\\r\\n" and, the message
ending in a newline, ends the record with a line holding the prefix alone; a subprocess's lines also
start with its tag (`(APIServer pid=1) `, `(EngineCore_DP0 pid=4242) `, `(API (0)) `; `_add_prefix`,
vllm/utils/system_utils.py). Tables are read per process tag, so processes whose output interleaves
line by line are each read whole; every table is summed: the distribution of the steps' unpadded token
counts, which is what a ladder is tuned for. A table the file ends inside (the log copied while vLLM was
writing it) is left out: its missing rows are the rarest sizes. Files are streamed; gzip is read too, and
UTF-16 with a byte-order mark (Windows PowerShell's redirection). The record's settings header names the
server's ladder (`- Capture sizes: [1, 2, 4, ...]`): `read_server_log` returns it beside the counts.
"""

from __future__ import annotations

import functools
import gzip
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from graphbench.ascii_numbers import INTEGER
from graphbench.errors import GraphbenchError

HEADER = ("Unpadded Tokens", "Padded Tokens", "Num Paddings", "Runtime Mode", "Count")
# CUDAGraphMode's names (vllm/config/compilation.py): rows carry a runtime mode (the first three); the
# others are accepted too, a row's count being the same whatever its mode
MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
MAX_TOKENS = 1 << 20
MAX_COUNT = 10**15

_HEADER = re.compile(r"\|\s*" + r"\s*\|\s*".join(HEADER) + r"\s*\|\s*$")
_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[A-Za-z]?)?")  # colour codes; one cut short at the file's end too
_TAG = re.compile(r"\((?:[^()]|\([^()]*\))*\)")  # (APIServer pid=1), (API (0)): one level of nesting
_LEVEL = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\b")
_SEPARATOR = re.compile(r":?-+:?")
_NUMBER = re.compile(r"[-+]?\d+")
_CUT = re.compile(r"\|\s*\d+\s*\|")
# vLLM's logger prefix (vllm/logger.py: "%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] ", dates "%m-%d
# %H:%M:%S"; older versions "%(filename)s:%(lineno)d]"): a file with such lines is a server log
_VLLM_LINE = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? "
                        r"\[?[\w./-]+\.py:\d+\]")
SNIFF_LINES = 1000
MAX_LINE = 1 << 20  # characters: a longer line is no table line, and is read past without being held whole
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
SETTINGS_LINE = "**CUDAGraph Config Settings:**"  # the first line of vLLM's record (CUDAGraphLogging.settings_header)
LADDER_LINE = "- Capture sizes: ["  # the header's ladder, str() of a list of ints ("[]" when none is captured)
_LADDER = re.compile(r"- Capture sizes: \[([0-9, ]*)\]\s*$")
BENCH_SUMMARY = "Serving Benchmark Result"  # the banner over `vllm bench serve`'s printed summary


def parse_cudagraph_metrics(text: str, name: str) -> Counter[int]:
    """Unpadded token count -> steps, summed over every table; GraphbenchError naming the line."""
    scan = _Scan(name)
    scan.read(_text_lines(text))
    return scan.result()


class ServerLog(NamedTuple):
    counts: Counter[int]  # unpadded token count -> steps
    capture_sizes: tuple[int, ...] | None  # the largest ladder its records announce; None: none announced
    unread_ladder_lines: tuple[int, ...] = ()  # `- Capture sizes:` lines that hold no list of sizes


def read_cudagraph_log(path: Path) -> Counter[int] | None:
    """The file's tables read as parse_cudagraph_metrics does, streamed (plain or gzip text); None when
    the file is no vLLM server log (no table header, no vLLM log line in its first lines); the error of
    parse_cudagraph_metrics for a server log without tables."""
    log = read_server_log(path)
    return None if log is None else log.counts


def read_server_log(path: Path) -> ServerLog | None:
    """read_cudagraph_log's counts and the server's capture ladder as its records' settings header gives it."""
    scan = _Scan(str(path))
    try:
        with _open(path) as file:
            scan.read(_bounded_lines(file))
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:  # a gzip stream corrupt or cut short
        raise GraphbenchError(f"cannot read {path}: {exc}: the gzip file is damaged; `gzip -dc {path} > log.txt` "
                              "keeps the part before the damage, or give the plain log") from None
    except OSError as exc:  # unreadable
        raise GraphbenchError(f"cannot read {path}: {exc}") from None
    largest = max(scan.ladders, key=lambda ladder: (len(ladder), ladder), default=None)
    return ServerLog(scan.result(), largest, tuple(scan.unread_ladders)) if scan.tables or scan.server_log else None


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as head:
        return head.read(2) == b"\x1f\x8b"


def _open(path: Path):
    # lines end at "\n" only: a tty's "\r\n" after vLLM's own "\r\n" inside a record ("\r\r\n") is one end.
    # A log redirected by Windows PowerShell 5 (`docker logs vllm > vllm.log`) is UTF-16 with a byte-order mark.
    opener = gzip.open if is_gzip(path) else open
    with opener(path, "rb") as head:
        encoding = "utf-16" if head.read(2) in UTF16_BOMS else "utf-8-sig"
    return opener(path, "rt", encoding=encoding, errors="replace", newline="\n")


def _bounded_lines(file) -> Iterator[str]:
    """The file's lines, each with its "\n", those longer than MAX_LINE left out (streaming bounds memory only
    where lines end: a file of gigabytes without a line break would otherwise be read as one line)."""
    while line := file.readline(MAX_LINE):
        if len(line) == MAX_LINE and not line.endswith("\n"):
            while (rest := file.readline(MAX_LINE)) and not rest.endswith("\n"):
                pass
            continue
        yield line


def _text_lines(text: str) -> Iterator[str]:
    parts = text.split("\n")
    yield from (part + "\n" for part in parts[:-1])
    if parts[-1]:
        yield parts[-1]


def _clean(raw: str) -> str:
    line = raw.rstrip("\r\n")
    if "\r" in line:  # a progress bar's redraws: the terminal shows what follows the last "\r"
        line = line[line.rfind("\r") + 1:]
    return _ANSI.sub("", line) if "\x1b" in line else line


@functools.lru_cache(maxsize=4096)  # a record's lines share one prefix
def _source(head: str, pipes: int) -> str:
    """Whose line it is: the columns an outer tool put before it (docker compose's `name  | `) and the
    process tag before the log level ('' for none): each process's tables are read on their own when
    processes' lines interleave (data-parallel API servers, engine cores)."""
    *outer, rest = head.split("|", pipes)
    level = _LEVEL.search(rest)
    tag = _TAG.search(rest, 0, min(level.start() if level else len(rest), 256))  # a tag starts the line
    return "|".join(outer).strip() + (tag.group() if tag else "")


def _split(line: str, pipes: int) -> tuple[str, str | None]:
    """(prefix, table part from the first '|' after the prefix's own `pipes` ones, or None)."""
    at = -1
    for _ in range(pipes + 1):
        at = line.find("|", at + 1)
        if at < 0:
            return line, None
    return line[:at], line[at:]


class _Table:
    def __init__(self, number: int, head: str, announced: bool) -> None:
        self.number, self.head, self.announced = number, head, announced
        self.pipes = head.count("|")
        self.rows: Counter[int] = Counter()
        self.cut: tuple[int, str] | None = None  # the file's unfinished last line, begun inside it
        self.cut_row = False  # that line is a row cut short


class _Scan:
    """The per-line state of a log read: the tables open per process tag, the sums of the ended ones."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.counts: Counter[int] = Counter()
        self.tables = 0
        self.open: dict[str, _Table] = {}
        self.announced: set[str] = set()  # tags whose record began as vLLM's does, table not yet
        self.ended: list[_Table] = []
        self.cut_off: list[_Table] = []
        self.server_log = False  # a vLLM log line seen among the first lines
        self.bench_console = False  # `vllm bench serve`'s printed summary seen (its console output, not a log)
        self.ladders: set[tuple[int, ...]] = set()  # the capture sizes the settings headers name
        self.unread_ladders: list[int] = []  # the numbers of `- Capture sizes:` lines that hold no list of sizes

    def read(self, lines: Iterable[str]) -> None:
        """Feed the lines, each with its "\n" (a file's, or _text_lines'), so that a cut last line shows."""
        for number, raw in enumerate(lines, start=1):
            if number <= SNIFF_LINES and not self.server_log and not raw.lstrip().startswith(("{", "[")):
                self.server_log = _VLLM_LINE.search(_clean(raw)) is not None  # not inside JSON's strings
            if BENCH_SUMMARY in raw:
                self.bench_console = True
            if LADDER_LINE in raw:
                ladder = _ladder(_clean(raw))
                if ladder is None:
                    self.unread_ladders.append(number)
                elif ladder:  # (() : "[]", nothing captured)
                    self.ladders.add(ladder)
            # the fast path of a long log: a line that neither starts a table nor can be in one
            if self.open or "Unpadded Tokens" in raw or SETTINGS_LINE in raw:
                self.feed(number, raw, not raw.endswith("\n"))  # unfinished: the file's last line, cut

    def feed(self, number: int, raw: str, last: bool) -> None:
        line = _clean(raw)
        header = _HEADER.search(line) if "Unpadded Tokens" in line else None
        if header:
            self._start(number, line[:header.start()])
        elif SETTINGS_LINE in line:
            head = line[:line.find(SETTINGS_LINE)]
            self.announced.add(_source(head, head.count("|")))
        for tag, table in list(self.open.items()):
            head, part = _split(line, table.pipes)
            if not header and _source(head, table.pipes) == tag:
                self._line(tag, table, number, line, (head, part), last)

    def _start(self, number: int, head: str) -> None:
        tag = _source(head, head.count("|"))
        if tag in self.open:  # a new table of the same process ends the one before
            self._end(tag)
        self.open[tag] = _Table(number, head, tag in self.announced)
        self.announced.discard(tag)
        self.tables += 1

    def _end(self, tag: str) -> None:
        self.ended.append(self.open.pop(tag))

    def _line(self, tag: str, table: _Table, number: int, line: str, split: tuple[str, str | None],
              last: bool) -> None:
        head, part = split
        whole = part is not None and part.rstrip().endswith("|")
        cut_row = part is not None and not whole and _CUT.search(part) is not None
        # a line ending in '|' may be a row cut at a cell's end; unless vLLM wrote the table, it is a bad row
        if last and (cut_row or (_begun(table, head, part, line) and (table.announced or not whole))):
            table.cut, table.cut_row = (number, line), part is not None
        elif whole:
            self._row(tag, table, number, line, part)
        elif cut_row:  # a row cut short is not the table's end
            raise GraphbenchError(f"{self.name}:{number}: a cudagraph-metrics row cut short: {line.strip()[:120]!r}")
        else:
            self._end(tag)  # any other line of the process: the table ended

    def _row(self, tag: str, table: _Table, number: int, line: str, part: str) -> None:
        cells = [cell.strip() for cell in part.rstrip()[1:-1].split("|")]
        if all(_SEPARATOR.fullmatch(c) for c in cells):
            return  # the line under the header
        # one of our rows (its width, or a number first), checked: a bad cell names its line, never ends the table
        # (silently, dropping the rows after it)
        if len(cells) == len(HEADER) or _NUMBER.fullmatch(cells[0]):
            size, count = _row(cells, f"{self.name}:{number}", line)
            table.rows[size] += count
        else:  # another markdown table's lines: ours ended
            self._end(tag)

    def result(self) -> Counter[int]:
        for table in self.open.values():
            # vLLM ends each table's record with a line of its own: its table without one was cut off (the
            # log copied mid-write), as is any table the file's unfinished last line began a line of
            (self.cut_off if table.announced or table.cut else self.ended).append(table)
        for table in self.ended:
            self.counts.update(table.rows)
        if not self.tables and self.bench_console:
            raise GraphbenchError(f"{self.name}: the console output of `vllm bench serve` (its {BENCH_SUMMARY!r}), "
                                  "which holds no per-request lengths: give the JSON its --save-result "
                                  "--save-detailed writes, or the server's log with --cudagraph-metrics tables")
        if not self.tables:
            raise GraphbenchError(f"{self.name}: no cudagraph-metrics table (vLLM's `| Unpadded Tokens | Padded "
                                  "Tokens | ... | Count |`): was the server started with --cudagraph-metrics?")
        if not self.counts:
            raise GraphbenchError(self._empty())
        return self.counts

    def _empty(self) -> str:
        cut = next((t.cut for t in self.cut_off if t.cut_row), None)
        if cut:
            return (f"{self.name}:{cut[0]}: a cudagraph-metrics row cut short: {cut[1].strip()[:120]!r} (the file "
                    "ends inside the table, and no other table is whole)")
        if any(t.rows for t in self.cut_off):
            return (f"{self.name}:{self.cut_off[0].number}: the only cudagraph-metrics table with steps is cut off "
                    "by the end of the file (vLLM ends each with a line of its own): was the log copied mid-write?")
        return f"{self.name}: {self.tables} cudagraph-metrics table(s), but no steps in them"


def _ladder(line: str) -> tuple[int, ...] | None:
    """The sizes of a settings header's `- Capture sizes: [...]` line (() for "[]": none captured); None where
    the line holds no such list (cut short, or a size that cannot be)."""
    found = _LADDER.search(line)
    if not found:
        return None
    cells = found.group(1).replace(",", " ").split()
    if any(len(cell) > 7 or not 0 < int(cell) <= MAX_TOKENS for cell in cells):
        return None
    return tuple(sorted({int(cell) for cell in cells}))


def _shape(prefix: str) -> str:
    return re.sub(r"\d+", "", prefix).rstrip()  # a prefix less its numbers: per-line timestamps differ


def _begun(table: _Table, head: str, part: str | None, line: str) -> bool:
    """Whether the file's unfinished last line began a line of the table: a row (the table's prefix, then
    fewer '|' than a whole row has) or the line vLLM ends it with (a part of that prefix)."""
    if part is None:
        return _shape(table.head).startswith(_shape(line))
    return _shape(head) == _shape(table.head) and part.count("|") <= len(HEADER)


def _row(cells: list[str], where: str, line: str) -> tuple[int, int]:
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
    if not (0 < u <= MAX_TOKENS and u <= p <= MAX_TOKENS and 0 <= n and 0 <= c <= MAX_COUNT):
        raise GraphbenchError(f"{where}: unpadded {u}, padded {p}, paddings {n} and count {c} "
                              f"are not a possible row (1 <= unpadded <= padded <= {MAX_TOKENS})")
    if n != p - u:  # vLLM's num_paddings is padded - unpadded (CUDAGraphStat, gpu_model_runner.py)
        raise GraphbenchError(f"{where}: paddings {n} is not padded {p} - unpadded {u}")
    if mode not in MODES:
        raise GraphbenchError(f"{where}: unknown runtime mode {mode!r}; vLLM logs {', '.join(MODES[:3])}")
    return u, c
