"""Inputs of ladder tuning: the objective, positive integers, the batch-size distribution, rounding
up to a multiple, and the bounds a tuned ladder must keep to (its top and the multiple its sizes
are of), from the user's flags or from the engine config measured results were run with. Pure
Python; no torch.

Bounds (``tune_bounds``), each from the first that gives it: the top from --top, else the default
ladder's top for --max-num-seqs, else the max capture size the measured engine resolved, else the
largest capture size a server log announces, else the default ladder's top for 256 sequences; the multiple from --multiple-of, else 1 + the measured
num_speculative_tokens, else 1. A ladder within them is one the measured engine captures as given:
its sizes are multiples of 1 + k and none is above max_num_batched_tokens (docs/MACHINERY.md §1.5).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from graphbench.errors import GraphbenchError
from graphbench.ladders.distributions import BatchSizeDistribution
from graphbench.ladders.sizes import capture_sizes

OBJECTIVES = ("tokens", "waste", "time")
DEFAULT_MAX_NUM_SEQS = 256
MAX_GRAPHS = 4096  # more graphs than any server captures; the curve is computed for every count up to it


def as_dist(distribution: Mapping[int, float]) -> BatchSizeDistribution:
    """A BatchSizeDistribution as it is, a mapping size -> weight as one."""
    if isinstance(distribution, BatchSizeDistribution):
        return distribution
    if not isinstance(distribution, Mapping):
        raise GraphbenchError(f"a batch-size distribution must be a mapping size -> weight, got {distribution!r}")
    return BatchSizeDistribution(distribution)


def check_objective(objective: str) -> None:
    if objective not in OBJECTIVES:
        raise GraphbenchError(f"unknown objective {objective!r}; choose from {', '.join(OBJECTIVES)}")


def check_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise GraphbenchError(f"{name} must be a positive integer, got {value!r}")
    return value


def ceil_multiple(n: int, m: int) -> int:
    """n rounded up to a multiple of m."""
    return -(-n // m) * m


@dataclass(frozen=True, slots=True)
class EngineLimits:
    """The limits of a measured engine that bound its capture ladder (from a result's resolved config)."""

    max_num_seqs: int
    max_num_batched_tokens: int | None
    num_speculative_tokens: int
    max_capture_size: int  # the top of the ladder the engine resolved

    def text(self) -> str:
        parts = [f"max_num_seqs {self.max_num_seqs}"]
        if self.max_num_batched_tokens is not None:
            parts.append(f"max_num_batched_tokens {self.max_num_batched_tokens}")
        if self.num_speculative_tokens:
            parts.append(f"num_speculative_tokens {self.num_speculative_tokens}")
        return ", ".join(parts + [f"max capture size {self.max_capture_size}"])


def engine_limits(result: Mapping[str, object]) -> EngineLimits | None:
    """The engine limits a result records in its resolved ``config``; None when it records none (a peer)."""
    config = result.get("config")
    config = config if isinstance(config, Mapping) else {}
    seqs = _positive(_get(config, "scheduler", "max_num_seqs"))
    if seqs is None:
        return None
    tokens = _positive(_get(config, "scheduler", "max_num_batched_tokens"))
    k = _get(config, "speculative", "num_speculative_tokens")
    k = k if isinstance(k, int) and not isinstance(k, bool) and k >= 0 else 0
    top = _positive(_get(config, "compilation", "max_cudagraph_capture_size"))
    if top is None:  # the ladder as recorded: the config's list, else what the engine captured
        sizes = _get(config, "compilation", "cudagraph_capture_sizes") or _get(result, "startup", "capture_sizes")
        ok = isinstance(sizes, list) and sizes and all(_positive(s) for s in sizes)
        top = max(sizes) if ok else capture_sizes(seqs, num_speculative_tokens=k,
                                                  max_num_batched_tokens=tokens).max_capture_size
    mixed = _get(config, "compilation", "mixed_capture_sizes")
    if isinstance(mixed, list) and mixed and all(_positive(s) for s in mixed):
        top = max(top, max(mixed))  # two ladders: the engine recorded steps up to the mixed ladder's top
    return EngineLimits(seqs, tokens, k, top)


@dataclass(frozen=True, slots=True)
class TuneBounds:
    """What a tuned ladder keeps to, and the engine limits of the comparison ladders."""

    top: int
    multiple_of: int
    max_num_seqs: int
    max_num_batched_tokens: int | None = None
    top_from: str = "default"  # --top, --max-num-seqs, results or default
    engine: EngineLimits | None = None  # the measured engine the bounds came from
    warnings: tuple[str, ...] = field(default=())

    def comparison(self, performance_mode: str):
        """The default or interactivity ladder of the engine the bounds describe."""
        return capture_sizes(self.max_num_seqs, performance_mode=performance_mode,
                             num_speculative_tokens=self.multiple_of - 1,
                             max_num_batched_tokens=self.max_num_batched_tokens)


def tune_bounds(
    results: Iterable[Mapping[str, object]] = (),
    *,
    top: int | None = None,
    max_num_seqs: int | None = None,
    multiple_of: int | None = None,
    server_ladder: Sequence[int] | None = None,
) -> TuneBounds:
    """The bounds of a tuned ladder: the flags given win, then the engine the results were measured
    with (see the module docstring). Results of engines that disagree on a bound no flag gives are an
    error naming their values and the flag that picks one."""
    for name, value in (("--top", top), ("--max-num-seqs", max_num_seqs), ("--multiple-of", multiple_of)):
        if value is not None:
            check_int(name, value)
    results = list(results)
    found: dict[EngineLimits, list[str]] = {}
    for result in results:
        if (limits := engine_limits(result)) is not None:
            found.setdefault(limits, []).append(str(result.get("label") or result.get("_path") or "result"))
    warnings = []
    if results and not found:
        warnings.append("the results record no engine config (config.scheduler): the top and the comparison "
                        f"ladders assume --max-num-seqs {max_num_seqs or DEFAULT_MAX_NUM_SEQS}")
    if multiple_of is None:
        multiple_of = 1 + _agreed(found, lambda e: e.num_speculative_tokens, "num_speculative_tokens",
                                  lambda k: f"--multiple-of {1 + k}", 0)
    if found and top is None and max_num_seqs is None:
        top = _agreed(found, lambda e: e.max_capture_size, "ladder tops (max capture size)",
                      lambda t: f"--top {t}", None)
        top_from = "results"
    elif server_ladder and top is None and max_num_seqs is None:
        top, top_from = max(server_ladder), "server log"  # the server's own top, not the default ladder's
    else:
        top_from = "--top" if top is not None else "--max-num-seqs" if max_num_seqs is not None else "default"
    # the measured engine the bounds describe: the one of that top (or that max_num_seqs), the largest
    chosen = [e for e in found if e.max_capture_size == top or e.max_num_seqs == max_num_seqs] or list(found)
    engine = max(chosen, key=lambda e: e.max_num_seqs, default=None)
    seqs = max_num_seqs or (engine.max_num_seqs if engine else DEFAULT_MAX_NUM_SEQS)
    tokens = min((e.max_num_batched_tokens for e in chosen if e.max_num_batched_tokens), default=None)
    bounds = TuneBounds(top or 0, multiple_of, seqs, tokens, top_from, engine)
    if top is None:
        top = bounds.comparison("default").max_capture_size
        if top == 0:
            raise GraphbenchError(f"no default ladder size is a multiple of {multiple_of}; give --top")
    if tokens is not None and top > tokens:
        warnings.append(f"the top {top} is above the measured max_num_batched_tokens {tokens}: that engine drops "
                        f"capture sizes above {tokens}")
    return TuneBounds(top, multiple_of, seqs, tokens, top_from, engine, tuple(warnings))


def default_max_graphs(logged: Sequence[int] | None, default_ladder: Sequence[int], forced: int) -> tuple[int, str]:
    """tune's --max-graphs when none is given, and where it came from: as many graphs as the ladder the server
    runs now -- the capture sizes a vLLM log's records announce, else the default ladder of the bounds' engine
    (the table's "default" row) -- so the tuned ladder is compared with the current one at no more graphs;
    never fewer than the sizes the ladder must hold (the top and --require)."""
    if logged:
        count, source = len(logged), "the server log's capture sizes"
    else:
        count, source = len(default_ladder), "the default ladder's"
    count = max(count, forced)
    if count > MAX_GRAPHS:  # (said: "as many as" a ladder of 4999 sizes was 4096 in silence)
        source += f" ({count}), capped at the {MAX_GRAPHS} a tune takes"
    return min(count, MAX_GRAPHS), source


def _agreed(found: Mapping[EngineLimits, list[str]], key, what: str, flag, default):
    """The one value of key over the measured engines (default when there are none), else an error."""
    values: dict[object, list[str]] = {}
    for limits, labels in found.items():
        values.setdefault(key(limits), []).extend(labels)
    if len(values) > 1:
        choices = "; ".join(f"{v} ({_some(labels)})" for v, labels in sorted(values.items()))
        raise GraphbenchError(f"the results were measured with different {what}: {choices}; pick one with "
                              f"{' or '.join(flag(v) for v in sorted(values))}, or give --from one engine's results")
    return next(iter(values), default)


def _some(labels: list[str], shown: int = 3) -> str:
    more = f" and {len(labels) - shown} more" if len(labels) > shown else ""
    return ", ".join(labels[:shown]) + more


def _get(mapping: Mapping[str, object], *keys: str) -> object:
    for key in keys:
        mapping = mapping.get(key) if isinstance(mapping, Mapping) else None
    return mapping


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
