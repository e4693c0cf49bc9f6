"""report.md and a self-contained report.html (inline CSS, charts as base64 PNG, no external assets)."""

from __future__ import annotations

import base64
import html
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from graphbench.reports.charts import ChartOutcome
from graphbench.reports.repeats_table import steadiness_note
from graphbench.reports.variants_table import VARIANTS_NOTE

MIB = 2**20
HEADLINE_HEADERS = [
    "concurrency", "best configuration", "output tok/s", "startup cold (s)", "startup warm (s)",
    "graph memory (MiB)", "best peer", "peer output tok/s", "speed-up vs peer",
]  # fmt: skip
FAILURE_HEADERS = ["label", "system", "model", "reason", "file"]
CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1300px;
       color: #222; line-height: 1.4; padding: 0 1em; }
h1 { border-bottom: 2px solid #4e79a7; padding-bottom: .2em; }
h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .8em 0; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .3em .6em; text-align: right; }
th { background: #eef2f7; } td.text, th.text { text-align: left; }
tr:nth-child(even) td { background: #fafafa; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: .85em; color: #555; }
.note { color: #8a5a00; font-style: italic; } .env { color: #555; font-size: .9em; }
pre { background: #f6f8fa; padding: .6em; overflow-x: auto; font-size: .8em; }
"""


@dataclass
class ReportContext:
    title: str
    environment: str
    counts: str  # "11 points ok, 1 failed; 2 files skipped"
    headline: pd.DataFrame
    charts: list[ChartOutcome]
    failures: pd.DataFrame
    skipped: list[tuple[str, str]]  # (file, why)
    summary: pd.DataFrame  # summary.csv columns
    summary_file: str = "summary.csv"
    ladders: pd.DataFrame = field(default_factory=pd.DataFrame)  # ladder_table.ladder_table
    repeats: pd.DataFrame = field(default_factory=pd.DataFrame)  # repeats_table.repeats_table
    variants: pd.DataFrame = field(default_factory=pd.DataFrame)  # variants_table.variants_table


LADDERS_NOTE = ("What each captured ladder costs and pads. Ratios compare it with the largest ladder of the same "
                "-O level and mode. The recordings share a pool sized by the largest recording: while the top "
                "size stays, the memory beyond the pool is what fewer rungs can save.")


REPEATS_NOTE = ("How steady the repeats were: how long a repeat ran (closed loops shorter than the target run a multiple "
                "of their requests), the spread of output tokens/s across repeats ((max - min) / median), "
                "and the repeats' total step time per runtime mode with its spread. The mode whose total moves "
                "with the tokens/s is where an unsteady repeat lost its time (NONE: steps that ran without a "
                "CUDA graph, e.g. prefill chunks above the ladder's top).")


def repeats_cells(repeats: pd.DataFrame) -> list[list[str]]:
    def cell(column: str, value: Any) -> str:
        if column in ("point", "workload", "repeats", "slowest step"):
            return str(value)
        return fmt(value, 0 if column == "output tok/s" else 2 if column == "repeat s" else 1)

    return [[cell(c, v) for c, v in row.items()] for _, row in repeats.iterrows()]


def ladder_cells(ladders: pd.DataFrame) -> list[list[str]]:
    def cell(column: str, value: Any) -> str:
        if column in ("ladder", "-O", "mode", "sizes"):
            return str(value)
        digits = 2 if column.startswith("capture s") or column == "padding waste %" else 0 if "vs" in column else 1
        return fmt(value, digits)

    return [[cell(c, v) for c, v in row.items()] for _, row in ladders.iterrows()]


def variants_cells(variants: pd.DataFrame) -> list[list[str]]:
    def cell(column: str, value: Any) -> str:
        if column in ("point", "start", "size", "ran"):
            return str(value)
        if column == "variants vs dynamic %" and isinstance(value, float) and not math.isnan(value):
            return f"{round(value, 1) + 0.0:+.1f}"  # (+ 0.0: no "-0.0")
        return fmt(value, 3)

    return [[cell(c, v) for c, v in row.items()] for _, row in variants.iterrows()]


def fmt(value: Any, digits: int = 1) -> str:
    """Numbers with thousands separators; '-' for missing values."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def headline_headers(headline: pd.DataFrame) -> list[str]:
    """HEADLINE_HEADERS, with a leading workload column when the results mix prompt/output shapes."""
    return (["workload"] if headline["shape"].nunique() > 1 else []) + HEADLINE_HEADERS


def headline_cells(headline: pd.DataFrame) -> list[list[str]]:
    many = headline["shape"].nunique() > 1
    rows = []
    for r in headline.itertuples(index=False):
        rows.append([r.shape] * many + [
            f"{r.concurrency:g}", r.best or "-", fmt(r.output_tokens_per_s), fmt(r.startup_cold_s),
            fmt(r.startup_warm_s), fmt(r.graph_memory_bytes / MIB), r.best_peer or "-",
            fmt(r.peer_output_tokens_per_s), "-" if math.isnan(r.speedup_vs_peer) else f"{r.speedup_vs_peer:.2f}x",
        ])  # fmt: skip
    return rows


def summary_cells(summary: pd.DataFrame) -> list[list[str]]:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return "-" if math.isnan(v) else f"{v:.6g}"
        return "-" if v is None or v is pd.NA or v == "" else str(v)

    return [[cell(v) for v in row] for row in summary.itertuples(index=False)]


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    def esc(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(map(esc, headers)) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(map(esc, row)) + " |" for row in rows]
    return "\n".join(lines)


def _headline_note(ctx: ReportContext) -> str:
    if ctx.headline.empty:
        return "No workload with a concurrency and output tokens/s: no headline."
    return ("Best graphbench configuration per concurrency by median output tokens/s, with the cost it pays "
            "(startup and CUDA-graph memory), next to the best peer.")  # fmt: skip


def _summary_note(ctx: ReportContext) -> str:
    return (f"{len(ctx.summary)} rows, one per point x workload (medians over repeats; times in s or ms, "
            "memory in bytes).")  # fmt: skip


def render_markdown(ctx: ReportContext) -> str:
    out = [f"# {ctx.title}", "", f"{ctx.environment}  ", ctx.counts, ""]
    out += ["## Headline: best configuration per concurrency", "", _headline_note(ctx), ""]
    if not ctx.headline.empty:
        out += [_md_table(headline_headers(ctx.headline), headline_cells(ctx.headline)), ""]
    if not ctx.ladders.empty:
        out += ["## Ladders: what the graphs cost", "", LADDERS_NOTE, "",
                _md_table(list(ctx.ladders.columns), ladder_cells(ctx.ladders)), ""]
    if not ctx.variants.empty:
        out += ["## compile_sizes variants: kept where faster", "", VARIANTS_NOTE, "",
                _md_table(list(ctx.variants.columns), variants_cells(ctx.variants)), ""]
    if not ctx.repeats.empty:
        out += ["## Repeats: how steady, and where the time moved", "", REPEATS_NOTE, "",
                _md_table(list(ctx.repeats.columns), repeats_cells(ctx.repeats)), "", steadiness_note(ctx.repeats), ""]
    out += ["## Charts", ""]
    for chart in ctx.charts:
        out += [f"### {chart.title}", ""]
        out += [f"![{chart.title}]({chart.name})" if chart.written else f"_{chart.note}_", ""]
    out += ["## Summary", "", f"[{ctx.summary_file}]({ctx.summary_file}): {_summary_note(ctx)}", ""]
    out += ["## Failures", ""]
    if ctx.failures.empty:
        out += ["No failed points.", ""]
    for f in ctx.failures.itertuples(index=False):
        out += [f"### {f.label} ({f.system})", "", f"Reason: {f.reason}  ", f"File: `{f.path}`", ""]
        if f.stderr_tail:
            out += ["```text", f.stderr_tail.rstrip("\n").replace("```", "'''"), "```", ""]
    if ctx.skipped:
        out += ["## Skipped files", ""] + [f"- `{file}`: {why}" for file, why in ctx.skipped] + [""]
    return "\n".join(out)


def _html_table(headers: list[str], rows: list[list[str]], text_columns: set[int]) -> str:
    def cls(i: int) -> str:
        return ' class="text"' if i in text_columns else ""

    head = "".join(f"<th{cls(i)}>{html.escape(h)}</th>" for i, h in enumerate(headers))
    body = "\n".join(
        "<tr>" + "".join(f"<td{cls(i)}>{html.escape(c)}</td>" for i, c in enumerate(row)) + "</tr>" for row in rows
    )
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'


def render_html(ctx: ReportContext) -> str:
    esc = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">', f"<title>{esc(ctx.title)}</title>",
           f"<style>{CSS}</style>", "</head>", "<body>", f"<h1>{esc(ctx.title)}</h1>",
           f'<p class="env">{esc(ctx.environment)}<br>{esc(ctx.counts)}</p>',
           "<h2>Headline: best configuration per concurrency</h2>", f"<p>{esc(_headline_note(ctx))}</p>"]  # fmt: skip
    if not ctx.headline.empty:
        headers = headline_headers(ctx.headline)
        shift = len(headers) - len(HEADLINE_HEADERS)
        out.append(_html_table(headers, headline_cells(ctx.headline), {0, 1 + shift, 6 + shift}))
    if not ctx.ladders.empty:
        out += ["<h2>Ladders: what the graphs cost</h2>", f"<p>{esc(LADDERS_NOTE)}</p>",
                _html_table(list(ctx.ladders.columns), ladder_cells(ctx.ladders), {0, 2})]
    if not ctx.variants.empty:
        out += ["<h2>compile_sizes variants: kept where faster</h2>", f"<p>{esc(VARIANTS_NOTE)}</p>",
                _html_table(list(ctx.variants.columns), variants_cells(ctx.variants), {0, 1, 6})]
    if not ctx.repeats.empty:
        last = len(ctx.repeats.columns) - 1
        out += ["<h2>Repeats: how steady, and where the time moved</h2>", f"<p>{esc(REPEATS_NOTE)}</p>",
                _html_table(list(ctx.repeats.columns), repeats_cells(ctx.repeats), {0, 1, last}),
                f"<p>{esc(steadiness_note(ctx.repeats))}</p>"]
    out.append("<h2>Charts</h2>")
    for chart in ctx.charts:
        out.append(f"<h3>{esc(chart.title)}</h3>")
        if chart.written:
            out.append(f"<figure>{_img(chart.path, chart.title)}<figcaption>{esc(chart.name)}</figcaption></figure>")
        else:
            out.append(f'<p class="note">{esc(chart.note)}</p>')
    out += ["<h2>Summary</h2>",
            f"<p>{esc(ctx.summary_file)}: {esc(_summary_note(ctx))}</p>",
            "<details><summary>show the table</summary>",
            _html_table(list(ctx.summary.columns), summary_cells(ctx.summary), {0, 1, 2, 4, 5, 6, 8, 9}),
            "</details>", "<h2>Failures</h2>"]  # fmt: skip
    if ctx.failures.empty:
        out.append("<p>No failed points.</p>")
    else:
        rows = [[f.label, f.system, f.model, f.reason, f.path] for f in ctx.failures.itertuples(index=False)]
        out.append(_html_table(FAILURE_HEADERS, rows, set(range(len(FAILURE_HEADERS)))))
        for f in ctx.failures.itertuples(index=False):
            if f.stderr_tail:
                out += [f"<h3>{esc(f.label)}: stderr tail</h3>", f"<pre>{esc(f.stderr_tail)}</pre>"]
    if ctx.skipped:
        out.append("<h2>Skipped files</h2><ul>")
        out += [f"<li><code>{esc(file)}</code>: {esc(why)}</li>" for file, why in ctx.skipped]
        out.append("</ul>")
    out += ["</body>", "</html>", ""]
    return "\n".join(out)
