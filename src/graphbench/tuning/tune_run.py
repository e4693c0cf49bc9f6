"""`graphbench tune` from its options to the tuned ladder: the distribution (measured runs, a request
trace replayed through the scheduler, a server log, a file or a model), the bounds, the exact tuning, the
Pareto curve and the comparison ladders (no printing, no torch).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Optional

from graphbench.ascii_numbers import INTEGER
from graphbench.config.parts import DEFAULT_TOKEN_BUDGET
from graphbench.errors import GraphbenchError
from graphbench.ladders.distributions import load_distribution
from graphbench.ladders.emit import SERVERS, check_emit_alone
from graphbench.ladders.plot import check_plot_path
from graphbench.ladders.sizes import PERFORMANCE_MODES
from graphbench.ladders.startup_plan import check_coverage, startup_plan
from graphbench.ladders.tune import OBJECTIVES, TunedLadder, evaluate_ladder, knee, pareto_curve
from graphbench.ladders.tune_inputs import DEFAULT_MAX_NUM_SEQS, TuneBounds, check_int, default_max_graphs, tune_bounds
from graphbench.ladders.tune_sources import (
    distribution_from_results,
    load_run_results,
    model_distribution,
    server_logs,
)
from graphbench.tuning.trace_replay import ReplayLimits, replay_files
from graphbench.tuning.tune_document import tune_document
from graphbench.tuning.tune_models import (
    check_sources,
    compared_ladder,
    curve_summary,
    memory_model_for,
    one_curve,
    step_curves_for,
)

FORMATS = ("table", "json")
PHASES = ("all", "decode", "mixed", "both")
MIB = 2**20


@dataclass
class TuneRequest:
    """The tune command's options (names as the CLI's parameters)."""

    from_results: Optional[list[Path]] = None
    workload: Optional[list[str]] = None
    distribution: Optional[Path] = None
    model: Optional[str] = None
    max_graphs: Optional[int] = None  # None: as many as the server's current ladder (tune_inputs.default_max_graphs)
    objective: str = "tokens"
    curve: Optional[list[Path]] = None  # one or more processes' curves of one measurement
    max_capture_s: Optional[float] = None
    max_num_seqs: Optional[int] = None
    top: Optional[int] = None
    multiple_of: Optional[int] = None
    require: Optional[str] = None
    candidates: Optional[str] = None
    max_num_batched_tokens: Optional[int] = None
    block_size: int = 16
    num_kv_blocks: Optional[int] = None
    memory_budget_mib: Optional[float] = None
    memory_from: Optional[list[Path]] = None
    emit: Optional[str] = None
    plot: Optional[Path] = None
    output_format: str = "table"
    phase: str = "all"  # all steps, or decode / mixed steps only (their own ladders: ladders/phases.py)
    startup_coverage: Optional[float] = None  # capture on demand: plan each ladder's start-up recordings
    warnings: list[str] = field(default_factory=list)  # the caller's, carried into the result

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> "TuneRequest":
        names = {f.name for f in fields(cls)} - {"warnings"}
        return cls(**{k: v for k, v in options.items() if k in names})


@dataclass
class TuneResult:
    doc: dict[str, Any]  # what --format json prints (tuning/tune_document.py)
    tuned: TunedLadder
    pareto: list
    ladders: dict[str, TunedLadder]  # tuned, default, interactivity (and "server log": a vLLM log's ladder)
    bend: Any  # the Pareto curve's knee
    multiple_of: int
    step_curve: Any = None
    warnings: list[str] = field(default_factory=list)


def _check(r: TuneRequest) -> None:
    if r.output_format not in FORMATS:
        raise GraphbenchError(f"unknown format {r.output_format!r}; choose from {', '.join(FORMATS)}")
    if r.objective not in OBJECTIVES:
        raise GraphbenchError(f"unknown objective {r.objective!r}; choose from {', '.join(OBJECTIVES)}")
    if r.emit is not None and r.emit not in SERVERS:
        raise GraphbenchError(f"unknown server {r.emit!r} for --emit; choose from {', '.join(SERVERS)}")
    check_emit_alone(r.emit, r.output_format, r.plot)
    if r.plot is not None:
        check_plot_path(r.plot)
    if r.phase not in PHASES:
        raise GraphbenchError(f"unknown phase {r.phase!r}; choose from {', '.join(PHASES)}")
    if r.phase != "all" and not r.from_results:
        raise GraphbenchError(f"--phase {r.phase} needs steps that know their phase: measured results or a "
                              "request trace given with --from (a distribution or a model has none)")
    if r.phase == "both" and r.plot is not None:
        raise GraphbenchError("--plot draws one ladder's Pareto curve: tune --phase decode or mixed for it")
    if r.startup_coverage is not None:
        check_coverage(r.startup_coverage)
        if r.emit is not None:
            raise GraphbenchError("--startup-coverage plans graphbench's capture on demand, which no server takes "
                                  "as an option (vLLM's lazy capture, vllm-project/vllm#20098, was never merged): "
                                  "drop --emit to see the plan")
    if r.phase != "all" and r.emit == "vllm":
        raise GraphbenchError("vLLM takes one capture ladder for both phases (vllm-project/vllm#32946 prepares "
                              f"separate sizes): tune --phase all for it, or emit the {r.phase} ladder for sglang or trtllm")
    for flag, value in (("--max-num-batched-tokens", r.max_num_batched_tokens), ("--block-size", r.block_size),
                        ("--num-kv-blocks", r.num_kv_blocks)):
        if value is not None:  # never valid, whatever the source (a trace's replay or none)
            check_int(flag, value)


def _distribution(r: TuneRequest, warnings: list[str]):
    """(measured results, a trace's or server log's distribution or None, the server log's ladder or None):
    --from, --distribution or --model."""
    server_log, ladder = (server_logs(r.from_results, warnings) if r.from_results else None) or (None, None)
    replayed = None
    if server_log is None and (r.from_results or r.distribution):
        limits = (r.max_num_seqs, r.max_num_batched_tokens, r.block_size, r.num_kv_blocks)
        server_log = replayed = _request_traces(r.from_results or [r.distribution], limits, r.multiple_of, warnings,
                                                r.phase)
    if replayed is None and (r.max_num_batched_tokens is not None or r.block_size != 16 or r.num_kv_blocks is not None):
        warnings.append("--max-num-batched-tokens, --block-size and --num-kv-blocks shape a request trace's "
                        "replay only; this source is not one, so they are not used")
    if server_log is not None:
        if sum(map(bool, (r.from_results, r.distribution, r.model))) != 1:
            raise GraphbenchError("give exactly one of --from, --distribution or --model")
        if replayed is None and r.phase != "all":
            raise GraphbenchError(f"--phase {r.phase}: a server log's step counts do not say which phase a step was")
        return [], server_log, ladder
    return _measured(r.from_results, r.workload, r.distribution, r.model, warnings), None, None


def run_phase_tunes(r: TuneRequest) -> dict[str, TuneResult]:
    """--phase both: the decode ladder and the mixed ladder, each tuned from its own phase's steps."""
    from dataclasses import replace

    return {phase: run_tune(replace(r, phase=phase, warnings=list(r.warnings))) for phase in ("decode", "mixed")}


def run_tune(r: TuneRequest) -> TuneResult:
    """Tune the ladder the request asks for; GraphbenchError for unusable options or inputs."""
    warnings = list(r.warnings)
    _check(r)
    curves = step_curves_for(r.curve, r.objective, r.max_capture_s)
    step_curve = one_curve(curves, r.curve)
    measured, server_log, logged_ladder = _distribution(r, warnings)
    bounds = tune_bounds(measured, top=r.top, max_num_seqs=r.max_num_seqs, multiple_of=r.multiple_of,
                         server_ladder=logged_ladder)
    warnings += bounds.warnings
    if measured:
        dist = distribution_from_results(measured, r.workload or None, r.phase)
    else:
        dist = server_log or (load_distribution(r.distribution) if r.distribution
                              else model_distribution(r.model, bounds.multiple_of))
    comparisons = {mode: bounds.comparison(mode) for mode in PERFORMANCE_MODES}
    if r.phase != "all":
        bounds, extra = phase_bounds(bounds, dist, r.phase, r.top)
        comparisons |= extra
    memory_model = memory_model_for(r.memory_from, None if server_log is not None else r.from_results,
                                 r.memory_budget_mib, warnings)
    check_sources(step_curve, memory_model, warnings)
    options: dict[str, Any] = dict(
        objective=r.objective, top=bounds.top, multiple_of=bounds.multiple_of,
        required=_ints("--require", r.require) if r.require else (),
        candidates=_candidates(r.candidates, comparisons), memory_model=memory_model,
        memory_budget_bytes=None if r.memory_budget_mib is None else r.memory_budget_mib * MIB,
        step_curve=step_curve, capture_budget_s=r.max_capture_s)
    if r.candidates is not None and (above := sorted({c for c in options["candidates"] if c > bounds.top})):
        warnings.append(f"--candidates {', '.join(map(str, above))} above the top ({bounds.top}): not used")
    max_graphs, max_graphs_from = (r.max_graphs, "--max-graphs") if r.max_graphs is not None else default_max_graphs(
        logged_ladder, comparisons["default"].sizes, len(set(options["required"]) | {bounds.top}))
    pareto = pareto_curve(dist, max_graphs, **options)
    tuned = evaluate_ladder(pareto[-1].sizes, dist, objective=r.objective, memory_model=memory_model,
                            step_curve=step_curve)
    weighed = (dist, r.objective, memory_model, step_curve, warnings)
    ladders = {"tuned": tuned} | {mode: compared_ladder(ladder.sizes, *weighed) for mode, ladder in comparisons.items()}
    if logged_ladder:  # the ladder the server runs now, beside vLLM's defaults
        ladders["server log"] = compared_ladder(sorted(logged_ladder), *weighed)
    if tuned.eager_pct > 0:
        warnings.append(f"{tuned.eager_pct:.2f}% of batches are above the top {bounds.top} and run eager")
    points = [(p, evaluate_ladder(p.sizes, dist, objective=r.objective, step_curve=step_curve)) for p in pareto]
    bend = knee(pareto, r.objective, dist.mean())
    doc = tune_document(dist, options, bounds, (max_graphs, max_graphs_from), ladders, points, bend, memory_model)
    if step_curve is not None:
        doc["curve"] = curve_summary(step_curve, curves, r.curve, dist, options["top"], ladders)
    if r.startup_coverage is not None:
        _plan_startup(doc, ladders, dist, r.startup_coverage)
    return TuneResult(doc, tuned, pareto, ladders, bend, bounds.multiple_of, step_curve, warnings)


def _plan_startup(doc: dict[str, Any], ladders: dict[str, TunedLadder], dist, coverage: float) -> None:
    """Each ladder's start-up recordings for capture on demand (ladders/startup_plan.py), and the tuned one's flag."""
    plans = {name: startup_plan(ladder.sizes, dist, coverage) for name, ladder in ladders.items()}
    doc["startup"] = {"coverage": coverage, "plans": {name: plan.to_dict() for name, plan in plans.items()}}
    doc["apply"]["graphbench"] += " " + plans["tuned"].flag()


def phase_bounds(bounds: TuneBounds, dist, phase: str, top: int | None) -> tuple[TuneBounds, dict]:
    """The bounds of one phase's ladder, and the ladders it is compared with besides vLLM's: decode steps
    hold at most max_num_seqs x (1 + k) tokens; mixed steps any token count (multiples of 1), the top being
    the largest measured (or --top), compared with SGLang's token ladder to that top."""
    from dataclasses import replace

    from graphbench.ladders.phases import token_ladder
    from graphbench.ladders.sizes import Ladder

    if phase == "decode":
        cap = bounds.max_num_seqs * bounds.multiple_of
        return replace(bounds, top=min(top or bounds.top, cap)), {}
    mixed_top = top or dist.max_size
    tokens = token_ladder(mixed_top)
    return (replace(bounds, top=mixed_top, multiple_of=1, top_from="--top" if top else "mixed steps"),
            {"tokens": Ladder(tokens, max(tokens, default=0))} if tokens else {})


def _request_traces(paths: list[Path], limits: tuple, multiple_of: int | None, warnings: list[str], phase: str = "all"):
    """The files as request traces replayed through the scheduler into one distribution (None: not traces)."""
    seqs, tokens, block, blocks = limits
    seqs = seqs or DEFAULT_MAX_NUM_SEQS
    replayed = replay_files(paths, ReplayLimits(seqs, tokens or max(DEFAULT_TOKEN_BUDGET, seqs), block, blocks), phase)
    if replayed is None:
        return None
    if multiple_of is not None and multiple_of > 1:
        warnings.append("the trace replay models no speculative decoding: one token per decode step")
    warnings += replayed[1]
    return replayed[0]


def _measured(from_results, workloads, path, model, warnings) -> list[dict[str, Any]]:
    """The --from results (none for --distribution or --model), after checking one source is given."""
    given = [name for name, v in (("--from", from_results), ("--distribution", path), ("--model", model)) if v]
    if len(given) != 1:
        raise GraphbenchError(
            "give exactly one of --from, --distribution or --model" + (f" (got {', '.join(given)})" if given else "")
        )
    if workloads and not from_results:
        raise GraphbenchError("--workload filters the workloads of --from results; give --from")
    if not from_results:
        return []
    results, skipped = load_run_results(from_results)
    warnings += skipped
    return results


def _ints(option: str, text: str) -> list[int]:
    parts = [part.strip() for part in text.split(",")]
    if all(INTEGER.fullmatch(part) and len(part.lstrip("+-")) <= 18 for part in parts):  # (ascii_numbers.py)
        return [int(part) for part in parts]
    raise GraphbenchError(f"{option} must be comma-separated integers like 1,2,4, got {text!r}")


def _candidates(text: str | None, comparisons) -> list[int] | None:
    if text is None:
        return None
    if text.strip() in comparisons:
        return list(comparisons[text.strip()].sizes)
    return _ints("--candidates", text)
