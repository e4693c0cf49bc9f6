"""`graphbench ladder`: the capture ladders, the padding they cause and the graphs they cost.

Always shows the default and the interactivity ladder side by side (plus a "custom" ladder for
--capture-sizes); --performance-mode only marks which one is selected, i.e. which one vLLM would
use (a custom list, when given, is always the selected one). No torch import.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from graphbench.ascii_numbers import ascii_int
from graphbench.cli.output import console as make_console
from graphbench.errors import GraphbenchError
from graphbench.ladders.ladder_comparison import DEFAULT_BATCHES, LadderComparison, LadderSummary, compare_ladders
from graphbench.ladders.distributions import FILE_FORMATS, MAX_BATCH_SIZE, load_distribution
from graphbench.ladders.emit import SERVERS, check_emit_alone
from graphbench.ladders.plot import check_plot_path

FORMATS = ("table", "json", "csv")


def _csv(values: tuple[int, ...]) -> str:
    return ",".join(map(str, values))


def _o(flag: str, help: str):  # noqa: A002 - typer's name
    return typer.Option(flag, help=help)


def ladder_command(
    max_num_seqs: Annotated[int, _o("--max-num-seqs", "Most requests per step; sets the top rung of the default "
                                    "and interactivity ladders (2x, capped at 512).")] = 256,
    performance_mode: Annotated[str, _o("--performance-mode", "default|interactivity: which ladder is marked "
                                        "selected. Both are always shown.")] = "default",
    num_speculative_tokens: Annotated[int, _o("--num-speculative-tokens", "Speculative tokens k: sizes become "
                                              "multiples of 1+k, top scales by 1+k.")] = 0,
    max_num_batched_tokens: Annotated[Optional[int], _o("--max-num-batched-tokens", "Token budget per step; no "
                                                        "rung may exceed it.")] = None,
    capture_sizes: Annotated[Optional[str], _o("--capture-sizes", "A custom ladder, e.g. 1,2,4,8: de-duplicated, "
                                               "sorted, sizes above --max-num-batched-tokens dropped (--max-num-seqs "
                                               "does not cap it: its largest size is its top); shown as 'custom' and "
                                               "selected.")] = None,
    max_capture_size: Annotated[Optional[int], _o("--max-capture-size", "Override the top rung of the default and "
                                                  "interactivity ladders.")] = None,
    blackwell: Annotated[bool, _o("--blackwell", "Data-centre Blackwell GPU: the default top cap is 1024, not "
                                  "512.")] = False,
    batches: Annotated[Optional[str], _o("--batches", "Batch sizes (tokens per step) to tabulate, comma-separated "
                                         f"(default: {_csv(DEFAULT_BATCHES)}).")] = None,
    distribution: Annotated[Optional[Path], _o("--distribution", "Batch-size distribution file: averages and the "
                                               "eager fraction use it instead of sizes 1..top equally likely. "
                                               + FILE_FORMATS + ".")] = None,
    output_format: Annotated[str, _o("--format", "Output format: table, json or csv.")] = "table",
    emit: Annotated[Optional[str], _o("--emit", "Print only the selected ladder as a server's configuration: "
                                      "vllm, sglang or trtllm.")] = None,
    plot: Annotated[Optional[Path], _o("--plot", "Also write waste % vs batch size, one curve per ladder, to this "
                                       ".png file.")] = None,
    mixed_ladder: Annotated[Optional[str], _o("--mixed-ladder", "Mixed/prefill steps' own ladder in tokens: tokens "
                                              "(SGLang's 4..4096), none or 4,8,16; --emit writes both.")] = None,
) -> None:
    """Show the CUDA-graph capture ladders, padding waste per batch size and graphs to capture per mode."""
    if output_format not in FORMATS:
        raise GraphbenchError(f"unknown format {output_format!r}; choose from {', '.join(FORMATS)}")
    if emit is not None and emit not in SERVERS:
        raise GraphbenchError(f"unknown server {emit!r} for --emit; choose from {', '.join(SERVERS)}")
    check_emit_alone(emit, output_format, plot)
    if capture_sizes is not None and performance_mode != "default":  # (the custom ladder is the one selected)
        raise GraphbenchError(f"--performance-mode {performance_mode} and --capture-sizes both choose the selected "
                              "ladder: give one of them (both modes' ladders are shown either way)")
    if plot is not None:
        check_plot_path(plot)  # fail before printing anything
    comparison = compare_ladders(
        max_num_seqs,
        performance_mode=performance_mode,
        num_speculative_tokens=num_speculative_tokens,
        max_num_batched_tokens=max_num_batched_tokens,
        max_capture_size=max_capture_size,
        blackwell=blackwell,
        user_sizes=None if capture_sizes is None else _parse_ints("--capture-sizes", capture_sizes),
        batches=DEFAULT_BATCHES if batches is None else _batch_sizes(batches),
        distribution=None if distribution is None else load_distribution(distribution),
    )
    for warning in comparison.warnings:
        typer.echo(f"warning: {warning}", err=True)
    phases = _phases(comparison, mixed_ladder, max_num_batched_tokens)
    if emit is not None:
        typer.echo(_emit(comparison, phases, emit))
        return
    _render(comparison, output_format, distribution is not None, phases)
    if plot is not None:
        from graphbench.ladders.plot import plot_waste  # matplotlib only when asked for

        typer.echo(f"wrote {plot_waste(comparison, plot)}", err=output_format != "table")


def _phases(comparison, mixed_ladder: str | None, max_num_batched_tokens: int | None):
    """The split layout for --mixed-ladder (None without it, or with 'shared')."""
    from graphbench.ladders.phases import parse_mixed_option, phase_ladders, resolve_mixed_ladder, token_ladder

    if mixed_ladder is None:
        return None
    # without a budget: the token ladder's own top (4096)
    mixed = resolve_mixed_ladder(parse_mixed_option(mixed_ladder), max_num_batched_tokens or token_ladder(1 << 20)[-1])
    for warning in mixed.warnings:
        typer.echo(f"warning: {warning}", err=True)
    if mixed.sizes is None:
        return None
    return phase_ladders(comparison.selected.ladder.sizes, mixed.sizes, comparison.max_num_seqs,
                         comparison.decode_query_len)


def _emit(comparison, phases, server: str) -> str:
    from graphbench.ladders.emit import phase_server_config, server_config

    if phases is None:
        return server_config(comparison.selected.ladder.sizes, server, comparison.decode_query_len, comparison.max_num_seqs)
    text, note = phase_server_config(phases.decode, phases.mixed, server, comparison.decode_query_len,
                                     comparison.max_num_seqs)
    if note:
        typer.echo(f"note: {note}", err=True)
    return text


def _render(comparison, output_format: str, with_distribution: bool, phases=None) -> None:
    if output_format == "json":
        typer.echo(json.dumps(dict(comparison.to_dict(), **({"phases": phases.to_dict()} if phases else {}))))
    elif output_format == "csv":
        _write_csv(comparison)
    else:
        _print_table(comparison, with_distribution=with_distribution)
        if phases is not None:
            _print_phases(phases)


def _print_phases(phases) -> None:
    from rich.table import Table

    console = make_console(soft_wrap=True)
    console.print(f"\ntwo ladders: decode {_sizes_preview(phases.decode)} (tokens of uniform decode steps)", markup=False)
    console.print(f"             mixed  {_sizes_preview(phases.mixed)} (tokens of mixed and prefill steps)", markup=False)
    table = Table(title="graphs to capture per cudagraph mode: two ladders against the one", title_justify="left")
    for column in ("cudagraph mode", "two ladders", "one ladder"):
        table.add_column(column, justify="left" if column == "cudagraph mode" else "right")
    for mode, n in phases.graphs_split.items():
        table.add_row(mode, str(n), str(phases.graphs_shared[mode]))
    console.print(table)


def _parse_ints(option: str, text: str) -> list[int]:
    """'1,2, 4' -> [1, 2, 4]; anything else is a one-line GraphbenchError."""
    values = []
    for part in (p.strip() for p in text.split(",")):
        try:
            values.append(ascii_int(part))
        except ValueError:
            raise GraphbenchError(
                f"{option} must be comma-separated integers like 1,2,4; {part!r} is not an integer"
            ) from None
    return values


def _batch_sizes(text: str) -> list[int]:
    """--batches: the sizes in increasing order, each once (a size given twice printed its row twice)."""
    values = _parse_ints("--batches", text)
    if too_large := [v for v in values if v > MAX_BATCH_SIZE]:
        raise GraphbenchError(f"--batches {too_large[0]} is more tokens than one step holds (at most {MAX_BATCH_SIZE})")
    if twice := sorted({v for v in values if values.count(v) > 1}):
        raise GraphbenchError(f"--batches gives {', '.join(map(str, twice))} twice; give each batch size once")
    return sorted(values)


def _write_csv(comparison: LadderComparison) -> None:
    writer = csv.DictWriter(sys.stdout, fieldnames=["ladder", "batch", "padded", "waste_pct"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(comparison.csv_rows())


def _sizes_preview(sizes: tuple[int, ...]) -> str:
    """'51 sizes: [1 2 4 8 16 24 32 40] ... [480 496 512]' as in the seed (all sizes when <= 11)."""
    words = " ".join
    if len(sizes) <= 11:
        body = f"[{words(map(str, sizes))}]"
    else:
        body = f"[{words(map(str, sizes[:8]))}] ... [{words(map(str, sizes[-3:]))}]"
    return f"{len(sizes)} sizes: {body}"


def _title(summary: LadderSummary) -> str:
    return f"{summary.name}*" if summary.selected else summary.name


def _print_table(comparison: LadderComparison, *, with_distribution: bool) -> None:
    from rich.table import Table

    console = make_console(soft_wrap=True)
    say = lambda text="": console.print(text, markup=False)  # noqa: E731 - sizes are in [brackets]
    say(
        f"max_num_seqs={comparison.max_num_seqs} -> max capture size {comparison.max_capture_size}"
        + (f" (decode_query_len {comparison.decode_query_len})" if comparison.decode_query_len > 1 else "")
    )
    labels = [f"{s.name} ladder{' (selected)' if s.selected else ''}:" for s in comparison.ladders]
    width = max(map(len, labels))
    for label, s in zip(labels, comparison.ladders):
        top = f", top {s.ladder.max_capture_size}" if s.ladder.max_capture_size != comparison.max_capture_size else ""
        say(f"{label:<{width}}  {_sizes_preview(s.sizes)}{top}")
    say()

    graphs = Table(title="graphs to capture per cudagraph mode", title_justify="left")
    graphs.add_column("cudagraph mode")
    for s in comparison.ladders:
        graphs.add_column(_title(s), justify="right")
    for mode in comparison.ladders[0].num_graphs:
        graphs.add_row(mode, *(str(s.num_graphs[mode]) for s in comparison.ladders))
    console.print(graphs)

    padding = Table(title="padding per batch size (* = selected ladder)", title_justify="left")
    padding.add_column("batch", justify="right")
    for s in comparison.ladders:
        padding.add_column(_title(s), justify="right")
        padding.add_column("waste", justify="right")
    for i, batch in enumerate(r.batch for r in comparison.ladders[0].rows):
        cells = [str(batch)]
        for s in comparison.ladders:
            row = s.rows[i]
            cells += ["eager", "-"] if row.padded is None else [str(row.padded), f"{100 * row.waste:.2f}%"]
        padding.add_row(*cells)
    console.print(padding)

    averages = Table(title=f"averages over {comparison.averaged_over} (eager = no padding)", title_justify="left")
    averages.add_column("")
    for s in comparison.ladders:
        averages.add_column(_title(s), justify="right")
    averages.add_row("average padding", *(f"{100 * s.average_waste:.2f}%" for s in comparison.ladders))
    if with_distribution or any(s.eager_fraction > 0 for s in comparison.ladders):
        averages.add_row("eager batches", *(f"{100 * s.eager_fraction:.2f}%" for s in comparison.ladders))
    averages.add_row("padded / real tokens", *(f"{s.padding_overhead:.4f}" for s in comparison.ladders))
    console.print(averages)
