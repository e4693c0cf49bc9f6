"""report.md and a self-contained report.html (inline CSS, charts as base64 PNG, no external assets)."""

from __future__ import annotations

import base64
import math
import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from graphbench.reports.figures import ChartOutcome
from graphbench.reports.ladder_pairs import pairs_note
from graphbench.reports.rounds_table import ROUNDS_NOTE
from graphbench.reports.safe_text import markdown_text
from graphbench.reports.padding_table import padding_note
from graphbench.reports.render_cells import (  # (headline_cells, headline_headers: the CLI imports them from here)
    HEADLINE_HEADERS,
    headline_cells,
    headline_headers,
    ladder_cells,
    lora_cells,
    padding_cells,
    pairs_cells,
    repeats_cells,
    speculative_cells,
    summary_cells,
    variants_cells,
)
from graphbench.reports.repeats_table import steadiness_note
from graphbench.reports.lora_table import LORA_NOTE
from graphbench.reports.speculative_table import SPECULATIVE_NOTE
from graphbench.reports.capture_plan_table import CAPTURE_PLAN_NOTE, SAVED
from graphbench.reports.variants_table import VARIANTS_NOTE

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
.banner { background: #fff6e0; border-left: 4px solid #e8a33d; padding: .6em 1em; margin: 1em 0; }
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
    capture_plan: pd.DataFrame = field(default_factory=pd.DataFrame)  # capture_plan_table.capture_plan_table
    speculative: pd.DataFrame = field(default_factory=pd.DataFrame)  # speculative_table.speculative_table
    lora: pd.DataFrame = field(default_factory=pd.DataFrame)  # lora_table.lora_table
    padding: pd.DataFrame = field(default_factory=pd.DataFrame)  # padding_table.padding_table
    pairs: pd.DataFrame = field(default_factory=pd.DataFrame)  # ladder_pairs.ladder_pairs
    rounds: pd.DataFrame = field(default_factory=pd.DataFrame)  # rounds_table.rounds_table
    steadiness: str | None = None  # the note under Repeats (None: from `repeats`; give it when repeats holds aliases)
    banner: str = ""  # banner.cpu_banner: what a CPU run can and cannot show
    same_engine: list[str] = field(default_factory=list)  # aliases.alias_notes: labels measured once for another
    models: list[str] = field(default_factory=list)  # headline.covered_models: the models the figures are for

    @property
    def headline_title(self) -> str:
        return f"Headline: best configuration per concurrency{', ' if self.models else ''}{', '.join(self.models)}"


@dataclass
class TableSection:
    """A titled table with its note before and after, rendered alike in md and html."""

    title: str
    note: str
    headers: list[str]
    rows: list[list[str]]
    text_columns: set[int]
    after: str = ""
    level: int = 2


LADDERS_NOTE = ("What each captured ladder costs and pads. Ratios compare it with the largest ladder of the same "
                "-O level and mode. The recordings share a pool sized by the largest recording: while the top "
                "size stays, the memory beyond the pool is what fewer rungs can save. Graphs as KV tokens: the "
                "graph memory in KV-cache tokens, what a KV cache sized after capture would give up for the ladder "
                "(measured; and as a memory model fitted over these points predicts it).")


REPEATS_NOTE = ("How steady the repeats were: how long a repeat ran (closed loops shorter than the target run a multiple "
                "of their requests), the spread of output tokens/s across repeats ((max - min) / median), "
                "and the repeats' total step time per runtime mode with its spread. The mode whose total moves "
                "with the tokens/s is where an unsteady repeat lost its time (NONE: steps that ran without a "
                "CUDA graph, e.g. prefill chunks above the ladder's top).")


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(map(markdown_text, headers)) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(map(markdown_text, row)) + " |" for row in rows]
    return "\n".join(lines)


def _headline_note(ctx: ReportContext) -> str:
    if ctx.headline.empty:
        return "No workload with a concurrency and output tokens/s: no headline."
    return ("Best graphbench configuration per concurrency by median output tokens/s over its processes, with "
            "the cost it pays (startup and CUDA-graph memory), next to the best peer. \"Tied with\" lists every "
            "configuration the best cannot be told from: no difference significant over the processes, beyond "
            "the noise measured between them and beyond 5% (change, noise). Read a tie as a tie: the order "
            "inside it is noise.")  # fmt: skip


