"""The measured step-time curve: a pure-decode step's time at every batch size, and what it predicts.

`graphbench curve` measures it (bench/curve_measure.py: a dense ladder of exact FULL recordings, one per
size, each replayed with CUDA events after warm-up; the median of the timed steps) and writes one
self-describing JSON file. `tune --objective time` reads it: a ladder L serves a batch of n requests
with the recording of pad(n) = min{s in L : s >= n}, so its expected step time over a batch-size
distribution p is

    E_L = sum_n p(n) * t_graph(pad(n))      (n <= top of L)
        + sum_n p(n) * t_eager(n)           (n above the top: no recording, the compiled pieces eager)

t_graph is read at the exact size; t_eager, measured at fewer sizes, is interpolated linearly between
them. Pure Python; no torch.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphbench.errors import GraphbenchError
from graphbench.files import create_temp
from graphbench.ladders.distributions import MAX_BATCH_SIZE
from graphbench.ladders.jsonl import unique_keys

CURVE_KIND = "graphbench-step-curve"
CURVE_SCHEMA = 1
MAX_CURVE_BYTES = 16 << 20
MAX_VALUE = 1e12  # ms or s of one step or recording: past any measurement, and the fits' sums stay finite


@dataclass(frozen=True, slots=True)
class LinearCost:
    """A per-ladder cost modelled as fixed + per_graph * count + per_token * sum(sizes) (seconds, bytes)."""

    per_graph: float
    per_token: float
    fixed: float = 0.0

    def predict(self, sizes: Iterable[int]) -> float:
        sizes = list(sizes)
        return self.fixed + self.per_graph * len(sizes) + self.per_token * sum(sizes)


@dataclass(frozen=True, slots=True)
class StepCurve:
    """Step time per batch size (ms): graph_ms at every measured size, eager_ms where measured."""

    graph_ms: dict[int, float]
    eager_ms: dict[int, float] = field(default_factory=dict)
    capture_s: dict[int, float] = field(default_factory=dict)  # each size's recording, seconds
    capture_bytes: dict[int, int] = field(default_factory=dict)  # each size's free-memory delta
    meta: dict[str, Any] = field(default_factory=dict)  # model, level, mode, GPU, versions, commit, date

    @property
    def max_size(self) -> int:
        return max(self.graph_ms)

    def graph_time(self, size: int) -> float:
        """The recording's step time at exactly this size."""
        try:
            return self.graph_ms[size]
        except KeyError:
            raise GraphbenchError(
                f"the step-time curve has no recording of {size} (it covers {_span(self.graph_ms)})") from None

    def eager_time(self, size: int) -> float:
        """The eager step time at size, interpolated linearly between measured sizes."""
        if not self.eager_ms:
            raise GraphbenchError(f"batches of {size} run eager above the ladder's top, and the curve has no "
                                  "eager times: measure it with `graphbench curve --eager-every N`")
        sizes = sorted(self.eager_ms)
        if size in self.eager_ms:
            return self.eager_ms[size]
        if not sizes[0] <= size <= sizes[-1]:
            raise GraphbenchError(f"no eager time for {size}: the curve's eager times cover {_span(self.eager_ms)}")
        i = bisect_left(sizes, size)
        lo, hi = sizes[i - 1], sizes[i]
        w = (size - lo) / (hi - lo)
        return self.eager_ms[lo] * (1 - w) + self.eager_ms[hi] * w

    def capture_model(self) -> LinearCost | None:
        """Seconds to record a ladder: per graph + per token, least squares over the measured sizes."""
        return _fit_line(self.capture_s, fixed=0.0)

    def to_dict(self) -> dict[str, Any]:
        keyed = lambda d: {str(k): v for k, v in sorted(d.items())}  # noqa: E731 (JSON keys are strings)
        return {"kind": CURVE_KIND, "schema_version": CURVE_SCHEMA, **self.meta,
                "graph_ms": keyed(self.graph_ms), "eager_ms": keyed(self.eager_ms),
                "capture_s": keyed(self.capture_s), "capture_bytes": keyed(self.capture_bytes)}


def _span(values: Mapping[int, Any]) -> str:
    sizes = sorted(values)
    return f"{sizes[0]}..{sizes[-1]}" if sizes else "no sizes"


