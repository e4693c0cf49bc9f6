"""Throughput, speed-up and latency charts against concurrency (closed-loop workloads)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from graphbench.reports.figures import NoData, ReportData, log2_axis, new_figure, plain_log_axis, save_figure
from graphbench.reports.frame import GRAPHBENCH, series_samples


def by_concurrency(frame: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """Median of metrics per (series, system, concurrency) over rows that have a concurrency."""
    rows = frame[frame["concurrency"].notna()]
    if rows.empty:
        return pd.DataFrame(columns=["series", "system", "concurrency", *metrics])
    return rows.groupby(["series", "system", "concurrency"], as_index=False)[metrics].median()


def series_order(table: pd.DataFrame) -> list[tuple[str, str]]:
    """(series, system) pairs: graphbench first, then peers, each sorted by name."""
    pairs = {(s, sys) for s, sys in zip(table["series"], table["system"])}
    return sorted(pairs, key=lambda p: (p[1] != GRAPHBENCH, p[0]))


def is_level(value: object, level: int) -> bool:
    """True when an optimization_level cell (int, numpy int, NA or None) equals level."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and int(value) == level


def _style(system: str) -> str:
    return "-" if system == GRAPHBENCH else "--"


def throughput_chart(data: ReportData, path: Path) -> None:
    table = by_concurrency(data.frame, ["output_tokens_per_s"]).dropna(subset=["output_tokens_per_s"])
    if table.empty:
        raise NoData("no workload with a concurrency and output tokens/s")
    fig, ax = new_figure()
    for series, system in series_order(table):
        rows = table[(table["series"] == series) & (table["system"] == system)].sort_values("concurrency")
        name = series if system == GRAPHBENCH else f"{series} (peer)"
        low, high = _round_range(data.frame, series, system, rows)
        ax.errorbar(rows["concurrency"], rows["output_tokens_per_s"], yerr=[low, high], fmt=_style(system),
                    marker="o", capsize=3, color=data.colors.get(series), label=name)  # fmt: skip
    log2_axis(ax, at=table["concurrency"])
    ax.set_xlabel("concurrency (requests in flight, log scale)")
    ax.set_ylabel("output tokens/s (median of processes; bars: their range)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, ncols=2)
    save_figure(fig, path, "Output tokens/s vs concurrency", data.environment)


def _round_range(frame: pd.DataFrame, series: str, system: str, rows: pd.DataFrame) -> tuple[list[float], list[float]]:
    """Per concurrency of rows: (median - min, max - median) of the series' per-process samples (0 with one)."""
    low, high = [], []
    for conc, med in zip(rows["concurrency"], rows["output_tokens_per_s"]):
        samples = series_samples(frame, series, concurrency=conc, system=system)
        # (at least 0: a result file written by hand, or damaged, may hold a median outside its samples)
        low.append(max(0.0, med - min(samples)) if samples else 0.0)
        high.append(max(0.0, max(samples) - med) if samples else 0.0)
    return low, high


def speedup_baselines(data: ReportData, table: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(baselines: the -O0 series then each peer series; candidates: other graphbench series)."""
    level = data.frame.drop_duplicates("series").set_index("series")["optimization_level"]
    o0 = sorted(s for s in set(table.loc[table["system"] == GRAPHBENCH, "series"]) if is_level(level.get(s), 0))
    peers = sorted(set(table.loc[table["system"] != GRAPHBENCH, "series"]))
    candidates = sorted(set(table.loc[table["system"] == GRAPHBENCH, "series"]) - set(o0))
    return o0 + peers, candidates


def comparable(data: ReportData, base: str, candidates: list[str]) -> list[str]:
    """The candidates a baseline's speed-up panel draws: the same prompt/output lengths, model and GPU type only
    (over another GPU a bar would show the hardware's ratio, over another model the models', not the
    configuration's)."""
    firsts = data.frame.drop_duplicates("series").set_index("series")
    return [c for c in candidates
            if all(firsts[key].get(c) == firsts[key].get(base) for key in ("shape", "model", "gpu"))]


def speedup_chart(data: ReportData, path: Path) -> None:
    table = by_concurrency(data.frame, ["output_tokens_per_s"]).dropna(subset=["output_tokens_per_s"])
    baselines, candidates = speedup_baselines(data, table)
    if not baselines or not candidates:
        raise NoData("needs a -O0 or peer baseline and another graphbench configuration")
    value = table.set_index(["series", "concurrency"])["output_tokens_per_s"]
    fig, axes = new_figure(len(baselines), 1, figsize=(12, 3.6 * len(baselines) + 0.8))
    axes = np.atleast_1d(axes)
    for ax, base in zip(axes, baselines):
        levels = sorted(table.loc[table["series"] == base, "concurrency"])
        same = comparable(data, base, candidates)
        width = 0.8 / max(1, len(same))
        for j, cand in enumerate(same):
            ratios = [_ratio(value.get((cand, c), np.nan), value[(base, c)]) for c in levels]
            xs = np.arange(len(levels)) + (j - (len(same) - 1) / 2) * width
            bars = ax.bar(xs, ratios, width, color=data.colors.get(cand), label=cand)
            for bar, c in zip(bars, levels):
                if not beyond_noise(data.frame, base, cand, c):  # a tie, or too few processes to tell
                    bar.set_alpha(0.35)
                    bar.set_hatch("//")
            if len(same) * len(levels) <= 24:
                ax.bar_label(bars, fmt="%.2f", fontsize=6, padding=1)
        ax.axhline(1.0, color="0.3", linewidth=0.8)
        ax.set_xticks(np.arange(len(levels)), [f"{c:g}" for c in levels])
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_ylabel("speed-up (x output tokens/s)")
        ax.set_title(f"over {base}", fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        ax.set_ylim(0, ax.get_ylim()[1] * 1.08)
    from matplotlib.patches import Patch

    labels = dict.fromkeys(label for ax in axes for label in ax.get_legend_handles_labels()[1])
    handles = [Patch(color=data.colors.get(label), label=label) for label in labels]  # (a bar's own may be hatched)
    handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="//", label="hatched: within the noise\n"
                         "between processes (or\ntoo few to tell)"))
    fig.legend(handles=handles, loc="outside right upper", fontsize=8, title="configuration")
    save_figure(fig, path, "Speed-up in output tokens/s over -O0 and over each peer", data.environment)


def _ratio(candidate: float, base: float) -> float:
    """candidate / base; NaN (no bar) where the baseline made no tokens (a result of 0 tokens/s)."""
    return float(candidate) / float(base) if base > 0 else float("nan")


def beyond_noise(frame: pd.DataFrame, base: str, cand: str, concurrency: float) -> bool:
    """Whether cand's output tokens/s at this concurrency differs from base's by compare's rule (reports/verdict.py)."""
    from graphbench.reports.gate_thresholds import min_effect_pct
    from graphbench.reports.verdict import IMPROVED, REGRESSED, judge

    verdict = judge(series_samples(frame, base, concurrency=concurrency),
                    series_samples(frame, cand, concurrency=concurrency), higher_is_better=True,
                    min_effect_pct=min_effect_pct("output_tokens_per_s"))
    return verdict.verdict in (IMPROVED, REGRESSED)


def latency_chart(data: ReportData, path: Path) -> None:
    metrics = ["ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms"]
    table = by_concurrency(data.frame, metrics).dropna(subset=metrics, how="all")
    if table.empty:
        raise NoData("no workload with a concurrency and TTFT or TPOT")
    # A panel only for what was measured: imported server results may carry TPOT and no TTFT (or the
    # reverse), and a log axis over no values cannot be drawn.
    names = [n for n in ("TTFT", "TPOT") if table[[f"{n.lower()}_p50_ms", f"{n.lower()}_p99_ms"]].gt(0).any().any()]
    if not names:
        raise NoData("no workload with a positive TTFT or TPOT")
    fig, axes = new_figure(1, len(names), figsize=(6.5 * len(names), 5.5))
    axes = list(axes) if len(names) > 1 else [axes]
    for ax, name in zip(axes, names):
        key = name.lower()
        for series, system in series_order(table):
            rows = table[(table["series"] == series) & (table["system"] == system)].sort_values("concurrency")
            color = data.colors.get(series)
            label = series if system == GRAPHBENCH else f"{series} (peer)"
            ax.plot(rows["concurrency"], rows[f"{key}_p50_ms"], "-", marker="o", ms=4, color=color, label=label)
            ax.plot(rows["concurrency"], rows[f"{key}_p99_ms"], ":", marker="^", ms=4, color=color)
        log2_axis(ax, at=table["concurrency"])
        plain_log_axis(ax, "y")
        ax.set_xlabel("concurrency (requests in flight, log scale)")
        ax.set_ylabel(f"{name} (ms, log scale)")
        ax.set_title(f"{name}: p50 solid (o), p99 dotted (^)", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[-1].legend(fontsize=7, ncols=2)
    measured = " and ".join(names)
    save_figure(fig, path, f"{measured} p50 / p99 vs concurrency", data.environment)
