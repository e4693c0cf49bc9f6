"""Numbers of a comparison as text: values with their unit, changes, p-values, JSON-safe floats (no torch)."""

from __future__ import annotations

import math


def json_number(value: float | None) -> float | str | None:
    """Floats as they are; inf/-inf as strings (not valid JSON numbers)."""
    if value is None or math.isfinite(value):
        return value
    return "inf" if value > 0 else "-inf"


def format_value(value: float | None, unit: str) -> str:
    """Human-readable value with its unit: 2200.0 tok/s -> '2,200 tok/s', bytes -> 'MiB'/'GiB'."""
    if value is None:
        return "—"
    if not math.isfinite(value):
        return str(value)
    if unit == "bytes":
        size = abs(value)
        for name, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
            if size >= factor:
                return f"{value / factor:.2f} {name}"
        return f"{value:.0f} B"
    if unit == "fraction":
        return f"{value:.3f}"
    if abs(value) >= 100:
        text = f"{value:,.1f}"
    elif abs(value) >= 1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}" if unit != "%" else f"{text}%"


def format_change(change_pct: float | None) -> str:
    if change_pct is None:
        return "—"
    if not math.isfinite(change_pct):
        return "+inf%" if change_pct > 0 else "-inf%"
    return f"{change_pct:+.1f}%"


def format_p(p: float | None) -> str:
    if p is None:
        return "—"
    return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"
