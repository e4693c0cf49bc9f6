"""`graphbench curve`: measure the pure-decode step time at every batch size (needs a GPU)."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from graphbench.cli.engine_options import with_engine_options
from graphbench.cli.output import console as make_console
from graphbench.config import EngineConfig
from graphbench.errors import GraphbenchError

MAX_CURVE_SIZE = 4096


def default_curve_path(folder: Path, model: str) -> Path:
    """results/step-curve-<model>.json, or -2, -3, ... when taken (results are never overwritten)."""
    stem = "step-curve-" + "".join(c if c.isalnum() or c in "._-" else "-" for c in Path(model).name)[:80]
    path, n = folder / f"{stem}.json", 1
    while path.exists() or path.is_symlink():
        n += 1
        path = folder / f"{stem}-{n}.json"
    return path


@with_engine_options
def curve_command(
    engine_config: EngineConfig,
    max_size: Annotated[int, typer.Option("--max-size", help="Measure batch sizes 1..MAX (one FULL recording each).")] = 512,
    eager_every: Annotated[int, typer.Option("--eager-every", help="Also time eager steps at 1, N, 2N, ... and MAX (0: no eager).")] = 0,
    context: Annotated[int, typer.Option("--context", help="Tokens of context per request.")] = 120,
    warmup: Annotated[int, typer.Option("--warmup", help="Untimed steps per size.")] = 5,
    timed: Annotated[int, typer.Option("--timed", help="Timed steps per size (median).")] = 25,
    out: Annotated[Optional[Path], typer.Option("--out", help="Curve JSON (default results/step-curve-<model>.json; never overwritten).")] = None,
    plot: Annotated[bool, typer.Option("--plot/--no-plot", help="Write a PNG chart beside the JSON.")] = True,
) -> None:
    """Measure the pure-decode step time at every batch size 1..MAX, for tune --objective time (GPU).

    One exact FULL recording per size, timed with CUDA events; writes a JSON (never overwritten) and a
    chart. Read it with `graphbench tune --curve FILE`."""
    from graphbench.ladders.plot import check_plot_path
    from graphbench.ladders.step_curve import write_curve

    for name, value, low, high in (("--max-size", max_size, 1, MAX_CURVE_SIZE), ("--eager-every", eager_every, 0, MAX_CURVE_SIZE),
                                   ("--context", context, 1, 1 << 20), ("--warmup", warmup, 0, 10_000),
                                   ("--timed", timed, 1, 10_000)):
        if not low <= value <= high:
            raise GraphbenchError(f"{name} must be in {low}..{high}, got {value}")
    path = out if out is not None else default_curve_path(Path("results"), engine_config.model.model)
    if path.exists() or path.is_symlink():
        raise GraphbenchError(f"{path} exists: results are never overwritten; choose another --out")
    if path.suffix.lower() != ".json":
        raise GraphbenchError(f"--out must end in .json, got {path.name!r}")
    import torch

    if not torch.cuda.is_available():  # before any folder is made for the result
        raise GraphbenchError("the step-time curve times CUDA-graph replays and needs a GPU (none is visible)")
    if plot:
        path.parent.mkdir(parents=True, exist_ok=True)
        check_plot_path(path.with_suffix(".png"))
    from graphbench.bench.curve_measure import measure_step_curve

    console = make_console(stderr=True)
    with console.status("starting the engine (one recording per size)...") as status:
        def progress(phase: str, done: int, total: int) -> None:
            status.update(f"{phase}: {done}/{total} sizes timed")

        curve = measure_step_curve(engine_config, max_size, eager_every=eager_every, context=context,
                                   warmup=warmup, timed=timed, progress=progress)
    written = write_curve(path, curve)
    console = make_console()
    best = min(curve.graph_ms, key=lambda n: curve.graph_ms[n] / n)
    console.print(f"[bold]{len(curve.graph_ms)} sizes[/bold] in {curve.meta['wall_s']:.0f} s: "
                  f"{curve.graph_ms[1]:.3f} ms at 1, {curve.graph_ms[max_size]:.3f} ms at {max_size}; "
                  f"best per token at {best} ({best * 1e3 / curve.graph_ms[best]:.0f} tokens/s)")
    console.print(f"curve: {written}")
    if plot:
        from graphbench.ladders.plot_curve import plot_step_curve

        console.print(f"chart: {plot_step_curve(curve, written.with_suffix('.png'))}")
