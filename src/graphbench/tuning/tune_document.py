"""The document `graphbench tune --format json` prints: the distribution, the options, the bounds, each
ladder's figures, the Pareto curve and its knee (no torch)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from graphbench.ladders.tune import KNEE_POINTS, ParetoPoint, TunedLadder
from graphbench.ladders.tune_inputs import TuneBounds


def ladder_row(name: str, ladder: TunedLadder) -> dict[str, Any]:
    return {"name": name, **ladder.to_dict()}


def tune_document(dist, options, bounds: TuneBounds, max_graphs: tuple[int, str], ladders, points,
                  bend: ParetoPoint, memory_model) -> dict[str, Any]:
    """max_graphs: the count and where it came from (--max-graphs, or the current ladder it defaults to)."""
    sizes = list(ladders["tuned"].sizes)
    budget = options["memory_budget_bytes"]
    return {
        "distribution": {
            "source": dist.source,
            "num_sizes": len(dist),
            "min_size": dist.min_size,
            "max_size": dist.max_size,
            "mean": dist.mean(),
        },
        "objective": options["objective"],
        "max_graphs": max_graphs[0],
        "max_graphs_from": max_graphs[1],
        "top": options["top"],
        "top_from": bounds.top_from,
        "engine": None if bounds.engine is None else asdict(bounds.engine),
        "multiple_of": options["multiple_of"],
        "required": sorted(set(options["required"])),
        "memory_budget_bytes": budget,
        "memory_model": None if memory_model is None else memory_model.to_dict(),
        "tuned": ladders["tuned"].to_dict(),
        "ladders": [ladder_row(name, ladder) for name, ladder in ladders.items()],
        "pareto": [
            {
                "num_graphs": p.num_graphs,
                "value": p.value,
                "expected_padded_tokens": e.expected_padded_tokens,
                "expected_waste_pct": e.expected_waste_pct,
                "sizes": list(p.sizes),
                **({} if e.expected_step_ms is None else {"expected_step_ms": e.expected_step_ms}),
            }
            for p, e in points
        ],
        "knee": bend.num_graphs,
        "knee_points": KNEE_POINTS,  # the knee: the fewest graphs within this many points of the best (tune.knee)
        "apply": {
            "graphbench": "--capture-sizes " + ",".join(map(str, sizes)),
            "vllm": "--compilation-config " + f"'{json.dumps({'cudagraph_capture_sizes': sizes})}'",
        },
    }