def _summary_note(ctx: ReportContext) -> str:
    text = (f"{len(ctx.summary)} rows, one per point x workload (medians over the point's processes, each the median "
            "of its repeats; gpu: the GPU type, empty on the CPU; rounds: how many processes; round_spread_pct: their "
            "spread in output tok/s, the point's noise; times in s or ms, memory in bytes).")  # fmt: skip
    if "same_engine_as" in ctx.summary and (ctx.summary["same_engine_as"].fillna("") != "").any():
        text += (" A label measured once for another repeats that point's rows (its config columns are the "
                 "measured engine's), same_engine_as naming it.")
    return text


def _named(table: pd.DataFrame, names: tuple[str, ...]) -> set[int]:
    return {i for i, column in enumerate(table.columns) if column in names}


def _without_empty(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """The table less a text column no row fills (the busy-host column of a calm run)."""
    if column in table and not table[column].fillna("").astype(str).str.len().any():
        return table.drop(columns=[column])
    return table


def table_sections(ctx: ReportContext) -> list[TableSection]:
    """The tables after the headline and the charts, in report order (those with rows)."""
    out = []
    if not ctx.ladders.empty:
        out.append(TableSection("Ladders: what the graphs cost", LADDERS_NOTE, list(ctx.ladders.columns),
                                ladder_cells(ctx.ladders), {0, 2}))
    if not ctx.padding.empty:
        out.append(TableSection("Padding: what each ladder pads, and whether it costs time", padding_note(ctx.padding),
                                list(ctx.padding.columns), padding_cells(ctx.padding),
                                _named(ctx.padding, ("point", "workload", "ladder", "graphs", "batch sizes (share of steps)"))))
        if not ctx.pairs.empty:
            out.append(TableSection("Ladder against ladder: graph steps, TPOT and tokens/s", pairs_note(ctx.pairs),
                                    list(ctx.pairs.columns), pairs_cells(ctx.pairs),
                                    _named(ctx.pairs, ("pair", "workload", "processes")), level=3))
    if not ctx.speculative.empty:
        out.append(TableSection("Speculative decoding: acceptance and what it buys", SPECULATIVE_NOTE,
                                list(ctx.speculative.columns), speculative_cells(ctx.speculative),
                                _named(ctx.speculative, ("point", "workload", "drafter", "graphs of uniform steps"))))
    if not ctx.lora.empty:
        out.append(TableSection("LoRA: what adapters cost in graphs and steps", LORA_NOTE, list(ctx.lora.columns),
                                lora_cells(ctx.lora), _named(ctx.lora, ("point", "specialised", "graph keys", "workload"))))
    if not ctx.capture_plan.empty:
        plan = ctx.capture_plan
        out.append(TableSection("Capture plan: two ladders and capture on demand", CAPTURE_PLAN_NOTE, list(plan.columns),
                                [[_plan_cell(c, v) for c, v in row.items()] for _, row in plan.iterrows()],
                                _named(plan, ("point", "ladders", "workload", SAVED))))
    if not ctx.variants.empty:
        out.append(TableSection("compile_sizes variants: kept where faster", VARIANTS_NOTE, list(ctx.variants.columns),
                                variants_cells(ctx.variants), {0, 1, 6}))
    if not ctx.rounds.empty:
        rounds = _without_empty(ctx.rounds, "left out")
        out.append(TableSection("Rounds: the processes each point was measured in, and its noise", ROUNDS_NOTE,
                                list(rounds.columns), [[str(v) for v in row] for row in rounds.itertuples(index=False)],
                                _named(rounds, ("point", "workload", "output tok/s per process", "left out"))))
    if not ctx.repeats.empty:
        repeats = _without_empty(ctx.repeats, "busy host")
        note = steadiness_note(ctx.repeats) if ctx.steadiness is None else ctx.steadiness
        out.append(TableSection("Repeats: how steady, and where the time moved", REPEATS_NOTE, list(repeats.columns),
                                repeats_cells(repeats), _named(repeats, ("point", "workload", "slowest step", "busy host")),
                                after=note))
    return out


def _plan_cell(column: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if column in ("capture s", "stall s"):
        return f"{value:.2f}"
    return f"{value:,.0f}"


def _md_banner(ctx: ReportContext) -> list[str]:
    head, _, rest = ctx.banner.partition(". ")
    out = [f"> **{head}.** {rest}", ""] if ctx.banner else []
    if ctx.same_engine:
        out += ["Measured once for several labels:", ""] + [f"- {markdown_text(line)}" for line in ctx.same_engine] + [""]
    return out


def render_markdown(ctx: ReportContext) -> str:
    out = [f"# {ctx.title}", "", f"{markdown_text(ctx.environment)}  ", markdown_text(ctx.counts), ""] + _md_banner(ctx)
    out += [f"## {markdown_text(ctx.headline_title)}", "", _headline_note(ctx), ""]
    if not ctx.headline.empty:
        out += [_md_table(headline_headers(ctx.headline), headline_cells(ctx.headline)), ""]
    # the charts right after the headline: what most readers look at first, before the long tables
    out += ["## Charts", ""]
    for chart in ctx.charts:
        out += [f"### {chart.title}", ""]
        out += [f"![{chart.title}]({chart.name})" if chart.written else f"_{chart.note}_", ""]
    for section in table_sections(ctx):
        out += [f"{'#' * section.level} {section.title}", "", section.note, "",
                _md_table(section.headers, section.rows), ""] + ([markdown_text(section.after), ""] if section.after else [])
    out += ["## Summary", "", f"[{ctx.summary_file}]({ctx.summary_file}): {_summary_note(ctx)}", ""]
    out += ["## Failures", ""]
    if ctx.failures.empty:
        out += ["No failed points.", ""]
    for f in ctx.failures.itertuples(index=False):
        out += [f"### {markdown_text(f.label)} ({markdown_text(f.system)})", "", f"Reason: {markdown_text(f.reason)}  ",
                f"File: {markdown_text(f.path)}", ""]
        if f.stderr_tail:  # in a fence nothing renders; a fence of its own could end it, so those go
            out += ["```text", f.stderr_tail.rstrip("\n").replace("```", "'''"), "```", ""]
    if ctx.skipped:
        out += ["## Skipped files", ""] + [f"- {markdown_text(file)}: {markdown_text(why)}"
                                           for file, why in ctx.skipped] + [""]
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


def _html_banner(ctx: ReportContext) -> list[str]:
    esc = html.escape
    head, _, rest = ctx.banner.partition(". ")
    out = [f'<div class="banner"><strong>{esc(head)}.</strong> {esc(rest)}</div>'] if ctx.banner else []
    if ctx.same_engine:
        out += ["<p>Measured once for several labels:</p>", "<ul>"]
        out += [f"<li>{esc(line)}</li>" for line in ctx.same_engine] + ["</ul>"]
    return out


def render_html(ctx: ReportContext) -> str:
    esc = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">', f"<title>{esc(ctx.title)}</title>",
           f"<style>{CSS}</style>", "</head>", "<body>", f"<h1>{esc(ctx.title)}</h1>",
           f'<p class="env">{esc(ctx.environment)}<br>{esc(ctx.counts)}</p>', *_html_banner(ctx),
           f"<h2>{esc(ctx.headline_title)}</h2>", f"<p>{esc(_headline_note(ctx))}</p>"]  # fmt: skip
    if not ctx.headline.empty:
        headers = headline_headers(ctx.headline)
        shift = len(headers) - len(HEADLINE_HEADERS)
        out.append(_html_table(headers, headline_cells(ctx.headline), {*range(shift), 1 + shift, 6 + shift}))
    out.append("<h2>Charts</h2>")
    for chart in ctx.charts:
        out.append(f"<h3>{esc(chart.title)}</h3>")
        if chart.written:
            out.append(f"<figure>{_img(chart.path, chart.title)}<figcaption>{esc(chart.name)}</figcaption></figure>")
        else:
            out.append(f'<p class="note">{esc(chart.note)}</p>')
    for section in table_sections(ctx):
        h = f"h{section.level}"
        out += [f"<{h}>{esc(section.title)}</{h}>", f"<p>{esc(section.note)}</p>",
                _html_table(section.headers, section.rows, section.text_columns)]
        if section.after:
            out.append(f"<p>{esc(section.after)}</p>")
    out += ["<h2>Summary</h2>",
            f"<p>{esc(ctx.summary_file)}: {esc(_summary_note(ctx))}</p>",
            "<details><summary>show the table</summary>",
            _html_table(list(ctx.summary.columns), summary_cells(ctx.summary),
                        {0, 1, 2, 4, 5, 6, 8, 9} | _named(ctx.summary, ("same_engine_as",))),
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
