"""The report's tables as text cells: numbers rounded per column, '-' for what is missing.

Shared by report.md, report.html and the CLI's headline (rich). No torch, no matplotlib.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from graphbench.reports.aliases import also_text

MIB = 2**20
HEADLINE_HEADERS = [
    "concurrency", "best configuration", "output tok/s", "startup cold (s)", "startup warm (s)",
    "graph memory (MiB)", "best peer", "peer output tok/s", "speed-up vs peer", "tied with (change, noise)",
]  # fmt: skip


def fmt(value: Any, digits: int = 1) -> str:
    """Numbers with thousands separators; '-' for missing values."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def signed(value: Any, digits: int = 1) -> str:
    """'+3.2' / '-0.4' ('-' when missing; never '-0.0')."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        return "-"
    return f"{round(value, digits) + 0.0:+.{digits}f}"


def _many_gpus(headline: pd.DataFrame) -> bool:
    return "gpu" in headline and headline["gpu"].nunique() > 1


def _many_models(headline: pd.DataFrame) -> bool:
    return "model" in headline and headline["model"].nunique() > 1


def headline_headers(headline: pd.DataFrame) -> list[str]:
    """HEADLINE_HEADERS, with a leading model column when the results are of several models, a GPU column
    when they come from several GPU types and a workload column when they mix prompt/output shapes."""
    return (["model"] * _many_models(headline) + ["GPU"] * _many_gpus(headline)
            + (["workload"] if headline["shape"].nunique() > 1 else []) + HEADLINE_HEADERS)


def headline_cells(headline: pd.DataFrame) -> list[list[str]]:
    many, gpus, models = headline["shape"].nunique() > 1, _many_gpus(headline), _many_models(headline)
    rows = []
    for r in headline.itertuples(index=False):
        also = [a for a in str(getattr(r, "best_also", "") or "").split(", ") if a]
        rows.append([r.model] * models + [r.gpu or "cpu"] * gpus + [r.shape] * many + [
            f"{r.concurrency:g}", (r.best + also_text(also)) if r.best else "-", fmt(r.output_tokens_per_s),
            fmt(r.startup_cold_s), fmt(r.startup_warm_s), fmt(r.graph_memory_bytes / MIB), r.best_peer or "-",
            fmt(r.peer_output_tokens_per_s), "-" if math.isnan(r.speedup_vs_peer) else f"{r.speedup_vs_peer:.2f}x",
            str(getattr(r, "tied_with", "") or "-"),
        ])  # fmt: skip
    return rows


def summary_cells(summary: pd.DataFrame) -> list[list[str]]:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return "-" if math.isnan(v) else f"{v:.6g}"
        return "-" if v is None or v is pd.NA or v == "" else str(v)

    return [[cell(v) for v in row] for row in summary.itertuples(index=False)]


def _text(value: Any) -> str:
    return "" if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)) else str(value)


def repeats_cells(repeats: pd.DataFrame) -> list[list[str]]:
    def cell(column: str, value: Any) -> str:
        if column == "repeats":
            return fmt(value) if isinstance(value, str) or pd.isna(value) else str(int(value))
        if column in ("point", "workload", "slowest step", "busy host"):
            return _text(value)
        return fmt(value, 0 if column == "output tok/s" else 2 if column == "repeat s" else 1)

    return [[cell(c, v) for c, v in row.items()] for _, row in repeats.iterrows()]


def ladder_cells(ladders: pd.DataFrame) -> list[list[str]]:
    def cell(column: str, value: Any) -> str:
        if column in ("ladder", "-O", "mode", "sizes"):
            return str(value)
        if "KV tokens" in column:
            return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:,.0f}"
        digits = 2 if column.startswith("capture s") or column == "padding waste %" else 0 if "vs" in column else 1
        return fmt(value, digits)

    return [[cell(c, v) for c, v in row.items()] for _, row in ladders.iterrows()]


def variants_cells(variants: pd.DataFrame) -> list[list[str]]:
    def cell(column: str, value: Any) -> str:
        if column in ("point", "start", "size", "ran"):
            return str(value)
        if column == "variants vs dynamic %" and isinstance(value, float) and not math.isnan(value):
            return signed(value)
        return fmt(value, 3)

    return [[cell(c, v) for c, v in row.items()] for _, row in variants.iterrows()]


def padding_cells(padding: pd.DataFrame) -> list[list[str]]:
    def cell(column: str, value: Any) -> str:
        if isinstance(value, str):
            return value or "-"
        return fmt(value, 2 if column == "capture s" else 1)

    return [[cell(c, v) for c, v in row.items()] for _, row in padding.iterrows()]


def pairs_cells(pairs: pd.DataFrame) -> list[list[str]]:
    return [[str(v) for v in row] for row in pairs.itertuples(index=False)]


def speculative_cells(table: pd.DataFrame) -> list[list[str]]:
    def cell(column: str, value: Any) -> str:
        if column in ("point", "workload", "drafter", "graphs of uniform steps", "k"):
            return str(value)
        if column.endswith("vs k=0 %"):
            return signed(value) if isinstance(value, float) and not math.isnan(value) else "n/a"
        if column in ("proposed", "drafted", "wasted"):
            return fmt(value, 0)
        return fmt(value, 2 if column == "accepted / step" else 1)

    return [[cell(c, v) for c, v in row.items()] for _, row in table.iterrows()]


def lora_cells(table: pd.DataFrame) -> list[list[str]]:
    def cell(column: str, value: Any) -> str:
        if column in ("point", "adapters", "specialised", "graph keys", "workload"):
            return str(value)
        if column.endswith("vs share 0 %"):
            return signed(value) if isinstance(value, float) and not math.isnan(value) else "n/a"
        if column == "LoRA share":
            return f"{value:g}"
        return fmt(value, 2 if column == "capture s" else 1)

    return [[cell(c, v) for c, v in row.items()] for _, row in table.iterrows()]

