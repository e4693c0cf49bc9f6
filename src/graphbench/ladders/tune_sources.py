"""Inputs of ladder tuning: batch-size distributions from measured runs, vLLM server logs or parametric
models (the graph-memory model fitted from measured capture results: ladders/memory_model.py). Pure Python;
no torch.

Parametric models (``model_distribution``):

- ``closed:C[:W]``: closed-loop serving at concurrency C. Most decode steps carry all C requests,
  so weight W (default 0.9) sits on C; the rest (1 - W) is spread uniformly over 1..C-1 to model
  the tail when requests finish and are not yet replaced; at C = 1 there is no tail, so W, if given,
  must be 1 (closed:1 is all weight on 1). Sizes are in tokens: with speculative
  decoding each request contributes ``tokens_per_request`` (1 + k) tokens, so size r becomes r*(1+k).
- ``uniform:A-B`` (or ``uniform:B`` for 1..B): every batch size from A to B tokens equally likely.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from graphbench.errors import GraphbenchError
from graphbench.ladders.distributions import MAX_BATCH_SIZE, BatchSizeDistribution
from graphbench.ladders.log_text import compression, not_read_log, other_server
from graphbench.ladders.request_trace import is_request_trace
from graphbench.ladders.vllm_log import BENCH_SUMMARY, read_server_log
from graphbench.ladders.vllm_log_lines import MAX_TOKENS

CLOSED_WEIGHT = 0.9
MODEL_FORMS = "closed:C, closed:C:W or uniform:A-B"
FROM_KINDS = ("graphbench result JSON, vLLM server logs with --cudagraph-metrics tables (a vLLM log line, such as "
              "`INFO 12-04 10:11:12 [loggers.py:123] ...`, among the first lines), and per-request benchmark outputs "
              "(`vllm bench serve --save-result --save-detailed` JSON, lists of input_len/output_len)")


def load_run_results(paths: Iterable[str | Path], option: str = "--from") -> tuple[list[dict[str, Any]], list[str]]:
    """Successful results under the given files or folders, and one warning per skipped file; option: the
    flag that named them (--from reads other kinds too, --memory-from graphbench results only)."""
    from graphbench.reports.store import load_results  # the reports package stays out of plain ladder use

    paths = list(paths)
    loaded = load_results(paths)
    warnings = [f"skipped {file}: {why}" for file, why in loaded.skipped]
    ok = [r for r in loaded.results if r.get("status", "ok") == "ok"]
    if not ok:
        why = "".join(f"; {_skipped_because(Path(file), reason, option)}" for file, reason in loaded.skipped[:3])
        more = f"; and {len(loaded.skipped) - 3} more skipped" if len(loaded.skipped) > 3 else ""
        reads = FROM_KINDS if option == "--from" else "graphbench result JSON (a sweep's results folder)"
        raise GraphbenchError(f"no successful graphbench result in {', '.join(map(str, paths))}{why}{more}. "
                              f"{option} reads {reads}")
    return ok, warnings


def _skipped_because(path: Path, reason: str, option: str) -> str:
    """Why a file named by option was skipped: --from reads several kinds, --memory-from results only."""
    return _not_a_source(path, reason) if option == "--from" else f"{path} is not a graphbench result ({reason})"


def _not_a_source(path: Path, reason: str) -> str:
    """Why a --from file is none of the kinds tune reads, naming `vllm bench serve`'s console output."""
    text = ""
    try:
        if path.is_file():  # (a regular file only: opening a FIFO blocks until something writes to it)
            with open(path, "rb") as head:
                text = head.read(1 << 16).decode("utf-8", "replace")
    except OSError:
        pass
    if server := other_server(text):
        return not_read_log(str(path), server)
    if path.is_file() and (packed := compression(path)):  # (a FIFO's open would block)
        return f"{path} is {packed}-compressed: decompress it (of compressed files, vLLM logs in gzip are read)"
    if BENCH_SUMMARY in text:
        return (f"{path} is the console output of `vllm bench serve` (its {BENCH_SUMMARY!r}), which holds no "
                "per-request lengths")
    if is_request_trace(text):  # (its head; tuning imports ladders, so its limit is imported here)
        from graphbench.tuning.trace_replay import MAX_TRACE_BYTES

        size = path.stat().st_size
        if size > MAX_TRACE_BYTES:
            return (f"{path} is a request trace (a `vllm bench serve` result) of {size >> 20} MiB, over the "
                    f"{MAX_TRACE_BYTES >> 20} MiB a trace is read up to: save fewer requests (--num-prompts)")
        return (f"{path} is a request trace (a `vllm bench serve` result): give it as a file of its own (a folder "
                "is read for graphbench results only)")
    return f"{path} is not a graphbench result ({reason}) and holds no vLLM log line among its first lines"


