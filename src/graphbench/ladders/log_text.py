"""A server log's text, streamed (ladders/vllm_log.py reads its tables from it): plain or gzip, UTF-8 or UTF-16
with a byte-order mark, line by line with each line's length bounded."""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from pathlib import Path

MAX_LINE = 1 << 20  # characters: a longer line is no table line, and is read past without being held whole
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


# other compressions, by their magic bytes: named in the error, where otherwise a decode error would be all it said
COMPRESSED = ((b"\xfd7zXZ\x00", "xz"), (b"BZh", "bzip2"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"PK\x03\x04", "zip"))
# other servers' logs, which hold no --cudagraph-metrics table: named, where otherwise a parse error would be
OTHER_SERVERS = (
    ("SGLang", re.compile(r"\] (?:Decode|Prefill) batch\. .*#running-req: \d")),  # scheduler.py's batch lines
    ("TensorRT-LLM", re.compile(r"\[TensorRT-LLM\]\[(?:INFO|WARNING|ERROR|DEBUG|TRACE)\]")),
)


def compression(path: Path) -> str | None:
    """The compression other than gzip a file is in (its name), by its first bytes; None: none of them."""
    try:
        with open(path, "rb") as head:
            start = head.read(6)
    except OSError:
        return None
    return next((name for magic, name in COMPRESSED if start.startswith(magic)), None)


def other_server(text: str) -> str | None:
    """The name of the server whose log the text is, where it is one graphbench does not read."""
    return next((name for name, line in OTHER_SERVERS if line.search(text)), None)


def not_read_log(name: str, server: str) -> str:
    """Why another server's log is not read, and what is read in its place."""
    instead = ("its `python -m sglang.bench_serving --output-details` JSONL, which `graphbench tune --from` replays"
               if server == "SGLang" else "a per-request benchmark output (input and output lengths) to `graphbench "
               "tune --from`")
    return (f"{name}: {server}'s server log: graphbench reads the batch sizes of vLLM's --cudagraph-metrics tables "
            f"only; give {instead}, or a batch-size distribution")


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
