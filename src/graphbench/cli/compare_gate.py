"""`graphbench compare A B` and `graphbench gate --baseline B --current C`: no torch import.

compare: every matched (point, workload, metric) with both medians, ratio, change, noise floor, p-value
and verdict (reports/verdict.py: a difference only when significant AND beyond the noise). gate: the CI
regression gate (graphbench.reports.gate) on the same verdicts; exit code 0 pass, 1 regression,
2 unusable input (GraphbenchError, turned into `error: ...` by the CLI group), 3 cannot judge.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Annotated

import typer

from graphbench.cli.paths import check_output_file, write_output_text
from graphbench.errors import GraphbenchError
from graphbench.reports.compare import (
    DEFAULT_ALPHA,
    Comparison,
    compare_sets,
    format_change,
    format_p,
    format_value,
    load_side,
)
from graphbench.reports.compare_match import other_gpu_types
from graphbench.reports.gate import (
    DEFAULT_THRESHOLDS,
    GateReport,
    error_junit,
    error_markdown,
    run_gate,
    thresholds_from_specs,
)
from graphbench.reports.gate_thresholds import DEFAULT_MIN_EFFECT_PCT
from graphbench.reports.metric_catalogue import METRICS

FORMATS = ("table", "json", "csv")
ALPHA_HELP = "Significance level of the test over processes (Mann-Whitney U from 4 a side, Welch's t below)."
CSV_FIELDS = ("label", "system", "gpu", "workload", "metric", "unit", "baseline_median", "current_median", "ratio",
              "change_pct", "noise_pct", "p_value", "test", "significant", "verdict", "n_baseline", "n_current",
              "ratio_ci_low",
              "ratio_ci_high", "note")


def _console():
    from rich.console import Console

    # tables take their natural width (no wrapping or truncation), also when stdout is not a terminal
    return Console(highlight=False, soft_wrap=False, width=1000)


def _noise(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}%"


def _ratio(c: Comparison) -> str:
    return "—" if c.ratio is None else f"{c.ratio:.3f}"


def _csv_row(c: Comparison) -> dict[str, object]:
    d = c.to_dict()
    low, high = c.ratio_ci if c.ratio_ci else (None, None)
    row = {k: d.get(k) for k in CSV_FIELDS}
    row.update(ratio_ci_low=low, ratio_ci_high=high, workload=c.workload or "")
    return row


def compare_command(
    baseline: Annotated[Path, typer.Argument(help="Baseline result file or folder (A).")],
    current: Annotated[Path, typer.Argument(help="Current result file or folder (B), compared against A.")],
    output_format: Annotated[str, typer.Option("--format", help="table|json|csv.")] = "table",
    metric: Annotated[
        list[str] | None, typer.Option("--metric", "-m", help="Only this metric (repeatable; default all).")
    ] = None,
    alpha: Annotated[float, typer.Option("--alpha", help=ALPHA_HELP)] = DEFAULT_ALPHA,
    allow_mismatch: Annotated[
        bool, typer.Option("--allow-mismatch", help="Compare points even if their model, config hash or workload settings differ.")
    ] = False,
    bootstrap: Annotated[
        int, typer.Option("--bootstrap", help="Bootstrap resamples for a CI of the ratio of medians (0: off).")
    ] = 0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap.")] = 0,
) -> None:
    """Compare result sets A and B: per metric, both medians, change, noise floor, p over processes, verdict."""
    if output_format not in FORMATS:
        raise GraphbenchError(f"unknown format {output_format!r}; choose from {', '.join(FORMATS)}")
    base, bwarn = load_side(baseline, "baseline")
    cur, cwarn = load_side(current, "current")
    result = compare_sets(base, cur, metrics=metric or None, alpha=alpha, allow_mismatch=allow_mismatch,
                          bootstrap=bootstrap, seed=seed)
    warnings = bwarn + cwarn + result.warnings
    if not result.matching.pairs:
        failed = result.matching.failed
        raise GraphbenchError(f"no benchmark point (label, system) is in both {baseline} and {current}"
                              + (f" that ran: failed benchmark point: {failed[0]}" if failed else "")
                              + other_gpu_types(result.matching))
    for w in warnings:
        typer.echo(f"warning: {w}", err=True)
    comparisons = result.comparisons
    if output_format == "json":
        typer.echo(json.dumps({"alpha": alpha, "baseline": str(baseline), "current": str(current),
                               "comparisons": [c.to_dict() for c in comparisons], "warnings": warnings,
                               "counts": result.counts(), "thresholds": result.thresholds(alpha)}, indent=1))
        return
    if output_format == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
        writer.writeheader()
        for c in comparisons:
            writer.writerow(_csv_row(c))
        typer.echo(buf.getvalue(), nl=False)
        return
    _print_comparisons(comparisons, bootstrap)
    if comparisons:
        typer.echo(counts_line(result.counts(), result.thresholds(alpha)))


def counts_line(counts: dict[str, int], thresholds: dict) -> str:
    """compare's closing line: the verdicts counted, and what a difference had to beat (the metrics at the
    default minimum effect named as 'the others' when other metrics have their own)."""
    by_pct: dict[float, list[str]] = {}
    for name, pct in thresholds["min_effect_pct"].items():
        by_pct.setdefault(pct, []).append(name)
    effects = "; ".join(f"{pct:g}% " + ("the others" if pct == DEFAULT_MIN_EFFECT_PCT and len(by_pct) > 1 and len(names) > 3
                                        else ", ".join(names)) for pct, names in sorted(by_pct.items()))
    ties = counts["tie"]
    return (f"{counts['regressed']} regressed, {counts['improved']} improved, {ties} tie{'s' * (ties != 1)}, "
            f"{counts['n/a']} n/a (not testable) of {sum(counts.values())} comparisons; a difference is called "
            f"when p < {thresholds['alpha']:g}, beyond {thresholds['noise_ranges']:g}x the larger range between "
            f"processes and beyond the metric's minimum effect ({effects})")


def _print_comparisons(comparisons: list[Comparison], bootstrap: int) -> None:
    """One table per metric: both medians, change, noise floor, p, processes and the verdict with its reason."""
    if not comparisons:
        typer.echo("no metric in common between the matched points")
        return

    from rich.table import Table
    from rich.text import Text

    console = _console()
    by_metric: dict[str, list[Comparison]] = {}
    for c in comparisons:
        by_metric.setdefault(c.metric, []).append(c)
    for name, rows in by_metric.items():
        m = METRICS[name]
        table = Table(title=f"{name} ({m.unit}, {m.direction})", title_justify="left")
        for col, justify in (("point", "left"), ("workload", "left"), ("baseline", "right"), ("current", "right"),
                             ("ratio", "right"), ("change", "right"), ("noise", "right"), ("p", "right"),
                             ("processes", "right"), ("verdict", "left")):
            table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
        if bootstrap:
            table.add_column(f"ratio CI 95% ({bootstrap} resamples)", justify="right", no_wrap=True)
        for c in rows:
            cells = [Text(c.point), Text(c.workload or "—"), format_value(c.baseline_median, c.unit),
                     format_value(c.current_median, c.unit), _ratio(c), format_change(c.change_pct),
                     _noise(c.noise_pct), format_p(c.p_value), f"{c.n_baseline}/{c.n_current}",
                     c.verdict + (f" ({c.note})" if c.note else "")]
            if bootstrap:
                cells.append(f"{c.ratio_ci[0]:.3f}–{c.ratio_ci[1]:.3f}" if c.ratio_ci else "—")
            table.add_row(*cells)
        console.print(table)


def _print_report(report: GateReport) -> None:
    from rich.table import Table
    from rich.text import Text

    console = _console()
    console.print(Text(f"gate: {report.headline()}", style="bold green" if report.passed else "bold red"))
    table = Table(title_justify="left")
    for col, justify in (("status", "left"), ("point", "left"), ("workload", "left"), ("metric", "left"),
                         ("baseline", "right"), ("current", "right"), ("change", "right"), ("noise", "right"),
                         ("p", "right"), ("processes", "right"), ("threshold", "right"), ("why", "left")):
        table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    styles = {"regressed": "bold red", "inconclusive": "bold yellow", "improved": "green", "pass": "",
              "untestable": "yellow"}
    for r in report.checks:
        c = r.comparison
        table.add_row(Text(r.status.upper() if r.status == "regressed" else r.status, style=styles[r.status]),
                      Text(c.point), Text(c.workload or "—"), c.metric, format_value(c.baseline_median, c.unit),
                      format_value(c.current_median, c.unit), format_change(c.change_pct), _noise(c.noise_pct),
                      format_p(c.p_value), f"{c.n_baseline}/{c.n_current}", f"{r.threshold_pct:+g}%", r.reason)
    console.print(table)
    for r in report.regressions:
        typer.echo(f"REGRESSED {r.comparison.where} {r.metric}: {r.reason}")
    for w in report.warnings:
        typer.echo(f"warning: {w}", err=True)


def _check_outputs(outputs: dict[str, Path | None], inputs: list[Path]) -> None:
    """Each report file writable, none of them one of the gate's own input files (it would be overwritten
    with the report), and no two naming the same file (before anything is compared)."""
    from graphbench.reports.store import iter_result_files

    read = set()
    for path in inputs:
        try:
            read |= {f.resolve() for f in iter_result_files([path])}
        except (GraphbenchError, OSError, RuntimeError):
            pass  # (a missing input is the gate's own error, said when it loads)
    named: dict[Path, str] = {}
    for option, path in outputs.items():
        if path is not None:
            check_output_file(path, option)
            if path.is_file() or not path.exists():  # a device or FIFO (/dev/stdout) may take both
                try:
                    real = path.resolve()
                except (OSError, RuntimeError) as exc:  # RuntimeError: a symbolic link loop (Python < 3.13)
                    why = getattr(exc, "strerror", None) or "a symbolic link loop"
                    raise GraphbenchError(f"cannot write {option} {path}: {why}") from None
                if real in read:
                    raise GraphbenchError(f"{option} {path} is one of the gate's input files: writing the report "
                                          "there would destroy it; name another file")
                if (same := named.setdefault(real, option)) != option:
                    raise GraphbenchError(f"{same} and {option} name the same file {path}: "
                                          "one report would overwrite the other")


def gate_command(
    baseline: Annotated[
        list[Path], typer.Option("--baseline", "-b", help="Baseline result file or folder (repeatable).")
    ],
    current: Annotated[
        list[Path], typer.Option("--current", "-c", help="Current result file or folder (repeatable).")
    ],
    threshold: Annotated[
        list[str] | None,
        typer.Option(
            "--threshold", "-t",
            help="METRIC:PCT, signed in the bad direction (output_tokens_per_s:-5, tpot_p99_ms:10), or METRIC:off; "
            "repeatable; overrides the defaults "
            + ", ".join(f"{k}:{v:+g}" for k, v in DEFAULT_THRESHOLDS.items()) + ".",
        ),
    ] = None,
    alpha: Annotated[float, typer.Option("--alpha", help=ALPHA_HELP)] = DEFAULT_ALPHA,
    allow_mismatch: Annotated[
        bool, typer.Option("--allow-mismatch", help="Gate points even if their model, config hash or workload settings differ.")
    ] = False,
    allow_missing: Annotated[
        bool, typer.Option("--allow-missing", help="Pass over baseline points missing from the current results "
                           "(by default they make the input unusable: exit 2).")
    ] = False,
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Write the report as Markdown (e.g. $GITHUB_STEP_SUMMARY).")
    ] = None,
    junit: Annotated[Path | None, typer.Option("--junit", help="Write a JUnit XML report.")] = None,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the report as JSON.")] = None,
) -> None:
    """CI regression gate: exit 0 pass, 1 regression, 2 unusable input, 3 cannot judge.

    The samples are processes (a sweep's rounds; every run in a history --baseline folder). A metric
    regresses only when its change is significant over the processes, larger than the noise floor (the
    larger between-process spread of the two sides) AND beyond its threshold in the bad direction. A
    change beyond the threshold that the data cannot judge (measured on a busy host, or fewer than 3
    processes a side, unless one side is a single run against 3 or more) exits 3.
    """
    _check_outputs({"--markdown": markdown, "--junit": junit, "--json": json_path}, [*baseline, *current])
    try:
        limits = thresholds_from_specs(threshold or [])
        report = run_gate(baseline, current, limits, alpha=alpha, allow_mismatch=allow_mismatch,
                          allow_missing=allow_missing)
    except GraphbenchError as exc:
        if markdown is not None:
            write_output_text(markdown, error_markdown(str(exc)), "--markdown")
        if junit is not None:
            write_output_text(junit, error_junit(str(exc)), "--junit")
        raise
    if markdown is not None:
        write_output_text(markdown, report.to_markdown(), "--markdown")
    if junit is not None:
        write_output_text(junit, report.to_junit(), "--junit")
    if json_path is not None:
        write_output_text(json_path, json.dumps(report.to_dict(), indent=1), "--json")
    _print_report(report)
    raise typer.Exit(report.exit_code)
