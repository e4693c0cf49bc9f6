"""Numbers as a user types them and as the logs graphbench reads write them: ASCII only.

Python's int() and float() also take '1_0' (underscores between digits) and other scripts' digits ('\u0661' is
1), which no option, config or log of graphbench means: a typo would run as another number. Every parser of a
number from text goes through these (they raise ValueError, as int() and float() do, for the caller's message).
"""

from __future__ import annotations

import re

INTEGER = re.compile(r"[-+]?[0-9]+")


def plain(text: str) -> bool:
    """ASCII, without '_': what float() may read as the number it looks like."""
    return text.isascii() and "_" not in text


def ascii_int(text: str) -> int:
    """int(text) of ASCII digits with an optional sign (past 4300 digits int() raises ValueError too)."""
    if not INTEGER.fullmatch(text):
        raise ValueError(text)
    return int(text)


def ascii_float(text: str) -> float:
    """float(text) of plain text."""
    if not plain(text):
        raise ValueError(text)
    return float(text)
