"""`graphbench tune`: the capture ladder of at most N sizes with the least expected padding.

The distribution comes from measured runs (--from), a file (--distribution) or a model (--model).
Prints the tuned ladder next to the default and interactivity ladders on the same distribution,
the Pareto curve (best ladder per number of graphs) with its knee, and the flags that apply the
ladder; the work is tuning/tune_run.run_tune. No torch import; matplotlib only for --plot.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from graphbench.cli.paths import unique_inputs
from graphbench.cli.tune_render import print_tune_table
from graphbench.ladders.distributions import FILE_FORMATS
from graphbench.ladders.emit import one_phase_config, phase_server_config
from graphbench.ladders.plot import plot_pareto
from graphbench.ladders.startup_plan import startup_flag
from graphbench.ladders.tune_sources import MODEL_FORMS
from graphbench.tuning.tune_run import TuneRequest, run_phase_tunes, run_tune


STARTUP_HELP = ("Capture on demand: per ladder, the fewest rungs that replay this share of the steps (e.g. 0.99), "
                "to record at start-up; the others on first use.")


def _o(flag: str, help: str):  # noqa: A002 - typer's name
    return typer.Option(flag, help=help)


def tune_command(
    from_results: Annotated[Optional[list[Path]], _o("--from", "Result files or folders of measured runs "
                                                   "(repeatable); their batch-size histograms are summed. Also vLLM server logs "
                                                   "with --cudagraph-metrics tables, and per-request benchmark "
                                                   "outputs (vLLM bench serve --save-detailed JSON, lists of "
                                                   "input_len/output_len), replayed through graphbench's "
                                                   "scheduler.")] = None,
    workload: Annotated[Optional[list[str]], _o("--workload", "With --from: only these workloads (repeatable).")] = None,
    distribution: Annotated[Optional[Path], _o("--distribution", "Batch-size file, or a request trace as for "
                                               "--from. " + FILE_FORMATS + ".")] = None,
    model: Annotated[Optional[str], _o("--model", f"Parametric distribution: {MODEL_FORMS} (closed: weight W, "
                                       "default 0.9, on C, the rest uniform over 1..C-1; closed:1 is all on 1).")] = None,
    max_graphs: Annotated[Optional[int], _o("--max-graphs", "Most sizes in the tuned ladder (default: as many as "
                                            "the ladder the server runs now: the capture sizes a vLLM log's "
                                            "--cudagraph-metrics records name, else the default ladder's, the "
                                            "table's 'default' row; at least the top and --require).")] = None,
    objective: Annotated[str, _o("--objective", "tokens: expected padding tokens per step; "
                                 "waste: expected padding fraction; time: expected ms per step under a "
                                 "measured step-time curve (--curve).")] = "tokens",
    curve: Annotated[Optional[list[Path]], _o("--curve", "Step-time curve from `graphbench curve`: every ladder "
                                              "gets its expected ms per step (needed by --objective time); "
                                              "repeated, each a process's curve of one measurement: their "
                                              "medians, and each ladder judged against the tuned one.")] = None,
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
    phase: Annotated[str, _o("--phase", "all steps, decode / mixed steps only (that phase's ladder), or both (--from).")] = "all",
    startup_coverage: Annotated[Optional[float], _o("--startup-coverage", STARTUP_HELP)] = None,
) -> None:
    """Tune the CUDA-graph capture ladder to a batch-size distribution (exact dynamic programming)."""
    if phase == "both":
        return _both(run_phase_tunes(_request(locals())), emit, output_format)
    result = run_tune(_request(locals()))
    _warn(result.warnings)
    if emit is not None:
        return typer.echo(one_phase_config(result.tuned.sizes, phase, emit, result.multiple_of))
    _render(result.doc, output_format)
    if plot is not None:
        _plot(result, plot, objective, err=output_format != "table")


def _both(results: dict, emit: str | None, output_format: str) -> None:
    """--phase both: each phase's tuned ladder, or both in a server's spelling (ladders/emit.py)."""
    decode, mixed = results["decode"], results["mixed"]
    _warn(list(dict.fromkeys(decode.warnings + mixed.warnings)))
    if emit is not None:
        text, _ = phase_server_config(decode.tuned.sizes, mixed.tuned.sizes, emit, decode.multiple_of)
        return typer.echo(text)
    if output_format == "json":
        return typer.echo(json.dumps({phase: r.doc for phase, r in results.items()}))
    for phase, result in results.items():
        typer.echo(f"\n{phase} steps:")
        _render(result.doc, output_format)
    if "startup" in decode.doc:
        _print_joined_plan(decode, mixed)


def _print_joined_plan(decode, mixed) -> None:
    """Both phases' start-up plans as one option: it names token counts, so a size one phase chose that is a
    rung of the other ladder records that phase's key at start-up too (said, with the sizes)."""
    chosen = {phase: set(r.doc["startup"]["plans"]["tuned"]["sizes"]) for phase, r in (("decode", decode), ("mixed", mixed))}
    rungs = {"decode": set(decode.tuned.sizes), "mixed": set(mixed.tuned.sizes)}
    extra = sorted((chosen["decode"] & rungs["mixed"]) - chosen["mixed"] | (chosen["mixed"] & rungs["decode"]) - chosen["decode"])
    typer.echo("\napply both tuned ladders, each phase's start-up plan joined:\n  graphbench: --capture-sizes "
               + ",".join(map(str, decode.tuned.sizes)) + " --mixed-ladder " + ",".join(map(str, mixed.tuned.sizes))
               + " " + startup_flag(sorted(chosen["decode"] | chosen["mixed"])))
    if extra:
        typer.echo(f"  (sizes {', '.join(map(str, extra))} are rungs of both ladders: start-up records both phases' keys "
                   "there, more than either plan asked)")


def _render(doc: dict, output_format: str) -> None:
    if output_format == "json":
        typer.echo(json.dumps(doc))
    else:
        print_tune_table(doc)


def _warn(warnings: list[str]) -> None:
    for warning in warnings:
        typer.echo(f"warning: {warning}", err=True)


def _request(options: dict) -> TuneRequest:
    """The request, each input file or folder once (a warning for each repeated one)."""
    request = TuneRequest.from_options(options)
    for name, flag in (("from_results", "--from"), ("memory_from", "--memory-from")):
        if getattr(request, name):
            setattr(request, name, unique_inputs(getattr(request, name), flag, request.warnings))
    return request


def _plot(result, plot: Path, objective: str, err: bool) -> None:
    """The Pareto curve, and with a step-time curve the staircase of each ladder beside it."""
    written = plot_pareto(result.pareto, result.ladders, result.bend, objective, plot)
    typer.echo(f"wrote {written}", err=err)
    if result.step_curve is not None:
        from graphbench.ladders.plot_curve import plot_step_curve

        staircase = plot.with_name(plot.stem + "-step-time" + plot.suffix)
        sizes = {name: ladder.sizes for name, ladder in result.ladders.items()}
        typer.echo(f"wrote {plot_step_curve(result.step_curve, staircase, sizes)}", err=err)
