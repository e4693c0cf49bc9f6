"""How often each batch size occurs: a normalised distribution, built from a range or a file.

Pure Python, no torch import. Supported files (chosen by suffix, sniffed when the suffix says
nothing):

- ``.json``: an object ``{"<size>": count, ...}`` (or an array of batch sizes);
- ``.jsonl`` / ``.ndjson``: a trace, one JSON object a line with ``batch_size`` (or ``num_tokens``) and
  optionally ``count`` (or ``weight``, ``frequency``: the steps of that size, 1 without);
- anything else (``.csv``, ``.txt``, ...): a CSV with a header naming ``batch_size`` (or
  ``num_tokens``) and optionally ``count``, rows of ``size,count`` without a header, or a plain list of
  batch sizes, one per line;
- a vLLM server log with ``--cudagraph-metrics`` tables, whatever its suffix, gzip-compressed or not
  (ladders/vllm_log.py).

Per-request benchmark outputs (ladders/request_trace.py) are not distributions of step sizes: they are
replayed through the scheduler first (tuning/trace_replay.py, what `graphbench tune` does with them); given
here they are an error that says so.

Blank lines and lines starting with ``#`` are ignored in the line-based formats. A size written as
text is ASCII digits only, as a step-time curve's sizes (ladders/step_curve.py): Python's int() also
reads ``1_000`` and other scripts' digits, which no CSV or JSON tool writes as a number.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from graphbench.errors import GraphbenchError
from graphbench.ladders.jsonl import json_lines, loads, unique_keys
from graphbench.ladders.log_text import compression, is_gzip, not_read_log, other_server
from graphbench.ladders.request_trace import check_not_a_result, is_request_trace
from graphbench.ladders.vllm_log import read_server_log

SIZE_COLUMNS = ("batch_size", "num_tokens")
COUNT_COLUMNS = ("count", "weight", "frequency")


class BatchSizeDistribution(Mapping[int, float]):
    """Batch size -> probability (weights normalised to sum to 1), in ascending size order."""

    __slots__ = ("_probs", "source")

    def __init__(self, weights: Mapping[int, float] | Iterable[tuple[int, float]], *, source: str = "") -> None:
        items = weights.items() if isinstance(weights, Mapping) else weights
        clean: dict[int, float] = {}
        for size, weight in items:
            _check_size(size, source)
            _check_weight(weight, size, source)
            if weight > 0:
                clean[size] = clean.get(size, 0.0) + float(weight)
        total = math.fsum(clean.values())
        if not clean or total <= 0:
            where = f"{source}: " if source else ""
            raise GraphbenchError(f"{where}the batch-size distribution is empty (no size with a positive count)")
        self._probs: dict[int, float] = {s: clean[s] / total for s in sorted(clean)}
        self.source = source

    @classmethod
    def uniform(cls, max_size: int, min_size: int = 1) -> "BatchSizeDistribution":
        """Every batch size in min_size..max_size equally likely."""
        _check_size(min_size, "", what="min_size")
        _check_size(max_size, "", what="max_size")
        if max_size < min_size:
            raise GraphbenchError(f"max_size {max_size} is below min_size {min_size}")
        return cls({n: 1.0 for n in range(min_size, max_size + 1)}, source=f"uniform {min_size}..{max_size}")

    @classmethod
    def from_samples(cls, sizes: Iterable[int], *, source: str = "") -> "BatchSizeDistribution":
        """The empirical distribution of observed batch sizes."""
        sizes = list(sizes)
        for size in sizes:
            _check_size(size, source)
        return cls(Counter(sizes), source=source)

    @classmethod
    def from_file(cls, path: str | Path) -> "BatchSizeDistribution":
        """Load a histogram, a list of sizes or a JSONL trace (see the module docstring)."""
        return load_distribution(path)

    def __getitem__(self, size: int) -> float:
        return self._probs[size]

    def __iter__(self) -> Iterator[int]:
        return iter(self._probs)

    def __len__(self) -> int:
        return len(self._probs)

    def __repr__(self) -> str:
        return f"BatchSizeDistribution({len(self)} sizes, {self.min_size}..{self.max_size}, source={self.source!r})"

    @property
    def sizes(self) -> tuple[int, ...]:
        """The sizes with a positive probability, ascending."""
        return tuple(self._probs)

    @property
    def min_size(self) -> int:
        return next(iter(self._probs))

    @property
    def max_size(self) -> int:
        return next(reversed(self._probs))

    def mean(self) -> float:
        """Expected batch size."""
        return math.fsum(s * p for s, p in self._probs.items())


def as_distribution(distribution: Mapping[int, float] | None, default_max: int | None) -> BatchSizeDistribution:
    """A BatchSizeDistribution from a mapping, or uniform over 1..default_max when None."""
    if isinstance(distribution, BatchSizeDistribution):
        return distribution
    if distribution is not None:
        return BatchSizeDistribution(distribution)
    if default_max is None or default_max <= 0:
        raise GraphbenchError("an empty ladder needs max_size or a distribution to average over")
    return BatchSizeDistribution.uniform(default_max)


def load_distribution(path: str | Path) -> BatchSizeDistribution:
    """Read a batch-size distribution file; GraphbenchError on a missing file or a bad row."""
    p = Path(path)
    if not p.exists():
        raise GraphbenchError(f"distribution file not found: {p}")
    if not p.is_file():
        raise GraphbenchError(f"distribution path is not a file: {p}")
    name = str(p)
    log = read_server_log(p)  # a vLLM server log with --cudagraph-metrics tables, streamed (gzip too)
    if log is not None:
        return BatchSizeDistribution(log.counts, source=f"{name}: {log.summary()}")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        if is_gzip(p):
            raise GraphbenchError(f"{name}: gzip-compressed, and not a vLLM log with --cudagraph-metrics tables "
                                  "(the one kind read compressed): decompress it") from None
        if packed := compression(p):
            raise GraphbenchError(f"{name}: {packed}-compressed: decompress it (of compressed files, vLLM logs in "
                                  "gzip are read)") from None
        raise GraphbenchError(f"cannot read distribution file {p}: {exc}") from None
    if server := other_server(text[:1 << 16]):
        raise GraphbenchError(not_read_log(name, server))
    suffix = p.suffix.lower()
    check_not_a_result(text, name, "batch sizes")
    if is_request_trace(text):
        raise GraphbenchError(f"{name}: a per-request trace (request lengths), not batch sizes: `graphbench tune "
                              "--from` replays it through the scheduler")
    if suffix == ".json":
        return BatchSizeDistribution(_parse_json(text, name), source=name)
    if suffix in (".jsonl", ".ndjson"):
        return BatchSizeDistribution(_parse_jsonl(text, name), source=name)
    if text.lstrip().startswith(("{", "[")):
        try:
            data = json.loads(text, object_pairs_hook=unique_keys(name))
        except json.JSONDecodeError:
            return BatchSizeDistribution(_parse_jsonl(text, name), source=name)
        except (ValueError, RecursionError):  # an int past 4300 digits, or nesting past the recursion limit
            loads(text, name)  # raises it as a GraphbenchError naming the file
            raise
        return BatchSizeDistribution(_json_counts(data, name), source=name)
    return BatchSizeDistribution(_parse_text(text, name), source=name)


def _parse_json(text: str, name: str) -> Counter[int]:
    try:
        data = json.loads(text, object_pairs_hook=unique_keys(name))
    except json.JSONDecodeError as exc:
        raise GraphbenchError(f"{name}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    except (ValueError, RecursionError):  # an int past 4300 digits, or nesting past the recursion limit
        loads(text, name)  # raises it as a GraphbenchError naming the file
        raise
    return _json_counts(data, name)


def _json_counts(data: object, name: str) -> Counter[int]:
    counts: Counter[int] = Counter()
    if isinstance(data, dict):
        for key, count in data.items():
            size = _int_field(key, name, f"key {key!r}")
            _check_weight(count, size, name)
            counts[size] += count
    elif isinstance(data, list):
        for i, item in enumerate(data):
            counts[_int_field(item, name, f"item {i}")] += 1
    else:
        raise GraphbenchError(f"{name}: expected a JSON object {{\"size\": count}} or an array of batch sizes")
    return counts


def _parse_jsonl(text: str, name: str) -> Counter[int]:
    counts: Counter[int] = Counter()
    for lineno, record in json_lines(text, name):
        if not isinstance(record, dict):
            raise GraphbenchError(f"{name}:{lineno}: expected a JSON object with batch_size or num_tokens")
        where = f"{name}:{lineno}"
        key = _one_of(record, SIZE_COLUMNS, where, "the record has", "give one of")
        if key is None:
            raise GraphbenchError(f"{where}: record has neither batch_size nor num_tokens")
        size = _int_field(record[key], where, key)
        weight_key = _one_of(record, COUNT_COLUMNS, where, "the record has", "give one of")  # (a CSV's count column)
        weight = 1 if weight_key is None else record[weight_key]
        _check_weight(weight, size, where)
        counts[size] += weight
    return counts


def _one_of(present: Iterable[str], names: tuple[str, ...], where: str, found: str, give: str) -> str | None:
    """The one of names among present (a CSV header's columns, a JSONL record's keys; None: none of them); two
    are an error: which one's values were meant?"""
    named = [k for k in present if k in names]
    if len(named) > 1:
        raise GraphbenchError(f"{where}: {found} {' and '.join(named)}: {give} {' or '.join(names)}")
    return named[0] if named else None


