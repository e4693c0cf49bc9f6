"""JSON Lines, read with errors that name the line. Pure Python."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from graphbench.errors import GraphbenchError


def json_lines(text: str, name: str) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) of each JSON line; blank lines and # comments skipped; errors name the line."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as exc:
            raise GraphbenchError(f"{name}:{lineno}: invalid JSON: {exc.msg}") from None
        except RecursionError:
            raise GraphbenchError(f"{name}:{lineno}: JSON nested too deeply") from None