def server_logs(paths: list[Path], warnings: list[str]) -> tuple[BatchSizeDistribution, tuple[int, ...] | None] | None:
    """--from files that are vLLM server logs with --cudagraph-metrics tables (plain or gzip, streamed),
    summed into one distribution, with the largest capture ladder their records announce (None: none
    does); None when none is (then they are graphbench results). A `- Capture sizes:` line that holds no
    list of sizes is named in warnings (its ladder is not compared against)."""
    logs, others = [], []
    for path in paths:
        log = read_server_log(path) if path.is_file() and path.suffix.lower() != ".json" else None
        (logs if log is not None else others).append((path, log))
    if not logs:
        return None
    if others:
        raise GraphbenchError(f"--from mixes vLLM server logs ({logs[0][0]}) with files of another kind "
                              f"({others[0][0]}: graphbench results or request traces): give one kind")
    total: Counter[int] = Counter()
    for path, log in logs:
        total.update(log.counts)
        if log.unread_ladder_lines:
            more = len(log.unread_ladder_lines) - 1
            warnings.append(f"{path}:{log.unread_ladder_lines[0]}: a '- Capture sizes:' line holds no list of sizes "
                            f"a server captures (cut short, or a size outside 1..{MAX_TOKENS}){f' (and {more} more)' if more else ''}: the server's ladder there is not read")
        if log.ladders > 1:
            warnings.append(f"{path}: its records announce {log.ladders} different capture ladders (the server "
                            "restarted with other settings?): the tables of every one are summed, and the largest "
                            "ladder is the one compared against")
    ladder = max((log.capture_sizes for _, log in logs if log.capture_sizes), key=len, default=None)
    return BatchSizeDistribution(total, source=" | ".join(f"{p}: {log.summary()}" for p, log in logs)), ladder


def workload_names(results: Iterable[Mapping[str, Any]]) -> list[str]:
    """The workload names found in the results, first-seen order."""
    names: dict[str, None] = {}
    for result in results:
        for workload in result.get("workloads") or []:
            names.setdefault(str(workload.get("name")), None)
    return list(names)


PHASE_HISTOGRAMS = {"all": "batch_size_histogram", "decode": "decode_size_histogram",
                    "mixed": "mixed_size_histogram"}