def _fit_line(points: Mapping[int, float], fixed: float) -> LinearCost | None:
    """y = a + b * size by least squares, both non-negative (a single point: b = 0)."""
    if not points:
        return None
    xs, ys = list(points), list(points.values())
    n, mx, my = len(xs), math.fsum(xs) / len(xs), math.fsum(ys) / len(ys)
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    b = 0.0 if sxx == 0 else math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    b = max(b, 0.0)
    a = max(my - b * mx, 0.0) if n else 0.0
    return LinearCost(per_graph=a, per_token=b, fixed=fixed)


def expected_step_ms(sizes: Iterable[int], distribution: Mapping[int, float], curve: StepCurve) -> float:
    """E[step ms] of a ladder over a batch-size distribution (weights normalised here)."""
    rungs = sorted(set(sizes))
    total = math.fsum(distribution.values())
    if not total > 0:
        raise GraphbenchError("the batch-size distribution is empty")
    cost = []
    for n, p in distribution.items():
        i = bisect_left(rungs, n)
        cost.append(p * (curve.graph_time(rungs[i]) if i < len(rungs) else curve.eager_time(n)))
    return math.fsum(cost) / total


def _sizes_map(data: Mapping[str, Any], key: str, where: str, integer: bool = False) -> dict[int, Any]:
    raw = data.get(key, {})
    if not isinstance(raw, dict):
        raise GraphbenchError(f"{where}: {key} must be an object of size -> value")
    out: dict[int, Any] = {}
    for k, v in raw.items():
        # ASCII digits only: str.isdigit() also passes '²', which int() refuses
        if not (isinstance(k, str) and k.isascii() and k.isdigit() and 1 <= int(k) <= MAX_BATCH_SIZE):
            raise GraphbenchError(f"{where}: {key} has a size {k!r} that is not an integer in 1..{MAX_BATCH_SIZE}")
        if int(k) in out:
            raise GraphbenchError(f"{where}: {key} gives size {int(k)} twice")
        ok = isinstance(v, int) if integer else isinstance(v, (int, float)) and math.isfinite(v) and v <= MAX_VALUE
        if isinstance(v, bool) or not ok or v < 0 or (key.endswith("_ms") and v == 0):
            what = "non-negative integer" if integer else f"positive finite number (at most {MAX_VALUE:g})"
            raise GraphbenchError(f"{where}: {key}[{k}] must be a {what}, got {v!r}")
        out[int(k)] = v
    return out


def curve_from_dict(data: Any, where: str = "the curve") -> StepCurve:
    """Check and read a curve file's contents; errors name the key at fault."""
    if not isinstance(data, dict) or data.get("kind") != CURVE_KIND:
        raise GraphbenchError(f"{where} is not a graphbench step-time curve (kind {CURVE_KIND!r}); "
                              "make one with `graphbench curve`")
    if data.get("schema_version") != CURVE_SCHEMA:
        raise GraphbenchError(f"{where}: unknown schema_version {data.get('schema_version')!r} (this graphbench "
                              f"reads {CURVE_SCHEMA})")
    graph = _sizes_map(data, "graph_ms", where)
    if not graph:
        raise GraphbenchError(f"{where}: graph_ms holds no sizes")
    missing = [n for n in range(1, max(graph) + 1) if n not in graph]
    if missing:  # `graphbench curve` records every size 1..max: a ladder may pad to any of them
        raise GraphbenchError(f"{where}: graph_ms must hold every size 1..{max(graph)} (`graphbench curve` "
                              f"records each); {len(missing)} missing, the first {missing[0]}")
    meta = {k: v for k, v in data.items()
            if k not in ("kind", "schema_version", "graph_ms", "eager_ms", "capture_s", "capture_bytes")}
    return StepCurve(graph, _sizes_map(data, "eager_ms", where), _sizes_map(data, "capture_s", where),
                     _sizes_map(data, "capture_bytes", where, integer=True), meta)


def curve_gpu(curve: StepCurve) -> str:
    """The GPU type a curve was measured on ('' where it does not say)."""
    environment = curve.meta.get("environment")
    return str((environment.get("gpu") if isinstance(environment, dict) else None) or "")


# what a curve's meta says of the measurement (named as errors name it, then its key); the GPU is curve_gpu's
_SAME_MEASUREMENT = (("model", "model"), ("-O level", "optimization_level"), ("context", "context_tokens"))


