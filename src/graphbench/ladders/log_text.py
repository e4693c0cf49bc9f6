"""A server log's text, streamed (ladders/vllm_log.py reads its tables from it): plain or gzip, UTF-8 or UTF-16
with a byte-order mark, line by line with each line's length bounded."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

MAX_LINE = 1 << 20  # characters: a longer line is no table line, and is read past without being held whole
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as head:
        return head.read(2) == b"\x1f\x8b"


def open_log(path: Path):
    # lines end at "\n" only: a tty's "\r\n" after vLLM's own "\r\n" inside a record ("\r\r\n") is one end.
    # A log redirected by Windows PowerShell 5 (`docker logs vllm > vllm.log`) is UTF-16 with a byte-order mark.
    opener = gzip.open if is_gzip(path) else open
    with opener(path, "rb") as head:
        encoding = "utf-16" if head.read(2) in UTF16_BOMS else "utf-8-sig"
    return opener(path, "rt", encoding=encoding, errors="replace", newline="\n")


def bounded_lines(file) -> Iterator[str]:
    """The file's lines, each with its "\n", those longer than MAX_LINE left out (streaming bounds memory only
    where lines end: a file of gigabytes without a line break would otherwise be read as one line)."""
    while line := file.readline(MAX_LINE):
        if len(line) == MAX_LINE and not line.endswith("\n"):
            while (rest := file.readline(MAX_LINE)) and not rest.endswith("\n"):
                pass
            continue
        yield line


def text_lines(text: str) -> Iterator[str]:
    """A text's lines, each with its "\n" but a last one without (cut short), as a file's are read."""
    parts = text.split("\n")
    yield from (part + "\n" for part in parts[:-1])
    if parts[-1]:
        yield parts[-1]