def distribution_from_results(
    results: Iterable[Mapping[str, Any]], workloads: Iterable[str] | None = None, phase: str = "all"
) -> BatchSizeDistribution:
    """The summed batch-size histograms of every repeat of the chosen workloads (default: all); phase
    decode or mixed: of that phase's steps only (ladders/phases.py). A peer's results (hf-eager, hf-compile,
    gpt-fast: a sweep's references, static batches of transformers) record no engine steps: passed over."""
    key = PHASE_HISTOGRAMS[phase]
    results = [r for r in results if r.get("system") in (None, "graphbench")]
    wanted = None if workloads is None else list(dict.fromkeys(workloads))
    available = workload_names(results)
    if wanted:
        missing = [w for w in wanted if w not in available]
        if missing:
            raise GraphbenchError(
                f"no workload named {', '.join(missing)} in the results; "
                f"available: {', '.join(available) or 'none'}"
            )
    counts: Counter[int] = Counter()
    for result in results:
        where = result.get("_path", result.get("label", "result"))
        for workload in result.get("workloads") or []:
            if wanted and str(workload.get("name")) not in wanted:
                continue
            for repeat in workload.get("repeats") or []:
                if phase != "all" and isinstance(repeat, Mapping) and key not in repeat:
                    raise GraphbenchError(f"{where}: no {key} (results written before 2026-12-04 keep one "
                                          "histogram for both phases): run them again, or tune without --phase")
                histogram = repeat.get(key) or {}
                if not isinstance(histogram, Mapping):
                    raise GraphbenchError(f"{where}: {key} must be an object {{size: steps}}")
                for size, steps in histogram.items():
                    try:
                        n = int(size)
                    except (TypeError, ValueError):
                        raise GraphbenchError(f"{where}: bad batch size {size!r} in {key}") from None
                    if isinstance(steps, bool) or not isinstance(steps, (int, float)) or steps < 0 or n <= 0:
                        raise GraphbenchError(f"{where}: bad histogram entry {size!r}: {steps!r}")
                    counts[n] += steps
    label = (f"{len(results)} result(s)" + (f", workloads {', '.join(wanted)}" if wanted else "")
             + ("" if phase == "all" else f", {phase} steps"))
    if not counts or not any(counts.values()):
        raise GraphbenchError(f"the results hold no batch-size histogram ({label})")
    return BatchSizeDistribution(counts, source=f"measured batch sizes ({label})")


def model_distribution(spec: str, tokens_per_request: int = 1) -> BatchSizeDistribution:
    """A parametric distribution: closed:C[:W] or uniform:A-B (see the module docstring)."""
    text = spec.strip().lower()
    kind, _, args = text.partition(":")
    if kind == "closed":
        m = re.fullmatch(r"(\d+)(?::([0-9.eE+-]+))?", args)
        if not m or int(m.group(1)) <= 0:
            raise GraphbenchError(f"bad model {spec!r}: expected closed:C with C a positive integer (or closed:C:W)")
        c = int(m.group(1))
        if c * max(1, tokens_per_request if isinstance(tokens_per_request, int) else 1) > MAX_BATCH_SIZE:
            raise GraphbenchError(f"bad model {spec!r}: a closed loop of {c} requests is over {MAX_BATCH_SIZE} tokens a step")
        weight = CLOSED_WEIGHT if m.group(2) is None else _fraction(m.group(2), spec)
        if c == 1 and m.group(2) is not None and weight != 1:
            raise GraphbenchError(f"bad model {spec!r}: at C = 1 there is no size below C for the rest (1 - W) "
                                  "to go to, so all the weight is at 1: give closed:1 (or W = 1)")
        if isinstance(tokens_per_request, bool) or not isinstance(tokens_per_request, int) or tokens_per_request <= 0:
            raise GraphbenchError(f"tokens per request must be a positive integer, got {tokens_per_request!r}")
        t = tokens_per_request
        weights = {c * t: 1.0} if c == 1 else {c * t: weight, **{r * t: (1 - weight) / (c - 1) for r in range(1, c)}}
        w = "" if m.group(2) is None else f", weight {weight:g} at C"
        per = f", {t} tokens per request" if t > 1 else ""
        return BatchSizeDistribution(weights, source=f"model closed-loop concurrency {c}{w}{per}")
    if kind == "uniform":
        m = re.fullmatch(r"(?:(\d+)-)?(\d+)", args)
        if not m:
            raise GraphbenchError(f"bad model {spec!r}: expected uniform:A-B with 1 <= A <= B")
        low, high = int(m.group(1) or 1), int(m.group(2))
        if not 1 <= low <= high <= MAX_BATCH_SIZE:
            raise GraphbenchError(f"bad model {spec!r}: expected uniform:A-B with 1 <= A <= B <= {MAX_BATCH_SIZE}")
        return BatchSizeDistribution({n: 1.0 for n in range(low, high + 1)}, source=f"model uniform {low}..{high}")
    raise GraphbenchError(f"unknown distribution model {spec!r}; expected {MODEL_FORMS}")


def _fraction(text: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 1:
        raise GraphbenchError(f"bad model {spec!r}: the weight W at C must be in (0, 1]")
    return value
