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
vllm/utils/system_utils.py). Tables are read per process tag and record prefix, so processes whose output
interleaves line by line (a tag written apart from its line, C libraries' untagged lines) are each read whole,
and a row no table can own is an error, never dropped; every table is summed: the distribution of the steps'
unpadded token counts, which is what a ladder is tuned for. A table the file ends inside (the log copied while vLLM was
writing it) is left out: its missing rows are the rarest sizes. Files are streamed; gzip is read too, and
UTF-16 with a byte-order mark (Windows PowerShell's redirection). The record's settings header names the
server's ladder (`- Capture sizes: [1, 2, 4, ...]`): `read_server_log` returns it beside the counts.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from graphbench.errors import GraphbenchError
from graphbench.ladders.log_text import bounded_lines, open_log, text_lines
from graphbench.ladders.server_log import ServerLog
from graphbench.ladders.vllm_log_lines import (
    HEADER,
    VLLM_LINE,
    begun,
    check_row,
    clean_line,
    line_source,
    line_sources,
    of_record,
    read_ladder,
    record_prefix,
    split_table,
)

_HEADER = re.compile(r"\|\s*" + r"\s*\|\s*".join(HEADER) + r"\s*\|\s*$")
_SEPARATOR = re.compile(r":?-+:?")
_NUMBER = re.compile(r"[-+]?\d+")
_CUT = re.compile(r"\|\s*\d+\s*\|")
_ROW = re.compile(r"\|(?:\s*\d+\s*\|){3}\s*[\w.]+\s*\|\s*\d+\s*\|\s*$")  # a table row as vLLM writes it
SNIFF_LINES = 1000
SETTINGS_LINE = "**CUDAGraph Config Settings:**"  # the first line of vLLM's record (CUDAGraphLogging.settings_header)
LADDER_LINE = "- Capture sizes: ["  # the header's ladder, str() of a list of ints ("[]" when none is captured)
BENCH_SUMMARY = "Serving Benchmark Result"  # the banner over `vllm bench serve`'s printed summary


def parse_cudagraph_metrics(text: str, name: str) -> Counter[int]:
    """Unpadded token count -> steps, summed over every table; GraphbenchError naming the line."""
    scan = _Scan(name)
    scan.read(text_lines(text))
    return scan.result()


def read_server_log(path: Path) -> ServerLog | None:
    """The file's tables read as parse_cudagraph_metrics does, streamed (plain or gzip text), with the server's
    capture ladder as its records' settings header gives it and what was read and left out; None when the file
    is no vLLM server log (no table header, no vLLM log line in its first lines); the error of
    parse_cudagraph_metrics for a server log without tables."""
    scan = _Scan(str(path))
    try:
        with open_log(path) as file:
            scan.read(bounded_lines(file))
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:  # a gzip stream corrupt or cut short
        raise GraphbenchError(f"cannot read {path}: {exc}: the gzip file is damaged; `gzip -dc {path} > log.txt` "
                              "keeps the part before the damage, or give the plain log") from None
    except OSError as exc:  # unreadable
        raise GraphbenchError(f"cannot read {path}: {exc}") from None
    if not (scan.tables or scan.server_log):
        return None
    counts = scan.result()
    largest = max(scan.ladders, key=lambda ladder: (len(ladder), ladder), default=None)
    return ServerLog(counts, largest, tuple(scan.unread_ladders), len(scan.ended), len(scan.cut_off),
                     scan.rows_before, len(scan.ladders))


Key = tuple[str, "str | None"]  # an open table's process tag and record prefix


class _Table:
    def __init__(self, number: int, head: str, announced: bool) -> None:
        self.number, self.head, self.announced = number, head, announced
        self.pipes = head.count("|")
        self.record = record_prefix(head)  # the prefix each line of its record repeats; None: its rows carry none
        self.record_checked = False  # whether its next line said so (a formatter may write it on the first alone)
        # its header line's outer columns (docker compose's) and process tags (several: writes interleaved)
        self.columns, self.tags = line_sources(head, self.pipes)
        self.rows: Counter[int] = Counter()
        self.cut: tuple[int, str] | None = None  # the file's unfinished last line, begun inside it
        self.cut_row = False  # that line is a row cut short


class _Scan:
    """The per-line state of a log read: the tables open per process tag, the sums of the ended ones."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.counts: Counter[int] = Counter()
        self.tables = 0
        self.open: dict[tuple[str, str | None], _Table] = {}  # by process tag and record prefix
        self.announced: set[str] = set()  # tags whose record began as vLLM's does, table not yet
        self.ended: list[_Table] = []
        self.cut_off: list[_Table] = []
        # tables ended by a line not their record's last (its number): a row of theirs after it reopens them
        self.stray: dict[Key, tuple[_Table, int]] = {}
        self.server_log = False  # a vLLM log line seen among the first lines
        self.bench_console = False  # `vllm bench serve`'s printed summary seen (its console output, not a log)
        self.ladders: set[tuple[int, ...]] = set()  # the capture sizes the settings headers name
        self.unread_ladders: list[int] = []  # the numbers of `- Capture sizes:` lines that hold no list of sizes
        self.broken_header = 0  # the last line holding part of a table header but not all of it
        self.rows_before = 0  # rows before any table began (a log begun inside one): left out, counted

    def read(self, lines: Iterable[str]) -> None:
        """Feed the lines, each with its "\n" (a file's, or text_lines'), so that a cut last line shows."""
        for number, raw in enumerate(lines, start=1):
            if number <= SNIFF_LINES and not self.server_log and not raw.lstrip().startswith(("{", "[")):
                self.server_log = VLLM_LINE.search(clean_line(raw)) is not None  # not inside JSON's strings
            if BENCH_SUMMARY in raw:
                self.bench_console = True
            if LADDER_LINE in raw:
                ladder = read_ladder(clean_line(raw))
                if ladder is None:
                    self.unread_ladders.append(number)
                elif ladder:  # (() : "[]", nothing captured)
                    self.ladders.add(ladder)
            # the fast path of a long log: a line that neither starts a table nor can be in one
            if (self.open or self.stray or "Unpadded" in raw or "Num Paddings" in raw or SETTINGS_LINE in raw
                    or raw.rstrip().endswith("|")):
                self.feed(number, raw, not raw.endswith("\n"))  # unfinished: the file's last line, cut

    def feed(self, number: int, raw: str, last: bool) -> None:
        line = clean_line(raw)
        header = _HEADER.search(line) if "Unpadded Tokens" in line else None
        if header:
            return self._start(number, line[:header.start()])
        if "Unpadded" in line or "Num Paddings" in line:
            self.broken_header = number  # a header's part: another writer's output split its line
        if SETTINGS_LINE in line:
            head = line[:line.find(SETTINGS_LINE)]
            self.announced.add(line_source(head, head.count("|")))
        owner = self._route(number, line, last)
        if owner:
            key, table, split = owner
            self._line(key, table, number, line, split, last)
        elif self.stray:
            owner = self._reopen(number, line, last)
        if not owner and _ROW.search(line) and not last:
            self._outside(number, line)

    def _outside(self, number: int, line: str) -> None:
        """A row no open table owns: an error where a table was begun or announced (its rows would be dropped in
        silence); before any, the log begins inside a table, and the row is counted as left out."""
        if self.broken_header:
            raise GraphbenchError(f"{self.name}:{number}: a cudagraph-metrics row whose table's header, line "
                                  f"{self.broken_header}, was broken by another writer's output: {line.strip()[:120]!r}")
        if self.announced or (self.tables and record_prefix(line.split("|", 1)[0])):
            raise GraphbenchError(f"{self.name}:{number}: a cudagraph-metrics row outside its table: was a line of "
                                  f"another process written inside the table? {line.strip()[:120]!r}")
        if not self.tables:
            self.rows_before += 1

    def _route(self, number: int, line: str, last: bool) -> tuple[Key, _Table, tuple[str, str | None]] | None:
        """The open table a line is of: by its process tag or, where the table's rows carry one, by its record's
        prefix (processes' writes interleaved, vLLM writing a line's tag and its rest apart, a line's tags are
        not its own), the tag telling apart two records alike; None: another writer's line. A line two tables
        could own is an error, never counted twice. A log line of a table's process but of another record
        ends that table (its own last line missing)."""
        is_row = _ROW.search(line) is not None
        found = []  # (whether the line is of the table's own source, the owner)
        for key, table in list(self.open.items()):
            head, part = split_table(line, table.pipes)
            columns, tags = line_sources(head, table.pipes)
            own = (tags[0] if tags else columns) == key[0]  # (line_source)
            if not table.record_checked and part is not None and own:
                table.record_checked = True  # the line under the header: its prefix, or none (rows read by tag)
                if record_prefix(head) is None:
                    table.record = None
            if table.record is None or last:
                if own:
                    found.append((own, (key, table, (head, part))))
                continue
            if columns != table.columns:
                continue  # an outer tool's column (docker compose) is written on every line: another container's
            tagged = own or (not tags and table.tags) or set(tags) & set(table.tags)
            if of_record(head, table.record) and (tagged or is_row):
                if own or is_row:  # (another source's line that is no row neither ends nor breaks this table)
                    found.append((own, (key, table, (head, part))))  # (a row's tags may be others' its body came after)
            elif (tags == table.tags == (key[0],)) or (not tags and not table.tags and VLLM_LINE.search(head)):
                self._end(key, number)
        if len(found) > 1:  # records alike (two processes' in one second): the line's own source first, then its tags
            mine = [owner for own, owner in found if own]
            if len(mine) == 1:
                return mine[0]
            tags = line_sources(found[0][1][2][0], found[0][1][1].pipes)[1]
            found = [(own, owner) for own, owner in found if owner[0][0] in tags]
            if len(found) != 1:
                raise GraphbenchError(f"{self.name}:{number}: a line of two processes' cudagraph-metrics tables alike "
                                      f"(their lines interleaved): {line.strip()[:120]!r}")
        return found[0][1] if found else None

    def _reopen(self, number: int, line: str, last: bool) -> bool:
        """A row of a table that a log line ended, not its record's last line: that line was another writer's
        (an untagged process's, inside an untagged table), and the table goes on; a line of the process's
        another record forgets the table."""
        for key, (table, ended) in list(self.stray.items()):
            head, part = split_table(line, table.pipes)
            if ended == number:
                continue
            if part is not None and _CUT.search(part) and self._its_row(key, table, head, line):
                del self.stray[key]
                self.ended.remove(table)
                self.open[key] = table
                self._line(key, table, number, line, (head, part), last)
                return True
            if line_source(head, table.pipes) == key[0] and record_prefix(head) is not None:
                del self.stray[key]
        return False

    @staticmethod
    def _its_row(key: Key, table: _Table, head: str, line: str) -> bool:
        """Whether a row line after the table ended is its: of its record, or where its rows carry no prefix, a
        whole row of its process that carries none either."""
        if table.record is not None:
            return of_record(head, table.record)
        return record_prefix(head) is None and _ROW.search(line) is not None and line_source(head, table.pipes) == key[0]

    def _start(self, number: int, head: str) -> None:
        tag = line_source(head, head.count("|"))
        table = _Table(number, head, tag in self.announced)
        key = (tag, table.record)
        if key in self.open:  # a new table of the same process and record ends the one before
            self._end(key)
        self.stray.pop(key, None)
        self.broken_header = 0
        self.open[key] = table
        self.announced.discard(tag)
        self.tables += 1

    def _end(self, key: Key, stray: int | None = None) -> None:
        """The table ended; by line `stray`, not its record's last line: rows of its record after it reopen it."""
        table = self.open.pop(key)
        self.ended.append(table)
        if stray is not None:
            self.stray[key] = (table, stray)

    def _line(self, key: Key, table: _Table, number: int, line: str, split: tuple[str, str | None],
              last: bool) -> None:
        head, part = split
        whole = part is not None and part.rstrip().endswith("|")
        cut_row = part is not None and not whole and _CUT.search(part) is not None
        # a line ending in '|' may be a row cut at a cell's end; unless vLLM wrote the table, it is a bad row
        if last and (cut_row or (begun(table.head, head, part, line) and (table.announced or not whole))):
            table.cut, table.cut_row = (number, line), part is not None
        elif whole:
            self._row(key, table, number, line, part)
        elif cut_row:  # a row cut short is not the table's end
            raise GraphbenchError(f"{self.name}:{number}: a cudagraph-metrics row cut short: {line.strip()[:120]!r}")
        elif SETTINGS_LINE in line or "**CUDAGraph Stats:**" in line:
            self._end(key, number)  # the next record of the process began: this one's last line is missing
        elif table.record is not None and (part is not None or record_prefix(head) != table.record):
            # a line of the record that is neither a row nor its last line (the prefix alone)
            raise GraphbenchError(f"{self.name}:{number}: a cudagraph-metrics row broken by other output written "
                                  f"into it (another process's?): {line.strip()[:120]!r}")
        else:  # its record's last line; or, where its rows carry no prefix, a line of another writer (rows may follow)
            self._end(key, number if table.record is None and line.strip() else None)

    def _row(self, key: Key, table: _Table, number: int, line: str, part: str) -> None:
        cells = [cell.strip() for cell in part.rstrip()[1:-1].split("|")]
        if all(_SEPARATOR.fullmatch(c) for c in cells):
            return  # the line under the header
        # one of our rows (its width, or a number first), checked: a bad cell names its line, never ends the table
        # (silently, dropping the rows after it)
        if len(cells) == len(HEADER) or _NUMBER.fullmatch(cells[0]) or table.record is not None:
            size, count = check_row(cells, f"{self.name}:{number}", line)
            table.rows[size] += count
        else:  # another markdown table's lines: ours ended
            self._end(key)

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
