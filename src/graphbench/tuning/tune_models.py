"""What a tune weighs its ladders with: the measured step-time curve (--curve) and the graph-memory model
fitted from measured runs (--memory-from, else --from), and the comparison ladders evaluated with them (no
printing, no torch)."""

from __future__ import annotations

import os
from pathlib import Path
from statistics import median
from typing import Any

from graphbench.errors import GraphbenchError
from graphbench.ladders.tune import TunedLadder, evaluate_ladder
from graphbench.ladders.memory_model import MemoryModel, fit_memory_model, memory_points
from graphbench.ladders.tune_sources import load_run_results

MAX_BUDGET_MIB = 1 << 20  # 1 TiB of graph memory: past any GPU's memory


def compared_ladder(sizes, dist, objective, memory_model, step_curve, warnings) -> TunedLadder:
    """A comparison ladder; one the curve cannot time (its batches above its top need eager times the
    curve lacks) is shown without ms per step, with a warning, rather than stopping the tuning."""
    try:
        return evaluate_ladder(sizes, dist, objective=objective, memory_model=memory_model, step_curve=step_curve)
    except GraphbenchError as exc:
        if step_curve is None:
            raise
        warnings.append(f"the ladder topped at {max(sizes)} gets no ms per step: {exc}")
        return evaluate_ladder(sizes, dist, objective="tokens" if objective == "time" else objective,
                               memory_model=memory_model)


def step_curves_for(paths: list[Path] | None, objective: str, max_capture_s: float | None) -> list:
    """The --curve files (none, one, or several processes' curves of one measurement), checked against what
    asks for them."""
    from graphbench.ladders.step_curve import load_curve

    if not paths:
        if objective == "time":
            raise GraphbenchError("--objective time needs a measured step-time curve: give --curve FILE "
                                  "(make one on the GPU with `graphbench curve`)")
        if max_capture_s is not None:
            raise GraphbenchError("--max-capture-s needs a step-time curve with capture times: give --curve FILE")
        return []
    seen: dict[Path, Path] = {}
    for path in paths:
        key = Path(os.path.realpath(path))  # (Path.resolve raises on a symlink loop; load_curve names it)
        if key in seen:
            again = f"{path} is given twice" if str(path) == str(seen[key]) else f"{path} is {seen[key]} given again"
            raise GraphbenchError(f"--curve {again}: each --curve must be a process's curve of its own")
        seen[key] = path
    return [load_curve(path) for path in paths]


def one_curve(curves: list, paths: list[Path] | None):
    """The curve the ladders are weighed with: the one given, or the per-size medians of several."""
    from graphbench.ladders.step_curve import median_curve

    if not curves:
        return None
    return curves[0] if len(curves) == 1 else median_curve(curves, [str(p) for p in paths or []])


def curve_summary(step_curve, curves: list, paths: list[Path], dist, top: int, ladders) -> dict[str, Any]:
    """What the curves say, per process (each curve a process's; the figures are the medians over them): each
    ladder's expected ms per step, how far it is from a ladder with every size up to the top, and from 3 curves each
    ladder's verdict against the tuned one."""
    from graphbench.ladders.step_curve import curve_gpu, expected_step_ms

    every = [expected_step_ms(range(1, top + 1), dist, curve) for curve in curves]
    samples = process_samples(curves, dist, ladders)
    dates = sorted({str(c.meta["date"]) for c in curves if c.meta.get("date")})
    return {
        "file": ", ".join(map(str, paths)), "files": [str(p) for p in paths], "processes": len(curves),
        "model": step_curve.meta.get("model"), "gpu": curve_gpu(step_curve) or None,
        "date": " .. ".join(dict.fromkeys([dates[0], dates[-1]])) if dates else None,
        "every_size_ms": median(every),
        "ms_per_step": {name: median(values) for name, values in samples.items()},
        "vs_every_size_pct": {name: median([100 * (v / e - 1) for v, e in zip(values, every)])
                              for name, values in samples.items()},
        "vs_tuned": ladder_verdicts(samples),
    }


def process_samples(curves: list, dist, ladders) -> dict[str, list[float]]:
    """Each ladder's expected ms per step under each process's curve (a ladder no curve can time is left out:
    the curves time the same sizes, so one fails where all do)."""
    from graphbench.ladders.step_curve import expected_step_ms

    samples: dict[str, list[float]] = {}
    for name, ladder in ladders.items():
        try:
            samples[name] = [expected_step_ms(ladder.sizes, dist, curve) for curve in curves]
        except GraphbenchError:  # batches above the ladder's top and no eager times for them
            continue
    return samples


def ladder_verdicts(samples: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    """Each ladder against the tuned one: in each process the ratio of their expected ms per step (paired, so a
    process that is slower all over moves both), judged against no change by the rule compare and gate use
    (reports/verdict.py: beyond twice the ratios' range, significant, and at least the replayed FULL step's gate
    threshold). Empty below 3 processes (no noise estimate)."""
    from graphbench.reports.gate_thresholds import min_effect_pct
    from graphbench.reports.verdict import MIN_PROCESSES, judge

    tuned = samples.get("tuned")
    if tuned is None or len(tuned) < MIN_PROCESSES:
        return {}
    out = {}
    for name, values in samples.items():
        if name != "tuned":
            ratios = [v / t for v, t in zip(values, tuned)]
            v = judge([1.0] * len(ratios), ratios, higher_is_better=False, min_effect_pct=min_effect_pct("full_step_ms"))
            out[name] = {"verdict": v.verdict, "change_pct": v.change_pct, "noise_pct": v.noise_pct, "reason": v.reason,
                         "per_process_pct": [100 * (r - 1) for r in ratios]}
    return out


def check_sources(step_curve, memory_model: MemoryModel | None, warnings: list[str]) -> None:
    """A warning where the step-time curve and the graph-memory model were measured for other models or on
    other GPU types: the ladders are then weighed with two machines' figures."""
    if step_curve is None or memory_model is None:
        return
    from graphbench.ladders.step_curve import curve_gpu

    curve_model, gpu = str(step_curve.meta.get("model") or ""), curve_gpu(step_curve)
    differ = [f"{what} {a!r} against {b!r}" for what, a, b in (("model", curve_model, memory_model.model),
                                                             ("GPU", gpu, memory_model.gpu)) if a and b and a != b]
    if differ:
        warnings.append(f"the step-time curve and the graph-memory model come from different runs ({'; '.join(differ)}, "
                        "curve first): each ladder is weighed with both")


def memory_model_for(memory_from, from_results, budget_mib, warnings) -> MemoryModel | None:
    """The fitted memory model: from --memory-from, else from --from (optional unless there is a budget)."""
    if budget_mib is not None and not 0 < budget_mib <= MAX_BUDGET_MIB:
        raise GraphbenchError(f"--memory-budget-mib must be positive and at most {MAX_BUDGET_MIB} (1 TiB, more "
                              f"than any GPU holds), got {budget_mib:g}")
    paths = memory_from or from_results
    if not paths:
        if budget_mib is not None:
            raise GraphbenchError("--memory-budget-mib needs measured results to fit graph memory: give --memory-from")
        return None
    results, skipped = load_run_results(paths, "--memory-from" if memory_from else "--from")
    if memory_from:
        warnings += skipped
    try:
        return fit_memory_model(results)
    except GraphbenchError as exc:
        if memory_from or budget_mib is not None:
            raise
        if memory_points(results):  # graphs measured, but not one model's on one GPU type: say why none
            warnings.append(f"no graph-memory column: {exc}")
        return None  # --from runs without graph memory: just no memory column
