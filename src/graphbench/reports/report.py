"""`graphbench report`: result files -> report.md, self-contained report.html, summary.csv and PNG charts.

    report = write_report(["results/"], "graphbench-report")
    report.files     # every file written
    report.warnings  # skipped malformed result files, one line each

No torch import; matplotlib only while drawing (Agg canvas). Bad input raises GraphbenchError; the
library never prints (pass progress= to hear about each chart).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from graphbench.errors import GraphbenchError
from graphbench.files import write_atomic
from graphbench.reports.aliases import alias_groups, alias_notes, named_aliases, with_aliases
from graphbench.reports.banner import cpu_banner
from graphbench.reports.capture_plan_table import capture_plan_table
from graphbench.reports.charts import render_charts
from graphbench.reports.figures import ChartOutcome, ReportData, palette
from graphbench.reports.frame import (
    SUMMARY_COLUMNS,
    environment_line,
    failures_frame,
    ok_results,
    points_frame,
    results_frame,
)
from graphbench.reports.headline import covered_models, headline_table
from graphbench.reports.ladder_pairs import ladder_pairs
from graphbench.reports.ladder_table import ladder_table
from graphbench.reports.lora_table import lora_table
from graphbench.reports.padding_table import padding_table
from graphbench.reports.point_names import point_namer, result_model
from graphbench.reports.render import ReportContext, render_html, render_markdown
from graphbench.reports.repeats_table import repeats_table, steadiness_note
from graphbench.reports.rounds import result_gpu, round_info
from graphbench.reports.rounds_table import rounds_table
from graphbench.reports.safe_text import csv_text
from graphbench.reports.speculative_table import speculative_table
from graphbench.reports.store import LoadedResults, load_results
from graphbench.reports.variants_table import variants_table

REPORT_MD, REPORT_HTML, SUMMARY_CSV = "report.md", "report.html", "summary.csv"
Progress = Callable[[int, int, ChartOutcome], None]


@dataclass
class Report:
    out_dir: Path
    files: list[Path]
    charts: list[ChartOutcome]
    warnings: list[str]
    headline: pd.DataFrame
    summary: pd.DataFrame
    failures: pd.DataFrame = field(default_factory=pd.DataFrame)
    padding: pd.DataFrame = field(default_factory=pd.DataFrame)


def load(inputs: Iterable[str | Path] | LoadedResults) -> LoadedResults:
    """Load result files and folders (or pass LoadedResults through); fail when nothing readable is left."""
    where = ""
    if isinstance(inputs, LoadedResults):
        loaded = inputs
    else:
        paths = list(inputs)
        if not paths:
            raise GraphbenchError("give at least one result file or folder")
        loaded = load_results(paths)
        where = " in " + ", ".join(str(p) for p in paths)
    if not loaded.results:
        detail = ""
        if loaded.skipped:  # the first reason: the command ends at this one line
            first, why = loaded.skipped[0]
            detail = f" ({len(loaded.skipped)} malformed files skipped; the first, {first}: {why})"
        raise GraphbenchError(f"no graphbench result files found{where}{detail}")
    return loaded


def skipped_warnings(loaded: LoadedResults) -> list[str]:
    """The files skipped as malformed, and points measured more than once for one model on one GPU type (their
    runs get pooled; each model's and GPU type's are a series of their own: reports/frame.results_frame)."""
    warnings = [f"skipped {file}: {why}" for file, why in loaded.skipped]
    runs: dict[tuple, list[str]] = {}
    ok = [result for result in loaded.results if result.get("status", "ok") == "ok"]
    name = point_namer(ok)
    for result in ok:
        key = (name(result), str(result.get("system")), result_model(result), result_gpu(result))
        runs.setdefault(key, []).append(str(result.get("created_utc", "?")))
    for (label, system, _model, _gpu), times in runs.items():
        if len(times) > 1:
            warnings.append(f"point {label} ({system}) has {len(times)} results ({', '.join(sorted(times))}): "
                            "their runs are pooled; give one run per point (a fresh --results folder, or --resume)")
    return warnings + split_rounds_warnings(ok)


def split_rounds_warnings(results: list[Mapping[str, Any]]) -> list[str]:
    """Sweep points whose processes (rounds) ran on several GPU types (a mixed Ray cluster): each GPU type's are
    a point of their own (reports/rounds.py), with fewer processes than the sweep measured: say so."""
    split: dict[tuple[str, ...], dict[str, list[int]]] = {}
    for result in results:
        info = round_info(result)
        if info is not None:
            key = (str(info.get("id")), str(result.get("label")), str(result.get("system")), result_model(result))
            split.setdefault(key, {})[result_gpu(result) or "the CPU"] = [e["index"] for e in result.get("rounds") or [info]]
    return [f"point {label} ({system}): its processes ran on {len(gpus)} GPU types ("
            + "; ".join(f"{gpu}: round{'s' * (len(rounds) > 1)} {', '.join(map(str, sorted(rounds)))}"
                        for gpu, rounds in sorted(gpus.items()))
            + "): each GPU type's are a point of their own, with fewer processes"
            for (_id, label, system, _model), gpus in split.items() if len(gpus) > 1]


INTEGER_COLUMNS = ("optimization_level", "num_capture_sizes", "concurrency", "graph_memory_bytes", "busy_host_repeats")


def summary_frame(frame: pd.DataFrame,
                  aliases: Mapping[tuple[str, str], Mapping[str, list[str]]] | None = None) -> pd.DataFrame:
    """The rows of summary.csv (SUMMARY_COLUMNS, with the GPU type after the model: two machines' rows of one
    label are told apart) from results_frame: counts written as integers; a label a result stands for repeats
    its rows under that label, same_engine_as naming the measured one."""
    columns = [*SUMMARY_COLUMNS[:SUMMARY_COLUMNS.index("model") + 1], "gpu",
               *SUMMARY_COLUMNS[SUMMARY_COLUMNS.index("model") + 1:]]
    table = frame[columns].drop(columns="same_engine_as")
    # (aliases: alias_groups, each model's on each GPU type: one machine's alias is not the other's)
    parts = [with_aliases(rows, "label", (aliases or {}).get(key, {}), marked=False, measured_column="same_engine_as")
             for key, rows in table.groupby(["model", "gpu"], sort=False)]
    summary = pd.concat(parts, ignore_index=True) if parts else table.assign(same_engine_as="")
    for column in INTEGER_COLUMNS:
        values = pd.to_numeric(summary[column], errors="coerce")
        if (values.dropna() % 1 == 0).all():
            summary[column] = values.astype("Int64")
    return summary


def report_data(results: list[Mapping[str, Any]]) -> ReportData:
    ok = ok_results(results)
    frame, points = results_frame(ok), points_frame(ok)
    data = ReportData(ok, frame, points, environment_line(ok))
    data.colors = palette([*frame["series"], *points["label"]])
    return data


def _out_dir(out_dir: str | Path) -> Path:
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise GraphbenchError(f"output path exists and is not a folder: {out}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GraphbenchError(f"cannot create output folder {out}: {exc}") from None
    return out


def _write(path: Path, text: str) -> Path:
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise GraphbenchError(f"cannot write {path}: {exc}") from None
    return path


def write_report(
    inputs: Iterable[str | Path] | LoadedResults,
    out_dir: str | Path,
    *,
    title: str | None = None,
    progress: Progress | None = None,
) -> Report:
    """Write report.md, report.html, summary.csv and the charts into out_dir; return what was written.
    title: default "graphbench report: MODEL" (the models of the results); the headline names them too."""
    loaded = load(inputs)
    models = covered_models(loaded.results)
    title = title or f"graphbench report{': ' if models else ''}{', '.join(models)}"
    out = _out_dir(out_dir)
    data = report_data(loaded.results)
    failures = failures_frame(loaded.results)
    charts = render_charts(data, out, progress)
    aliases = alias_groups(data.results)
    summary = summary_frame(data.frame, aliases)
    try:
        write_atomic(out / SUMMARY_CSV, summary.map(csv_text).to_csv(index=False))  # no formulas for a spreadsheet
    except OSError as exc:
        raise GraphbenchError(f"cannot write {out / SUMMARY_CSV}: {exc}") from None
    headline = headline_table(data.frame, data.points, aliases)
    n_ok = len(data.results)
    counts = f"{n_ok} points ok, {len(failures)} failed"
    if aliases:
        counts += (f" (+{sum(len(a) for group in aliases.values() for a in group.values())} labels that ran the "
                   "same engine as one of them)")
    if loaded.skipped:
        counts += f"; {len(loaded.skipped)} malformed files skipped"
    repeats, padding = repeats_table(data.results), padding_table(data.results)
    context = ReportContext(
        title=title,
        environment=data.environment,
        counts=counts,
        headline=headline,
        charts=charts,
        failures=failures,
        skipped=[(str(file), why) for file, why in loaded.skipped],
        summary=summary,
        summary_file=SUMMARY_CSV,
        ladders=ladder_table(data.points, data.frame, data.results),
        repeats=with_aliases(repeats, "point", named_aliases(data.results), collapse="workload"),
        steadiness=steadiness_note(repeats),  # (each measurement once)
        variants=variants_table(data.results),
        capture_plan=capture_plan_table(data.results),
        speculative=speculative_table(data.results),
        lora=lora_table(data.results),
        padding=padding,
        pairs=ladder_pairs(data.results),
        rounds=rounds_table(data.results),
        banner=cpu_banner(data.results),
        same_engine=alias_notes(data.results),
        models=models,
    )
    files = [_write(out / REPORT_MD, render_markdown(context)), _write(out / REPORT_HTML, render_html(context))]
    files += [out / SUMMARY_CSV] + [c.path for c in charts if c.path is not None]
    return Report(out, files, charts, skipped_warnings(loaded), headline, summary, failures, padding)