def _parse_text(text: str, name: str) -> Counter[int]:
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), start=1)]
    lines = [(n, line) for n, line in lines if line and not line.startswith("#")]
    if not lines:
        return Counter()
    first_no, first = lines[0]
    if _parses(first, int):
        return _parse_size_list(lines, name)
    header = [h.strip().lower() for h in next(csv.reader([first]))]
    rows = lines[1:]
    if len(header) == 2 and _parses(header[0], int) and _parses(header[1], float):  # no header: size,count rows
        header, rows = ["batch_size", "count"], lines
    where = f"{name}:{first_no}"  # (two size or count columns: the first had been taken, the others' values unused)
    size_name = _one_of(header, SIZE_COLUMNS, where, "the header names", "give one column of")
    if size_name is None:
        raise GraphbenchError(f"{where}: not a batch-size distribution, got {first!r}; expected one of: "
                              f"{LINE_FORMATS} (or JSON, JSONL, a vLLM log)")
    size_col = header.index(size_name)
    count_name = _one_of(header, COUNT_COLUMNS, where, "the header names", "give one column of")
    count_col = None if count_name is None else header.index(count_name)
    counts: Counter[int] = Counter()
    for lineno, line in rows:
        row = [cell.strip() for cell in next(csv.reader([line]))]
        if len(row) != len(header):
            raise GraphbenchError(f"{name}:{lineno}: expected {len(header)} columns, got {len(row)}: {line!r}")
        size = _int_field(row[size_col], f"{name}:{lineno}", header[size_col])
        count: float = 1
        if count_col is not None:
            count = _number_field(row[count_col], f"{name}:{lineno}", header[count_col])
        counts[size] += count
    return counts


