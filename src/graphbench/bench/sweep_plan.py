"""A sweep's processes before they run: their order over the rounds, a tuned:N point's ladder, and the
engine config file each point's `graphbench run` child reads."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

from graphbench.bench.sweep_grid import SweepPoint, nest_overrides
from graphbench.config.engine_config import config_from_dict
from graphbench.errors import GraphbenchError
from graphbench.reports.store import load_results, safe_label


def tune_point(point: SweepPoint, results_dir: Path) -> None:
    """Give a tuned:N point its capture sizes: the exact best N-size ladder for the batch sizes
    measured so far in this results folder (same top as the default ladder)."""
    from graphbench.ladders import capture_sizes
    from graphbench.ladders.tune import tune_ladder
    from graphbench.ladders.tune_sources import distribution_from_results

    measured = [r for r in load_results([results_dir]).results
                if r.get("status") == "ok" and r.get("system") == "graphbench"] if results_dir.exists() else []
    if "compilation.cudagraph_capture_sizes" in point.overrides:
        return  # tuned in an earlier round: every round measures the same ladder
    if not measured:
        raise GraphbenchError("no measured batch sizes yet: put tuned:N after a default or interactivity ladder")
    config = config_from_dict(nest_overrides(point.overrides)).resolve()
    top = capture_sizes(config.scheduler.max_num_seqs, max_num_batched_tokens=config.scheduler.max_num_batched_tokens,
                        num_speculative_tokens=config.speculative.num_speculative_tokens).max_capture_size
    tuned = tune_ladder(distribution_from_results(measured), point.tuned_graphs, top=top,
                        multiple_of=config.decode_query_len)
    point.overrides["compilation.cudagraph_capture_sizes"] = list(tuned.sizes)


def plan_rounds(points: list[SweepPoint], rounds: int, seed: int, sweep_id: str,
                folders: tuple[str, ...] = ("",)) -> list[SweepPoint]:
    """The processes to run, in order: every point's round 1 (in grid order, so that each level's cold
    start comes before the points that use its compile cache), then every graphbench point's round 2 in
    an order shuffled by `seed`, and so on (asv's interleaved rounds). Peers and same-engine points run
    once. folders: with several (sweep --aa), each round runs every point once per folder, interleaved.
    The copies of a point share its overrides, so a tuned:N ladder is tuned once."""
    if rounds < 1:
        raise GraphbenchError(f"rounds must be >= 1, got {rounds}")
    plan: list[SweepPoint] = []
    for index in range(1, rounds + 1):
        members = [(p, f) for f in folders for p in points] if index == 1 else \
            [(p, f) for f in folders for p in points if p.system == "graphbench" and p.same_as is None]
        if index > 1:
            random.Random(f"{seed}:{index}").shuffle(members)
        for position, (point, folder) in enumerate(members, 1):
            of = rounds if point.system == "graphbench" and point.same_as is None else 1
            info = {"id": sweep_id + (f"/{folder}" if folder else ""), "index": index, "of": of, "seed": seed,
                    "position": position}
            plan.append(replace(point, cold=point.cold and index == 1 and folder == folders[0], round=info,
                                folder=folder))
    return plan


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)  # (\\u escapes of an emoji's surrogates are not TOML)


def write_point_config(point: SweepPoint, directory: Path) -> Path:
    """The point's engine config as a TOML file the child reads with --config (with its round's own kernel
    search, a file per round: rounds on several GPUs may run one point at once)."""
    data = nest_overrides(point.overrides)
    name = safe_label(point.label)  # a label may hold a checkpoint's path
    if point.kernel_search:
        data.setdefault("model", {})["kernel_search"] = point.kernel_search
        name += f".{point.kernel_search}"
    return toml_file(data, directory / f"{name}.toml")


def toml_file(data: dict[str, Any], path: Path) -> Path:
    """A nested config dict ({section: {key: value}}, optimization_level at the top) as a TOML file."""
    data = dict(data)
    lines = [f"optimization_level = {data.pop('optimization_level')}"] if "optimization_level" in data else []
    for section, values in data.items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {toml_value(value)}" for key, value in values.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path
