"""What every report chart shares: the data it draws from, `NoData`, its outcome, the figure plumbing.

matplotlib is imported lazily inside the functions and only through the Agg canvas (no pyplot,
no global backend switch). A chart function raises `NoData` when the results hold nothing for it;
the report then skips it with a note instead of failing. Every figure carries its units on the
axes and the GPU and versions in a footnote (`save_figure`), also in the PNG's text (`png_text`).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from graphbench.errors import GraphbenchError
from graphbench.files import write_atomic

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DPI = 100


class NoData(Exception):
    """The results hold nothing this chart could show; the message says what is missing."""


@dataclass
class ReportData:
    """What the chart functions draw from."""

    results: list[Mapping[str, Any]]  # successful points (the raw result dicts)
    frame: pd.DataFrame  # reports.frame.results_frame
    points: pd.DataFrame  # reports.frame.points_frame
    environment: str  # reports.frame.environment_line
    colors: dict[str, Any] = field(default_factory=dict)  # series or label -> colour


@dataclass
class ChartOutcome:
    """One chart: written to path, or skipped (path None) with a note saying why."""

    name: str
    title: str
    path: Path | None
    note: str = ""

    @property
    def written(self) -> bool:
        return self.path is not None


ChartFunction = Callable[[ReportData, Path], None]


def new_figure(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] = (10, 5.5), **kwargs: Any):
    """A Figure on the Agg canvas and its axes (squeezed like pyplot.subplots)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=True, **kwargs)
    return fig, axes


def save_figure(fig: Any, path: Path, title: str, environment: str) -> Path:
    """Title, footnote with GPU and versions (also in the PNG's Description text chunk), write a PNG."""
    fig.suptitle(title, fontsize=12)
    fig.supxlabel(environment, fontsize=7, color="0.35", ha="center")
    metadata = {"Title": title, "Description": environment, "Software": "graphbench"}
    try:
        buffer = io.BytesIO()
        with warnings.catch_warnings():  # a glyph no font has (a label in CJK) is drawn as a box, not a warning
            warnings.simplefilter("ignore", UserWarning)
            fig.savefig(buffer, dpi=DPI, format="png", metadata=metadata)
        write_atomic(path, buffer.getvalue())
    except OSError as exc:
        raise GraphbenchError(f"cannot write chart {path}: {exc}") from None
    return path


def palette(names: list[str]) -> dict[str, Any]:
    """A stable colour per name (sorted), from tab10 then tab20."""
    from matplotlib import colormaps

    cmap = colormaps["tab10" if len(names) <= 10 else "tab20"]
    return {name: cmap(i % cmap.N) for i, name in enumerate(sorted(set(names)))}


def log2_axis(ax: Any, at: Any = ()) -> None:
    """Log base 2 on x with plain integer tick labels (concurrency, batch sizes); ticks at the values in at
    (the measured ones) when it holds 2 to 12 of them, else at powers of two."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ax.set_xscale("log", base=2)
    ticks = sorted({float(v) for v in at if v is not None and v == v and v > 0})
    if 2 <= len(ticks) <= 12:
        ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())


def plain_log_axis(ax: Any, axis: str = "y") -> None:
    """Log base 10 on axis (call it after plotting) with plain numbers, never 3x10^0: at 1, 2 and 5 of each
    decade, more of them where the data spans under a decade and a half, fewer over three decades."""
    import math

    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    with warnings.catch_warnings():  # no positive value (a throughput of 0): matplotlib's own warning leaked
        warnings.simplefilter("ignore", UserWarning)
        getattr(ax, f"set_{axis}scale")("log")
    low, high = sorted(ax.get_ylim() if axis == "y" else ax.get_xlim())
    decades = math.log10(high / low) if low > 0 else 99.0
    subs = (1.0, 2.0, 3.0, 5.0, 7.0) if decades < 1.5 else (1.0, 2.0, 5.0) if decades < 3 else (1.0,)
    scale_axis = ax.yaxis if axis == "y" else ax.xaxis
    scale_axis.set_major_locator(LogLocator(base=10, subs=subs))
    scale_axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    scale_axis.set_minor_formatter(NullFormatter())


def png_text(path: Path) -> dict[str, str]:
    """The tEXt chunks of a PNG file (keyword -> text)."""
    import struct
    import zlib

    data, out, pos = Path(path).read_bytes(), {}, 8
    while pos + 8 <= len(data):
        (length,), kind = struct.unpack(">I", data[pos : pos + 4]), data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"tEXt" and b"\0" in body:
            key, _, text = body.partition(b"\0")
            out[key.decode("latin-1")] = text.decode("latin-1")
        elif kind == b"zTXt" and b"\0" in body:
            key, _, text = body.partition(b"\0")
            out[key.decode("latin-1")] = zlib.decompress(text[1:]).decode("latin-1")
        pos += 12 + length
    return out


