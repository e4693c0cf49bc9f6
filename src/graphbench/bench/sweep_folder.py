"""Whether a results folder may take a sweep: one folder, one set of models.

A report of a folder covers every result in it, and a sweep's labels (O2_default, ...) do not name the
model: a sweep of another model into a folder that already holds results would put both models' points
side by side under the same labels, in the summary, the headline and the charts. So such a sweep is
refused before anything is written, naming the folder, the models it holds and what to do instead.

Still taken, as before: a folder without results; the same sweep again (a history, as the gate's
baseline folder of several runs); the same model's sweep extended by other points (levels, ladders,
axes) or other workloads; --resume, which finishes or re-measures the folder's own sweep.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from graphbench.bench.sweep_grid import SweepPoint
from graphbench.config.arch import checkpoint_folder
from graphbench.errors import GraphbenchError
from graphbench.reports.store import load_results


def _key(model: str) -> str:
    """A model as compared: a checkpoint folder by where it is (./ckpt and ckpt/ are one), a preset by name."""
    try:
        folder = checkpoint_folder(model)
        return str(folder.resolve()) if folder is not None else model
    except (OSError, RuntimeError):
        return model


def sweep_models(points: Iterable[SweepPoint]) -> list[str]:
    """The models the sweep's points measure (a model axis gives several), in their order."""
    return list(dict.fromkeys(str(p.overrides["model.model"]) for p in points if p.overrides.get("model.model")))


def folder_models(results_dir: Path) -> Counter:
    """model -> how many result files of it the folder holds (every file the folder's report would read)."""
    if not Path(results_dir).is_dir():
        return Counter()
    held: Counter = Counter()
    for result in load_results([results_dir], merge=False).results:
        model = result.get("model") or ((result.get("config") or {}).get("model") or {}).get("model")
        if isinstance(model, str) and model:
            held[model] += 1
    return held


def check_folder_takes(results_dir: Path, points: Iterable[SweepPoint]) -> None:
    """GraphbenchError when the folder holds results of models other than the sweep's (or the sweep adds a
    model to those the folder holds): one report would mix them."""
    models = sweep_models(points)
    held = folder_models(results_dir)
    if not models or not held or {_key(m) for m in held} == {_key(m) for m in models}:
        return
    holds = ", ".join(f"{model} ({count} file{'s' * (count != 1)})" for model, count in sorted(held.items()))
    finish = ""
    if len(held) == 1:
        (model,) = held
        finish = f", or, to finish the {model} sweep there, --model {model} --resume"
    raise GraphbenchError(f"results folder {results_dir} holds results of {holds}; this sweep measures "
                          f"{', '.join(models)}, and one report of the folder would mix the models' figures: give "
                          f"this sweep a folder of its own (--results NEW_DIR){finish}")
