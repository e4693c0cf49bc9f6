"""Plot padding waste against batch size, one curve per ladder (matplotlib, imported lazily)."""

from __future__ import annotations

import io
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from graphbench.errors import GraphbenchError
from graphbench.files import try_create, write_atomic
from graphbench.ladders.ladder_comparison import LadderComparison
from graphbench.ladders.padding import waste

if TYPE_CHECKING:
    from graphbench.ladders.tune import ParetoPoint, TunedLadder

PLOT_FORMATS = (".png", ".svg", ".pdf")


def check_plot_path(path: str | Path) -> Path:
    """The plot path, if its suffix is a supported format and a file can be written in its directory
    (checked before a command prints anything: the write comes after its table)."""
    out = Path(path)
    if out.suffix.lower() not in PLOT_FORMATS:
        raise GraphbenchError(f"plot file must end in {', '.join(PLOT_FORMATS)}, got {out.name!r}")
    if not out.parent.is_dir():
        why = "is not a folder" if out.parent.exists() else "does not exist"
        raise GraphbenchError(f"plot directory {why}: {out.parent}")
    if (out.exists() or out.is_symlink()) and not out.is_file():  # a folder, a FIFO (a write would wait), a device
        raise GraphbenchError(f"plot path exists and is not a regular file: {out}")
    try:  # as write_atomic will: a temporary file beside the plot (root passes os.access even in /proc)
        try_create(out.parent)
    except OSError as exc:
        raise GraphbenchError(f"cannot write plot {out}: {exc.strerror or exc} in {out.parent}: give a --plot "
                              "path in a folder you can write") from None
    return out


def save_figure(fig, out: Path) -> Path:
    """Write a matplotlib figure; a write failure is a one-line GraphbenchError."""
    try:
        buffer = io.BytesIO()
        with warnings.catch_warnings():  # a glyph no font has is drawn as a box, not a warning on stderr
            warnings.simplefilter("ignore", UserWarning)
            fig.savefig(buffer, dpi=100, format=(out.suffix.lstrip(".") or "png").lower())
        write_atomic(out, buffer.getvalue())
    except OSError as exc:
        raise GraphbenchError(f"cannot write plot {out}: {exc.strerror or exc}") from None
    return out


def plot_waste(comparison: LadderComparison, path: str | Path) -> Path:
    """Write waste % vs batch size (1..max(top rung, largest tabulated batch)) to path; return it.

    Batches above a ladder's top rung run eager and leave a gap in its curve; a dotted line marks
    each top rung.
    """
    out = check_plot_path(path)
    from matplotlib.backends.backend_agg import (
        FigureCanvasAgg,  # lazy: only when a plot is asked for
    )
    from matplotlib.figure import Figure

    tops = [s.ladder.max_capture_size for s in comparison.ladders]
    batches = [r.batch for s in comparison.ladders for r in s.rows]
    span = max([*tops, *batches, 1])
    xs = list(range(1, span + 1))
    fig = Figure(figsize=(9, 5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    styles = ("-", "--", "-.", ":")
    for i, summary in enumerate(comparison.ladders):
        ys = [float("nan") if (w := waste(summary.sizes, n)) is None else 100 * w for n in xs]
        label = f"{summary.name} ({len(summary.sizes)} sizes, avg {100 * summary.average_waste:.2f}%)"
        if summary.selected:
            label += " [selected]"
        (line,) = ax.plot(xs, ys, label=label, linewidth=1.2, linestyle=styles[i % len(styles)])
        if summary.ladder.max_capture_size:
            ax.axvline(summary.ladder.max_capture_size, color=line.get_color(), linestyle=":", linewidth=1)
    # log base 2: the rungs (and the ladders' differences) crowd the small sizes
    from matplotlib.ticker import FuncFormatter, NullLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("batch size (tokens per step, log scale)")
    ax.set_ylabel("padding waste (% of the padded batch)")
    ax.set_title(
        f"CUDA-graph capture ladder padding, max_num_seqs={comparison.max_num_seqs}\n"
        f"(max capture size {comparison.max_capture_size}; eager above the dotted line)"
    )
    ax.set_xlim(1, span)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    return save_figure(fig, out)


def plot_pareto(
    curve: list["ParetoPoint"], ladders: dict[str, "TunedLadder"], bend: "ParetoPoint", objective: str, path: Path
) -> Path:
    """Objective vs number of graphs: the Pareto curve, the knee, and the other ladders as points."""
    out = check_plot_path(path)
    from matplotlib.backends.backend_agg import (
        FigureCanvasAgg,  # lazy: only when a plot is asked for
    )
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    xs, ys = [p.num_graphs for p in curve], [p.value for p in curve]
    ax.step(xs, ys, where="post", marker=".", label="tuned (Pareto curve)")
    ax.plot([bend.num_graphs], [bend.value], "o", mfc="none", ms=12, label=f"knee ({bend.num_graphs} graphs)")
    shown = {name: ladder for name, ladder in ladders.items() if ladder.objective == objective}  # (one the curve cannot time)
    for marker, (name, ladder) in zip("sD^", shown.items()):
        ax.plot([ladder.num_sizes], [ladder.objective_value], marker, label=f"{name} ({ladder.num_sizes} sizes)")
    ax.set_xlabel("number of graphs (ladder sizes)")
    ax.set_ylabel({"tokens": "expected padding tokens per step", "waste": "expected padding waste (%)",
                   "time": "expected step time (ms, measured curve)"}[objective])
    ax.set_title("Capture ladder: expected " + ("step time" if objective == "time" else "padding")
                 + " vs number of graphs")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    return save_figure(fig, out)
