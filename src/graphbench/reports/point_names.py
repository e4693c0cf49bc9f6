"""How the report names a point where its results differ in model or GPU type: the label, then the model,
then the GPU type, only where the results at hand hold several (the report's series, tables and chart labels
alike). No torch."""

from __future__ import annotations

import json

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from graphbench.reports.rounds import result_gpu


def gpu_suffix(gpu: str) -> str:
    """What results_frame appends to a series of results that span GPU types ('' for the CPU's)."""
    return f" @ {gpu or 'CPU'}"


def namer(models: Iterable[str], gpus: Iterable[str]) -> Callable[[str, str, str], str]:
    """(name, model, GPU type) -> the name, with the model and the GPU type where these (a table's or a chart's
    models and GPU types) hold several (qualified_name)."""
    many_models, many_gpus = len(set(models)) > 1, len(set(gpus)) > 1
    return lambda name, model, gpu: qualified_name(name, model if many_models else None, gpu if many_gpus else None)


def point_namer(results: Iterable[Mapping[str, Any]]) -> Callable[[Mapping[str, Any]], str]:
    """result -> its label, with its model and GPU type where these results hold several: a table's rows of one
    label on two GPU types, or of two models, named apart."""
    results = list(results)
    name = namer(map(result_model, results), map(result_gpu, results))
    return lambda r: name(str(r.get("label")), result_model(r), result_gpu(r))


def result_model(result: Mapping[str, Any]) -> str:
    """The model a result ran: its `model`, else its config's ('?' where neither says)."""
    config = result.get("config")
    model = config.get("model") if isinstance(config, Mapping) else None
    return str(result.get("model") or (model.get("model") if isinstance(model, Mapping) else None) or "?")


def engine_config(result: Mapping[str, Any]) -> dict[str, Any]:
    """A result's recorded config less what a sweep sets for one round alone (model.kernel_search: whose kernel
    choices it loaded, bench/round_searches.py): what tells two results' engines apart (a copy)."""
    config = json.loads(json.dumps(result.get("config") if isinstance(result.get("config"), Mapping) else {},
                                   default=str))
    if isinstance(config.get("model"), dict):
        config["model"].pop("kernel_search", None)
    return config


def qualified_name(name: str, model: str | None = None, gpu: str | None = None) -> str:
    """A label with the model and the GPU type where a table or chart holds several (None: not named), as
    results_frame names its series."""
    if model is not None:
        name = f"{name} ({Path(model).name or model})"
    return name if gpu is None else f"{name}{gpu_suffix(gpu)}"
