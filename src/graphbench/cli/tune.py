"""`graphbench tune`: the capture ladder of at most N sizes with the least expected padding.

The distribution comes from measured runs (--from), a file (--distribution) or a model (--model).
Prints the tuned ladder next to the default and interactivity ladders on the same distribution,
the Pareto curve (best ladder per number of graphs) with its knee, and the flags that apply the
ladder. No torch import; matplotlib only for --plot.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from graphbench.cli.paths import unique_inputs
from graphbench.errors import GraphbenchError
from graphbench.ladders.distributions import load_distribution
from graphbench.cli.tune_render import print_tune_table, tune_document
from graphbench.ladders.emit import SERVERS, server_config
from graphbench.ladders.plot import check_plot_path, plot_pareto
from graphbench.ladders.sizes import PERFORMANCE_MODES
from graphbench.ladders.tune import (
    OBJECTIVES,
    TunedLadder,
    evaluate_ladder,
    knee,
    pareto_curve,
)
from graphbench.ladders.tune_inputs import DEFAULT_MAX_NUM_SEQS, check_int, tune_bounds
from graphbench.ladders.tune_sources import (
    MODEL_FORMS,
    MemoryModel,
    distribution_from_results,
    fit_memory_model,
    load_run_results,
    model_distribution,
    server_logs,
)
from graphbench.config.parts import DEFAULT_TOKEN_BUDGET
from graphbench.runner.replay import ReplayLimits, replay_files

FORMATS = ("table", "json")
MIB = 2**20
MAX_BUDGET_MIB = 1 << 20  # 1 TiB of graph memory: past any GPU's memory


def _o(flag: str, help: str):  # noqa: A002 - typer's name
    return typer.Option(flag, help=help)


def tune_command(
    from_results: Annotated[Optional[list[Path]], _o("--from", "Result files or folders of measured runs "
                                                   "(repeatable); their batch-size histograms are summed. Also vLLM server logs "
                                                   "with --cudagraph-metrics tables, and per-request benchmark "
                                                   "outputs (vLLM bench serve --save-detailed JSON, lists of "
                                                   "input_len/output_len), replayed through graphbench's "
                                                   "scheduler.")] = None,
    workload: Annotated[Optional[list[str]], _o("--workload", "With --from: only these workloads "
                                                "(repeatable; default all).")] = None,
    distribution: Annotated[Optional[Path], _o("--distribution", "Batch-size file: JSONL trace (batch_size or "
                                               "num_tokens), CSV (batch_size[,count]), JSON {size: count} or one "
                                               "size per line; or a request trace, as for --from.")] = None,
    model: Annotated[Optional[str], _o("--model", f"Parametric distribution: {MODEL_FORMS} (closed: weight W, "
                                       "default 0.9, on C, the rest uniform over 1..C-1; closed:1 is all on 1).")] = None,
    max_graphs: Annotated[int, _o("--max-graphs", "Most sizes in the tuned ladder.")] = ...,  # type: ignore[assignment]
    objective: Annotated[str, _o("--objective", "tokens: expected padding tokens per step; "
                                 "waste: expected padding fraction; time: expected ms per step under a "
                                 "measured step-time curve (--curve).")] = "tokens",
    curve: Annotated[Optional[Path], _o("--curve", "Step-time curve from `graphbench curve`: every ladder "
                                        "gets its expected ms per step (needed by --objective time).")] = None,
    max_capture_s: Annotated[Optional[float], _o("--max-capture-s", "Capture-time budget in seconds under "
                                                 "the curve's capture-time model.")] = None,
    max_num_seqs: Annotated[Optional[int], _o("--max-num-seqs", "For the default/interactivity ladders and the "
                                              "default top (default: the --from results' engine, else 256).")] = None,
    top: Annotated[Optional[int], _o("--top", "Largest size, always kept (default: the max capture size of the "
                                     "--from results' engine, else the default ladder's top).")] = None,
    multiple_of: Annotated[Optional[int], _o("--multiple-of", "Sizes must be multiples of K (speculative decoding: "
                                             "K = 1 + num_speculative_tokens; default: the --from results' "
                                             "engine, else 1).")] = None,
    require: Annotated[Optional[str], _o("--require", "Sizes that must be in the ladder, e.g. 1,2,4.")] = None,
    candidates: Annotated[Optional[str], _o("--candidates", "Restrict the sizes to this comma list, or to "
                                            "the 'default' or 'interactivity' ladder's sizes.")] = None,
    max_num_batched_tokens: Annotated[Optional[int], _o("--max-num-batched-tokens", "Request-trace replay: "
                                                        "tokens per step (default 2048, at least "
                                                        "--max-num-seqs).")] = None,
    block_size: Annotated[int, _o("--block-size", "Request-trace replay: KV block size.")] = 16,
    num_kv_blocks: Annotated[Optional[int], _o("--num-kv-blocks", "Request-trace replay: KV blocks (default: "
                                               "enough that nothing is preempted).")] = None,
    memory_budget_mib: Annotated[Optional[float], _o("--memory-budget-mib", "Graph-memory budget in MiB under "
                                                     "the fitted memory model.")] = None,
    memory_from: Annotated[Optional[list[Path]], _o("--memory-from", "Results to fit graph memory "
                                                    "~ a + b*size per size (default: --from).")] = None,
    emit: Annotated[Optional[str], _o("--emit", "Print only the tuned ladder as a server's configuration: "
                                      "vllm, sglang or trtllm.")] = None,
    plot: Annotated[Optional[Path], _o("--plot", "Write the Pareto curve, default/interactivity ladders "
                                       "marked, to this .png.")] = None,
    output_format: Annotated[str, _o("--format", "table or json.")] = "table",
) -> None:
    """Tune the CUDA-graph capture ladder to a batch-size distribution (exact dynamic programming)."""
    if output_format not in FORMATS:
        raise GraphbenchError(f"unknown format {output_format!r}; choose from {', '.join(FORMATS)}")
    if objective not in OBJECTIVES:
        raise GraphbenchError(f"unknown objective {objective!r}; choose from {', '.join(OBJECTIVES)}")
    if emit is not None and emit not in SERVERS:
        raise GraphbenchError(f"unknown server {emit!r} for --emit; choose from {', '.join(SERVERS)}")
    if plot is not None:
        check_plot_path(plot)
    for flag, value in (("--max-num-batched-tokens", max_num_batched_tokens), ("--block-size", block_size),
                        ("--num-kv-blocks", num_kv_blocks)):
        if value is not None:  # never valid, whatever the source (a trace's replay or none)
            check_int(flag, value)
    step_curve = _step_curve(curve, objective, max_capture_s)
    warnings: list[str] = []
    from_results = unique_inputs(from_results, "--from", warnings) if from_results else from_results
    memory_from = unique_inputs(memory_from, "--memory-from", warnings) if memory_from else memory_from
    server_log = server_logs(from_results) if from_results else None
    replayed = None
    if server_log is None and (from_results or distribution):
        limits = (max_num_seqs, max_num_batched_tokens, block_size, num_kv_blocks)
        server_log = replayed = _request_traces(from_results or [distribution], limits, multiple_of, warnings)
    if replayed is None and (max_num_batched_tokens is not None or block_size != 16 or num_kv_blocks is not None):
        warnings.append("--max-num-batched-tokens, --block-size and --num-kv-blocks shape a request trace's "
                        "replay only; this source is not one, so they are not used")
    if server_log is not None:
        if sum(map(bool, (from_results, distribution, model))) != 1:
            raise GraphbenchError("give exactly one of --from, --distribution or --model")
        measured = []
    else:
        measured = _measured(from_results, workload, distribution, model, warnings)
    bounds = tune_bounds(measured, top=top, max_num_seqs=max_num_seqs, multiple_of=multiple_of)
    warnings += bounds.warnings
    if measured:
        dist = distribution_from_results(measured, workload or None)
    else:
        dist = server_log or (load_distribution(distribution) if distribution
                              else model_distribution(model, bounds.multiple_of))
    comparisons = {mode: bounds.comparison(mode) for mode in PERFORMANCE_MODES}
    memory_model = _memory_model(memory_from, None if server_log is not None else from_results, memory_budget_mib, warnings)
    options: dict[str, Any] = dict(
        objective=objective,
        top=bounds.top,
        multiple_of=bounds.multiple_of,
        required=_ints("--require", require) if require else (),
        candidates=_candidates(candidates, comparisons),
        memory_model=memory_model,
        memory_budget_bytes=None if memory_budget_mib is None else memory_budget_mib * MIB,
        step_curve=step_curve,
        capture_budget_s=max_capture_s,
    )
    pareto = pareto_curve(dist, max_graphs, **options)
    tuned = evaluate_ladder(pareto[-1].sizes, dist, objective=objective, memory_model=memory_model,
                            step_curve=step_curve)
    ladders = {"tuned": tuned} | {
        mode: _compared(ladder.sizes, dist, objective, memory_model, step_curve, warnings)
        for mode, ladder in comparisons.items()
    }
    if tuned.eager_pct > 0:
        warnings.append(f"{tuned.eager_pct:.2f}% of batches are above the top {bounds.top} and run eager")
    for warning in warnings:
        typer.echo(f"warning: {warning}", err=True)
    points = [(p, evaluate_ladder(p.sizes, dist, objective=objective, step_curve=step_curve)) for p in pareto]
    bend = knee(pareto)
    doc = tune_document(dist, options, bounds, max_graphs, ladders, points, bend, memory_model)
    if step_curve is not None:
        doc["curve"] = _curve_summary(step_curve, curve, dist, options["top"], ladders)
    if emit is not None:
        typer.echo(server_config(tuned.sizes, emit, bounds.multiple_of))
        return
    if output_format == "json":
        typer.echo(json.dumps(doc))
    else:
        print_tune_table(doc)
    if plot is not None:
        written = plot_pareto(pareto, ladders, bend, objective, plot)
        typer.echo(f"wrote {written}", err=output_format != "table")
        if step_curve is not None:
            from graphbench.ladders.plot_curve import plot_step_curve

            staircase = plot.with_name(plot.stem + "-step-time" + plot.suffix)
            written = plot_step_curve(step_curve, staircase, {name: ladder.sizes for name, ladder in ladders.items()})
            typer.echo(f"wrote {written}", err=output_format != "table")


def _compared(sizes, dist, objective, memory_model, step_curve, warnings) -> TunedLadder:
    """A comparison ladder; one the curve cannot time (its batches above its top need eager times the
    curve lacks) is shown without ms per step, with a warning, rather than stopping the tuning."""
    try:
        return evaluate_ladder(sizes, dist, objective=objective, memory_model=memory_model, step_curve=step_curve)
    except GraphbenchError as exc:
        if step_curve is None:
            raise
        warnings.append(f"the ladder topped at {max(sizes)} gets no ms per step: {exc}")
        return evaluate_ladder(sizes, dist, objective="tokens" if objective == "time" else objective,
                               memory_model=memory_model)


def _step_curve(path: Path | None, objective: str, max_capture_s: float | None):
    """The --curve file, checked against what asks for it."""
    from graphbench.ladders.step_curve import load_curve

    if path is None:
        if objective == "time":
            raise GraphbenchError("--objective time needs a measured step-time curve: give --curve FILE "
                                  "(make one on the GPU with `graphbench curve`)")
        if max_capture_s is not None:
            raise GraphbenchError("--max-capture-s needs a step-time curve with capture times: give --curve FILE")
        return None
    return load_curve(path)


def _curve_summary(step_curve, path: Path, dist, top: int, ladders) -> dict[str, Any]:
    """What the curve says: the expected ms per step of a ladder with every size up to the top, and
    how far each ladder is from it."""
    from graphbench.ladders.step_curve import expected_step_ms

    every = expected_step_ms(range(1, top + 1), dist, step_curve)
    return {
        "file": str(path), "model": step_curve.meta.get("model"),
        "gpu": (step_curve.meta.get("environment") or {}).get("gpu"), "date": step_curve.meta.get("date"),
        "every_size_ms": every,
        "vs_every_size_pct": {name: 100 * (ladder.expected_step_ms / every - 1) for name, ladder in ladders.items()
                              if ladder.expected_step_ms is not None},
    }


def _request_traces(paths: list[Path], limits: tuple, multiple_of: int | None, warnings: list[str]):
    """The files as request traces replayed through the scheduler into one distribution (None: not traces)."""
    seqs, tokens, block, blocks = limits
    seqs = seqs or DEFAULT_MAX_NUM_SEQS
    replayed = replay_files(paths, ReplayLimits(seqs, tokens or max(DEFAULT_TOKEN_BUDGET, seqs), block, blocks))
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


def _memory_model(memory_from, from_results, budget_mib, warnings) -> MemoryModel | None:
    """The fitted memory model: from --memory-from, else from --from (optional unless there is a budget)."""
    if budget_mib is not None and not 0 < budget_mib <= MAX_BUDGET_MIB:
        raise GraphbenchError(f"--memory-budget-mib must be positive and at most {MAX_BUDGET_MIB} (1 TiB, more "
                              f"than any GPU holds), got {budget_mib:g}")
    paths = memory_from or from_results
    if not paths:
        if budget_mib is not None:
            raise GraphbenchError("--memory-budget-mib needs measured results to fit graph memory: give --memory-from")
        return None
    results, skipped = load_run_results(paths)
    if memory_from:
        warnings += skipped
    try:
        return fit_memory_model(results)
    except GraphbenchError:
        if memory_from or budget_mib is not None:
            raise
        return None  # --from runs without graph memory: just no memory column


def _ints(option: str, text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise GraphbenchError(f"{option} must be comma-separated integers like 1,2,4, got {text!r}") from None


def _candidates(text: str | None, comparisons) -> list[int] | None:
    if text is None:
        return None
    if text.strip() in comparisons:
        return list(comparisons[text.strip()].sizes)
    return _ints("--candidates", text)