def _parse_size_list(lines: list[tuple[int, str]], name: str) -> Counter[int]:
    counts: Counter[int] = Counter()
    for lineno, line in lines:
        counts[_int_field(line, f"{name}:{lineno}")] += 1
    return counts


def _parses(text: str, kind: type) -> bool:
    """Whether int(text) (or float(text)) takes it: a first line of numbers is data, not a header."""
    try:
        kind(text)
    except ValueError:
        return False
    return True


def _int_field(value: object, where: str, what: str = "batch size") -> int:
    """A positive integer batch size from a JSON value or a text cell."""
    if isinstance(value, str):
        if not re.fullmatch(r"[0-9]+", value.strip()):
            raise GraphbenchError(f"{where}: {what} must be a positive integer, got {value!r}")
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise GraphbenchError(f"{where}: {what} must be a positive integer, got {value!r}")
    return value


def _number_field(value: str, where: str, what: str = "count") -> float:
    try:
        if "_" in value or not value.isascii():  # float() reads '1_000' and other scripts' digits
            raise ValueError(value)
        number = float(value)
    except ValueError:
        raise GraphbenchError(f"{where}: {what} must be a number, got {value!r}") from None
    if not math.isfinite(number) or not 0 <= number <= MAX_WEIGHT:
        raise GraphbenchError(f"{where}: {what} must be a non-negative number (at most {MAX_WEIGHT:g}), got {value!r}")
    return number


MAX_BATCH_SIZE = 1 << 20  # tokens in one step: no engine runs more
MAX_WEIGHT = 1e18  # steps of one size: far past any log, and the sum over every size stays finite
# the text formats, as the error for a file in none of them says (and the options' help, with FILE_FORMATS)
LINE_FORMATS = ("a CSV with a header naming batch_size or num_tokens, and optionally count, weight or frequency "
                "(`batch_size,count`); `size,count` rows without a header; one batch size per line")
FILE_FORMATS = ("One of: " + LINE_FORMATS + "; a JSON object {\"size\": count} or array of sizes; JSONL, one object "
                "a line with batch_size or num_tokens and optionally count, weight or frequency; a vLLM log with "
                "--cudagraph-metrics tables. Sizes are "
                f"integers 1..{MAX_BATCH_SIZE}, counts numbers >= 0 (1 a row without a count column); blank lines and lines "
                "starting with # are skipped")


def _check_size(size: object, source: str, *, what: str = "batch size") -> None:
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= MAX_BATCH_SIZE:
        where = f"{source}: " if source else ""
        raise GraphbenchError(f"{where}{what} must be an integer in 1..{MAX_BATCH_SIZE}, got {size!r}")


def _check_weight(weight: object, size: int, source: str) -> None:
    ok = isinstance(weight, (int, float)) and not isinstance(weight, bool)
    # compared, not math.isfinite(): that overflows on a JSON int past a float's range; NaN fails it too
    if not ok or not 0 <= weight <= MAX_WEIGHT:  # type: ignore[operator]
        where = f"{source}: " if source else ""
        raise GraphbenchError(f"{where}count of batch size {size} must be a non-negative number (at most "
                              f"{MAX_WEIGHT:g}), got {weight!r:.60}")