def median_curve(curves: list[StepCurve], names: list[str]) -> StepCurve:
    """Curves measured in separate processes (one `graphbench curve` each) as one: each size's median. They must
    be one measurement repeated: one model, -O level, context and GPU type where they say them, the same sizes
    timed (graph, eager, capture), and no process given twice (a copy would count it twice as evidence)."""
    _check_one_measurement(curves, names)
    first = curves[0]

    def medians(key: str) -> dict[int, float]:
        return {n: statistics.median(getattr(c, key)[n] for c in curves) for n in getattr(first, key)}

    meta = dict(first.meta, processes=len(curves))
    for _, key in _SAME_MEASUREMENT:  # what any of them says (they agree where they do)
        meta[key] = next((c.meta[key] for c in curves if c.meta.get(key) not in (None, "")), meta.get(key))
    meta["environment"] = next((c.meta["environment"] for c in curves if curve_gpu(c)), meta.get("environment"))
    return StepCurve(medians("graph_ms"), medians("eager_ms"), medians("capture_s"),
                     {n: round(v) for n, v in medians("capture_bytes").items()}, meta)


def _check_one_measurement(curves: list[StepCurve], names: list[str]) -> None:
    getters = [(what, lambda c, key=key: c.meta.get(key)) for what, key in _SAME_MEASUREMENT] + [("GPU", curve_gpu)]
    for what, get in getters:
        stated = [(name, get(c)) for c, name in zip(curves, names) if get(c) not in (None, "")]
        for name, value in stated[1:]:  # (a curve that does not say counts as the others')
            if value != stated[0][1]:
                raise GraphbenchError(f"the step-time curves are not one measurement repeated: {stated[0][0]} has "
                                      f"{what} {stated[0][1]!r}, {name} {value!r}")
    for key, what in (("graph_ms", "recordings"), ("eager_ms", "eager times (--eager-every)"),
                      ("capture_s", "capture times"), ("capture_bytes", "capture memory readings")):
        for curve, name in zip(curves[1:], names[1:]):
            a, b = getattr(curves[0], key), getattr(curve, key)
            if set(a) != set(b):
                apart = sorted(set(a) ^ set(b))
                raise GraphbenchError(f"the step-time curves are not one measurement repeated: {names[0]} has "
                                      f"{what} at {len(a)} sizes ({_span(a)}), {name} at {len(b)} ({_span(b)}); "
                                      f"{len(apart)} size(s) in one only, the first {apart[0]}")
    for i, curve in enumerate(curves):
        for j in range(i):
            same = sum(curve.graph_ms[n] == curves[j].graph_ms[n] for n in curve.graph_ms)
            if same * 2 > len(curve.graph_ms):  # two processes' medians agree at a few sizes, not at most
                raise GraphbenchError(f"{names[i]} holds the same times as {names[j]} at {same} of "
                                      f"{len(curve.graph_ms)} sizes: one process given twice (each --curve must be a "
                                      "measurement of its own)")


def load_curve(path: str | Path) -> StepCurve:
    """Read a curve written by `graphbench curve`."""
    path = Path(path)
    try:
        if not path.is_file():
            raise GraphbenchError(f"{path}: not a file")
        if path.stat().st_size > MAX_CURVE_BYTES:
            raise GraphbenchError(f"{path}: larger than {MAX_CURVE_BYTES >> 20} MiB, not a step-time curve")
        data = json.loads(path.read_text(), object_pairs_hook=unique_keys(str(path)))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise GraphbenchError(f"{path}: cannot read a step-time curve ({type(e).__name__}: {e})") from None
    return curve_from_dict(data, str(path))


def write_curve(path: str | Path, curve: StepCurve) -> Path:
    """Write the curve atomically; an existing file is never overwritten."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = create_temp(path.parent, prefix=".tmp-", suffix=".json")  # the umask's mode, not 0600
    with os.fdopen(fd, "w") as f:
        json.dump(curve.to_dict(), f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(tmp, path)  # fails if the name exists
    except FileExistsError:
        raise GraphbenchError(f"{path} exists: results are never overwritten; choose another --out") from None
    finally:
        os.unlink(tmp)
    return path
