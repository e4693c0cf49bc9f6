"""How the report names a point where its results differ in model or GPU type: the label, then the model,
then the GPU type, only where the results at hand hold several (the report's series, tables and chart labels
alike). No torch."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from graphbench.reports.rounds import result_gpu


def gpu_suffix(gpu: str) -> str:
    """What results_frame appends to a series of results that span GPU types ('' for the CPU's)."""
    return f" @ {gpu or 'CPU'}"


def point_namer(results: Iterable[Mapping[str, Any]]) -> Callable[[Mapping[str, Any]], str]:
    """result -> its label, with its model and GPU type where these results hold several (qualified_name): a
    table's rows of one label on two GPU types, or of two models, named apart."""
    results = list(results)
    many_models = len({result_model(r) for r in results}) > 1
    many_gpus = len({result_gpu(r) for r in results}) > 1
    return lambda r: qualified_name(str(r.get("label")), result_model(r) if many_models else None,
                                    result_gpu(r) if many_gpus else None)


def result_model(result: Mapping[str, Any]) -> str:
    """The model a result ran: its `model`, else its config's ('?' where neither says)."""
    config = result.get("config")
    model = config.get("model") if isinstance(config, Mapping) else None
    return str(result.get("model") or (model.get("model") if isinstance(model, Mapping) else None) or "?")


def qualified_name(name: str, model: str | None = None, gpu: str | None = None) -> str:
    """A label with the model and the GPU type where a table or chart holds several (None: not named), as
    results_frame names its series."""
    if model is not None:
        name = f"{name} ({Path(model).name or model})"
    return name if gpu is None else f"{name}{gpu_suffix(gpu)}"
