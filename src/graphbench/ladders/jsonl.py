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
        yield lineno, loads(line, f"{name}:{lineno}")


def loads(text: str, where: str) -> Any:
    """json.loads with its errors as GraphbenchError naming `where`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # a line that ends mid-value: a writer stopped (`vllm bench serve --append-result` killed mid-dump)
        cut = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        raise GraphbenchError(f"{where}: invalid JSON{', cut short' if cut else ''}: {exc.msg}") from None
    except ValueError as exc:  # json reads an int of any length; Python converts at most 4300 digits
        raise GraphbenchError(f"{where}: invalid JSON: {str(exc).split(':')[0]}") from None
    except RecursionError:
        raise GraphbenchError(f"{where}: JSON nested too deeply") from None


def unique_keys(where: str):
    """An object_pairs_hook for json.loads: an object naming a key twice is an error naming `where` (json
    keeps the last value silently: one count of a histogram, one size of a curve, lost)."""
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise GraphbenchError(f"{where}: key {key!r} is given twice in one object (JSON keeps only the last "
                                      "value): give it once")
            out[key] = value
        return out
    return hook
