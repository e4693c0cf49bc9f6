"""Text from result files made safe for the documents the reports write.

Labels, reasons, stderr tails and file names come from result files, which anyone can write. In
Markdown (report.md, the gate's CI summary) raw HTML and links would pass through to the reader's
renderer: `<`, `>`, `&` become entities and `[`, `]`, `` ` `` and `|` are escaped. In a CSV opened by a
spreadsheet a cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return is a formula
(`=HYPERLINK(...)`): such a text cell gets a leading `'` (OWASP's advice), numbers stay numbers.
"""

from __future__ import annotations

from typing import Any

_MARKDOWN = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "[": "\\[", "]": "\\]",
                           "`": "\\`", "\n": " ", "\r": " "})
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def markdown_text(text: Any) -> str:
    """Text for a Markdown table cell, heading or list item: no HTML, links, code spans or cell breaks."""
    return str(text).translate(_MARKDOWN)


def csv_text(value: Any) -> Any:
    """A CSV cell that a spreadsheet will not run: text starting like a formula gets a leading '."""
    if isinstance(value, str) and len(value) > 1 and value.startswith(_FORMULA_STARTS) and not _is_number(value):
        return "'" + value
    return value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
