"""The load curve arithmetic of `graphbench plan` (reports/plan.py): where measured latency curves cross
their SLO limits, values between measured concurrencies, and GPU counts. Pure numbers; no torch."""

from __future__ import annotations

import math

import numpy as np

_INTEGER_TOLERANCE = 1e-9


def max_load(concurrency: list[float], curves: list[list[float]], limits: list[float]) -> tuple[float, int | None]:
    """(highest load at which every curve is within its limit, index of the curve that sets it: None
    when none is crossed) on measured curves sorted by concurrency, without NaN.

    The highest measured concurrency where every curve meets its limit, extended linearly toward the
    next measured one up to where the first curve goes above its limit; the highest concurrency (None:
    not crossed) when it meets them all; 0 when no measured concurrency does (the curve: the first one
    over its limit at the lowest). A miss at a lower concurrency does not lower it: plan_capacity warns.
    """
    pairs = list(zip(curves, limits))
    meets = [i for i in range(len(concurrency)) if all(v[i] <= limit for v, limit in pairs)]
    if not meets:
        return 0.0, next(j for j, (v, limit) in enumerate(pairs) if v[0] > limit)
    k = meets[-1]
    if k == len(concurrency) - 1:
        return concurrency[k], None
    (c0, c1) = concurrency[k], concurrency[k + 1]
    return min((c0 + (limit - v[k]) * (c1 - c0) / (v[k + 1] - v[k]), j)
               for j, (v, limit) in enumerate(pairs) if v[k + 1] > limit)


def crossing(concurrency: list[float], values: list[float], limit: float) -> tuple[float, bool]:
    """(highest load meeting value <= limit, whether the limit was crossed) on one measured curve:
    max_load of that curve alone."""
    load, limiting = max_load(concurrency, [values], [limit])
    return load, limiting is not None


def interpolate(concurrency: list[float], values: list[float], load: float) -> float:
    """values at load, linear between measured concurrencies (0 at load 0)."""
    if load <= 0 or not concurrency:
        return 0.0
    return float(np.interp(load, concurrency, values))


def ceil_tolerant(x: float) -> int:
    """ceil that treats x within a relative 1e-9 of an integer as that integer (float noise)."""
    nearest = round(x)
    return int(nearest) if abs(x - nearest) <= _INTEGER_TOLERANCE * max(1.0, abs(x)) else math.ceil(x)
