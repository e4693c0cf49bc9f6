"""The numbers of a result file that compare, gate, plan and the report compute with, checked as the file
is loaded (reports/store.py: check_shape): a value no measurement can take skips the file by name, rather
than a verdict, a plan or a chart being computed from it. No torch.

- the catalogue's metrics (reports/metric_catalogue.py) in each repeat and start: absent, null or NaN (a
  statistic of no samples), else within what the unit allows;
- a workload's `summary`: the median, min and max of each entry likewise, but never NaN (graphbench leaves a
  statistic of no samples out of it): each process's medians are taken from it where the repeats lack a
  metric (requests_per_s, which plan reads), and a result without repeats is read from it alone;
- other leaf values the report's tables compute with: finite numbers.

What the unit allows: nothing negative (but a free-memory delta), a percentage at most 100, a fraction at
most 1, and nothing past MAX_MAGNITUDE: 1e300 tokens/s is finite, but printed 300 digits wide in compare's
tables and overflowed the variance of a t-test into a NaN p-value.
"""

from __future__ import annotations

import math
from typing import Any

from graphbench.reports.metric_catalogue import CATALOGUE, POINT

# A free-memory delta: another process's allocation during capture can make it negative.
SIGNED_METRICS = ("graph_memory_bytes",)
UNIT_MAX = {"%": 100.0, "fraction": 1.0}
MAX_MAGNITUDE = 1e15  # past any measurement: 1 PB, 10^15 tokens/s, 31,000 years in ms
UNITS = {metric.name: metric.unit for metric in CATALOGUE}
SUMMARY_FIELDS = ("median", "min", "max")


def _possible(number: float, name: str, unit: str) -> bool:
    low = -MAX_MAGNITUDE if name in SIGNED_METRICS else 0.0
    return low <= number <= min(UNIT_MAX.get(unit, MAX_MAGNITUDE), MAX_MAGNITUDE)


def check_metrics(data: dict[str, Any], where: str, point: bool) -> None:
    """The catalogue's metrics of a repeat (point=False) or a start ({"startup": start}, point=True): absent,
    null or NaN, else a number the unit allows."""
    for metric in CATALOGUE:
        if (metric.scope == POINT) != point:
            continue
        value: Any = data
        for key in metric.path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue  # absent, or not a number: the readers say so by name
        number = as_float(value)
        if not math.isnan(number) and not _possible(number, metric.name, metric.unit):
            shown = ".".join(metric.path[1:] if point else metric.path)  # a point metric's path starts at 'startup'
            raise ValueError(f"{where}: {shown} is {_shown(value, number)}, not a possible {metric.unit} value")


def check_summary(summary: dict[str, Any], where: str) -> None:
    """A workload's summary: each entry an object (or null) whose median, min and max are absent, null or
    numbers the entry's unit allows (a catalogue metric's; otherwise nothing negative or past MAX_MAGNITUDE)."""
    for key, stats in summary.items():
        if stats is None:
            continue
        if not isinstance(stats, dict):
            raise ValueError(f"{where}: summary {key!r} is not an object")
        unit = UNITS.get(key, "")
        for field in SUMMARY_FIELDS:
            value = stats.get(field)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{where}: summary {key!r}: {field!r} is not a number")
            number = as_float(value)
            if math.isnan(number) or not _possible(number, key, unit):
                raise ValueError(f"{where}: summary {key!r}: {field} is {_shown(value, number)}, not a possible "
                                 f"{unit + ' ' if unit else ''}value")


def check_numbers(data: dict[str, Any], where: str, keys: tuple[str, ...], required: bool = False,
                  times: bool = False) -> None:
    """The leaf values the report's tables compute with: finite numbers within MAX_MAGNITUDE, and with times
    not negative (absent or null allowed unless required). A NaN or an overflowed 1e400 (read as inf) skips the
    file by name instead of failing the report, or printing +inf% in a comparison; a negative step total would
    have been summed into the report's per-mode time as if measured."""
    for key in keys:
        value = data.get(key)
        if value is None and not required:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where}: {key!r} is not a number")
        if not math.isfinite(number := as_float(value)):
            raise ValueError(f"{where}: {key!r} is {_shown(value, number)}, not a finite number")
        if abs(number) > MAX_MAGNITUDE:
            raise ValueError(f"{where}: {key!r} is {value!r}, past any measurement (at most {MAX_MAGNITUDE:g})")
        if times and number < 0:
            raise ValueError(f"{where}: {key!r} is {value!r}, a negative time")


def as_float(value: int | float) -> float:
    """The number as a float; an integer past a float's range (JSON reads 1 followed by 400 zeros as an
    int, where 1e400 is a float's inf) is inf, not an OverflowError traceback."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _shown(value: int | float, number: float) -> str:
    return f"an integer of {len(str(abs(value)))} digits" if math.isinf(number) and isinstance(value, int) else repr(value)
