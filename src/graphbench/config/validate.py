"""Small validation helpers shared by the config dataclasses; each raises GraphbenchError."""

from __future__ import annotations

import difflib
from typing import Iterable

from graphbench.errors import GraphbenchError


def require_positive(name: str, value: int | float | None) -> None:
    """Fail unless value is None (unset) or > 0."""
    if value is not None and value <= 0:
        raise GraphbenchError(f"{name} must be positive, got {value}")


def require_int(name: str, value: object) -> None:
    """Fail unless value is None or an int (bools are not ints here)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise GraphbenchError(f"{name} must be an integer, got {value!r}")


def require_at_most(name: str, value: int | float | None, limit: int | float) -> None:
    """Fail unless value is None or <= limit (what a machine can hold: bigger is a typo or an attack)."""
    if value is not None and value > limit:
        raise GraphbenchError(f"{name} must be at most {limit}, got {value}")


def require_choice(name: str, value: str | None, choices: Iterable[str]) -> None:
    """Fail unless value is None or one of choices; suggest the closest choice."""
    choices = list(choices)
    if value is None or value in choices:
        return
    raise GraphbenchError(f"unknown {name} {value!r}{suggest(str(value), choices)}; choose from {', '.join(choices)}")


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice closest to word, or None where none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def suggest(word: str, choices: Iterable[str]) -> str:
    """Return ' (did you mean X?)' for the closest choice, or ''."""
    close = closest(word, choices)
    return f" (did you mean {close!r}?)" if close else ""


MAX_LIST = 4096  # sizes in a capture or compile list


def require_int_list(name: str, values: list[int] | None, limit: int | None = None) -> None:
    """Fail unless values is None or a list (at most MAX_LIST long) of positive ints, each <= limit."""
    if values is None:
        return
    if not isinstance(values, (list, tuple)):
        raise GraphbenchError(f"{name} must be a list of integers, got {values!r}")
    if len(values) > MAX_LIST:
        raise GraphbenchError(f"{name} must hold at most {MAX_LIST} sizes, got {len(values)}")
    for v in values:
        require_int(name, v)
        if v <= 0:
            raise GraphbenchError(f"{name} must hold positive sizes, got {v}")
        if limit is not None:
            require_at_most(name, v, limit)
