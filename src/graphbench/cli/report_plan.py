"""`graphbench report` and `graphbench plan`: comparison reports and capacity plans from result files.

No torch import (pandas always, matplotlib only while drawing charts).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Optional

import typer

from graphbench.cli.output import console as make_console
from graphbench.cli.paths import check_output_folder
from graphbench.errors import GraphbenchError

PLAN_FORMATS = ("table", "json")


def _num(value: float, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    text = f"{value:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _progress(console):
    def report(i: int, n: int, outcome) -> None:
        status = f"wrote {outcome.path}" if outcome.written else outcome.note
        console.print(f"[{i}/{n}] {outcome.name}: {status}", markup=False)

    return report


def _warn(lines: list[str]) -> None:
    for line in lines:
        typer.echo(f"warning: {line}", err=True)


def report_command(
    results: Annotated[list[Path], typer.Argument(help="Result files or folders (searched recursively).")],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Folder for report.md, report.html, summary.csv and charts.")
    ] = Path("graphbench-report"),
    title: Annotated[Optional[str], typer.Option("--title", help="Report title (default: graphbench report: MODEL).")] = None,
) -> None:
    """Write a comparison report: headline table, charts, summary.csv, failures (md + self-contained html)."""
    from graphbench.reports.report import load, skipped_warnings, write_report

    check_output_folder(output)
    loaded = load(results)
    _warn(skipped_warnings(loaded))
    console = make_console()
    ok = sum(1 for r in loaded.results if r.get("status", "ok") == "ok")
    console.print(f"{len(loaded.results)} results ({ok} ok, {len(loaded.results) - ok} failed); drawing charts",
                  markup=False)  # fmt: skip
    report = write_report(loaded, output, title=title, progress=_progress(console))
    _print_headline(console, report.headline)
    written = sum(c.written for c in report.charts)
    console.print(f"wrote report.md, report.html, summary.csv and {written} charts to {report.out_dir}", markup=False)


def _print_headline(console, headline) -> None:
    from rich.table import Table

    from graphbench.reports.render import headline_cells, headline_headers

    if headline.empty:
        console.print("no workload with a concurrency: no headline table", markup=False)
        return
    models = ", ".join(sorted(set(headline["model"]))) if "model" in headline else ""
    table = Table(title=f"best configuration per concurrency (median output tokens/s){', ' if models else ''}{models}",
                  title_justify="left")
    for name in headline_headers(headline):
        text = name in ("model", "workload", "best configuration", "best peer")
        tied = name.startswith("tied with")  # the long one: it wraps, the others keep their width
        table.add_column(name, justify="left" if text or tied else "right", no_wrap=not tied,
                         ratio=1 if tied else None, min_width=None if tied else len(name))
    for row in headline_cells(headline):
        table.add_row(*row)
    console.print(table)


def plan_command(
    results: Annotated[list[Path], typer.Argument(help="Result files or folders (searched recursively).")],
    slo: Annotated[
        Optional[list[str]],
        typer.Option("--slo", help="Latency limit metric=value in ms, e.g. tpot_p99_ms=50; repeat for more."),
    ] = None,
    target_rps: Annotated[
        Optional[float], typer.Option("--target-rps", help="Target load in requests/s: GPUs needed for it.")
    ] = None,
    target_users: Annotated[
        Optional[float], typer.Option("--target-users", help="Target concurrent users: GPUs needed for them.")
    ] = None,
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", help="Also write plan.json, plan.csv and charts here.")
    ] = None,
    output_format: Annotated[str, typer.Option("--format", help="Output format: table or json.")] = "table",
) -> None:
    """Capacity plan: highest load within the SLOs per configuration, throughput per GPU, GPUs needed."""
    from graphbench.reports.charts_plan import plan_json, write_plan
    from graphbench.reports.plan import parse_slos, plan_capacity

    if output_format not in PLAN_FORMATS:
        raise GraphbenchError(f"unknown format {output_format!r}; choose from {', '.join(PLAN_FORMATS)}")
    if output is not None:
        check_output_folder(output)  # before the table: a bad -o must not come after all the work
    slos = parse_slos(slo or [])
    plan = plan_capacity(results, slos, target_rps=target_rps, target_users=target_users)
    _warn(plan.warnings)
    if output_format == "json":
        typer.echo(plan_json(plan))
    else:
        _print_plan(make_console(), plan)
    if output is not None:
        files, _charts = write_plan(plan, output, progress=_progress(make_console(stderr=output_format == "json")))
        typer.echo(f"wrote {', '.join(p.name for p in files)} to {output}", err=output_format == "json")


def _print_plan(console, plan) -> None:
    from rich.table import Table

    from graphbench.reports.plan import TARGET_KINDS

    target = "" if plan.target_kind is None else f"; target {plan.target:g} {TARGET_KINDS[plan.target_kind]}"
    table = Table(title=f"capacity within {', '.join(map(str, plan.slos))}{target}", title_justify="left")
    columns = ["configuration", "system", "tp", "max concurrency", "limited by", "output tok/s per GPU",
               "req/s per GPU", "tok/s per user"]  # fmt: skip
    if plan.target_kind is not None:
        columns.append("GPUs needed")
    columns.append("vs the first (processes)")
    for name in columns:
        table.add_column(name, justify="left" if name in ("configuration", "system", "limited by", "vs the first (processes)") else "right",
                         no_wrap=True)  # fmt: skip
    for c in plan.capacities:
        row = [c.series, c.system, str(c.tensor_parallel_size), ("≥" if c.at_least else "") + _num(c.max_concurrency),
               c.limiting_slo or "-", _num(c.output_tokens_per_s_per_gpu, 1), _num(c.requests_per_s_per_gpu),
               _num(c.tokens_per_s_per_user, 1)]  # fmt: skip
        if plan.target_kind is not None:
            gpus = "none meet the SLOs" if c.gpus_needed is None else f"{'≤' if c.at_least else ''}{c.gpus_needed}"
            row.append(gpus)
        row.append(c.vs_best)
        table.add_row(*row)
    console.print(table)
    apart = len({(c.model, c.gpu) for c in plan.capacities}) > 1  # (each model and GPU type judged apart)
    console.print("vs the first: output tok/s per GPU at each process's own capacity against the first row's"
                  + (" of the same model and GPU type" if apart else "") + ", by compare's rule; a tie is as good a "
                  "choice (its gap is within the noise between processes)", markup=False)  # fmt: skip
    if any(c.at_least for c in plan.capacities):
        console.print("≥: every SLO still met at the highest measured concurrency (capacity may be higher)",
                      markup=False)  # fmt: skip
