"""Sweep grids: axis names, the points of a grid (Cartesian product of the axes, then peers) and
sweep files. Every point's config is validated here, before anything runs."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphbench.config.engine_config import config_from_dict, set_dotted
from graphbench.config.tomlio import read_toml
from graphbench.config.validate import suggest
from graphbench.errors import GraphbenchError

# Short axis names accepted on the command line and in sweep files.
AXIS_ALIASES = {
    "level": "optimization_level", "O": "optimization_level",
    "ladder": "compilation.performance_mode", "performance_mode": "compilation.performance_mode",
    "cudagraph_mode": "compilation.cudagraph_mode", "capture_sizes": "compilation.cudagraph_capture_sizes",
    "max_num_seqs": "scheduler.max_num_seqs", "max_num_batched_tokens": "scheduler.max_num_batched_tokens",
    "compile_sizes": "compilation.compile_sizes", "num_speculative_tokens": "speculative.num_speculative_tokens",
    "speculative_method": "speculative.method", "replay_acceptance": "speculative.replay_acceptance",
    "dtype": "model.dtype", "attention_backend": "model.attention_backend", "kernels": "model.kernels",
    "tensor_parallel_size": "parallel.tensor_parallel_size", "cpu_threads": "parallel.cpu_threads",
    "lora_modules": "lora.modules", "max_loras": "lora.max_loras", "max_lora_rank": "lora.max_lora_rank",
    "cudagraph_specialize_lora": "lora.cudagraph_specialize_lora",
    "num_kv_blocks": "cache.num_blocks", "num_blocks": "cache.num_blocks", "kv_sizing": "cache.kv_sizing",
    "static_variants": "compilation.static_variants", "mixed_ladder": "compilation.mixed_capture_sizes",
    "startup_capture_sizes": "compilation.startup_capture_sizes", "deferred_capture": "compilation.deferred_capture",
}
PEERS = ("hf-eager", "hf-compile")


@dataclass
class SweepPoint:
    label: str
    overrides: dict[str, Any]  # dotted config keys
    system: str = "graphbench"
    cold: bool = False
    tuned_graphs: int | None = None  # ladder "tuned:N": tuned from the batch sizes measured earlier in the sweep
    same_as: str | None = None  # an earlier point runs the very same engine: this one is not run
    stands_for: list[str] = field(default_factory=list)  # labels of the later points that are this engine
    same_engine_reason: str = ""  # why those points are this engine (one line)
    round: dict[str, Any] | None = None  # {id, index, of, seed, position}: which process of the point this is
    folder: str = ""  # a sub-folder of the results folder (sweep --aa: "a" or "b")
    kernel_search: str = ""  # the round's own kernel search (bench/round_searches.py): config.model.kernel_search

    @property
    def key(self) -> tuple[str, str, int]:
        """(folder, label, round): what --resume counts as measured."""
        return self.folder, self.label, (self.round or {}).get("index", 1)

    def describe(self) -> str:
        parts = [f"{k.split('.')[-1]}={v}" for k, v in self.overrides.items() if k != "model.model"]
        return " ".join(parts)


def _all_keys() -> list[str]:
    import dataclasses

    from graphbench.config.engine_config import SECTIONS

    return ["optimization_level"] + [f"{s}.{f.name}" for s, cls in SECTIONS.items() for f in dataclasses.fields(cls)]


def canonical_axis(name: str) -> str:
    """A config field as 'section.key' (or an alias such as 'level', 'ladder', 'max_num_seqs')."""
    key = AXIS_ALIASES.get(name, name)
    unique = [k for k in _all_keys() if k.split(".")[-1] == key]
    if "." not in key and len(unique) == 1:  # a field name that only one section has
        key = unique[0]
    if key not in _all_keys():
        raise GraphbenchError(f"unknown sweep axis {name!r}{suggest(name, list(AXIS_ALIASES) + _all_keys())}")
    return key


def nest_overrides(flat: dict[str, Any]) -> dict[str, Any]:
    """Dotted keys ('scheduler.max_num_seqs') as nested sections; None values are left out."""
    data: dict[str, Any] = {}
    for key, value in flat.items():
        if value is not None:
            set_dotted(data, key, value)
    return data


def point_label(overrides: dict[str, Any], axes: list[str]) -> str:
    names = {"optimization_level": "O", "compilation.performance_mode": ""}
    parts = []
    for key in axes:
        value = overrides[key]
        if isinstance(value, list):
            value = "-".join(map(str, value)) if value else "none"
        prefix = names.get(key, key.split(".")[-1] + "=")
        parts.append(f"{prefix}{value}")
    return "_".join(parts) or "base"


def build_grid(base: dict[str, Any], axes: dict[str, list[Any]], peers: list[str], *,
               graphs_possible: bool = True) -> list[SweepPoint]:
    """The Cartesian product of the axes over the base config, then one point per peer.

    A point whose engine is the same as an earlier point's is marked `same_as` it and not run; the
    earlier point lists it in `stands_for` and is reported under both labels. Without CUDA graphs
    (-O0, cudagraph_mode NONE) the ladder changes nothing, so -O0 x interactivity would measure
    -O0 x default again; where no graph can be recorded at all (graphs_possible=False: the CPU) the
    cudagraph mode changes nothing either, so -O1 and -O2 (same compiled code) are one engine.

    The first point of each -O level and compiled configuration (config hash: compile_sizes, buffer
    sizes, ...) starts cold (its compile cache is cleared), then warm; later points of that level with
    the same hash start warm. (A ladder change keeps the hash; -O3's compile_sizes are the ladder's
    power-of-two rungs <= 8, the same on the default and interactivity ladders.)
    """
    for peer in peers:
        if peer not in PEERS:
            raise GraphbenchError(f"unknown peer {peer!r}{suggest(peer, PEERS)}; choose from {', '.join(PEERS)}")
    for name, values in [*axes.items(), ("peers", peers)]:  # (else: 'two axes give the same label')
        if (twice := next((i for i, v in enumerate(values) if str(v) in map(str, values[:i])), None)) is not None:
            raise GraphbenchError(f"sweep axis {name} gives {values[twice]} twice: give each value once")
    keys = [canonical_axis(k) for k in axes]
    points, seen_hashes = [], set()
    engines: dict[str, str] = {}  # engine key -> label of the first point running that engine
    for values in itertools.product(*axes.values()) if axes else [()]:
        overrides = dict(base, **dict(zip(keys, values)))
        tuned = _tuned_graphs(overrides.get("compilation.performance_mode"))
        label = point_label(overrides, keys)
        if tuned is not None:
            overrides["compilation.performance_mode"] = "default"
        # validate before running anything
        config = config_from_dict(nest_overrides(overrides), source="sweep point").resolve()
        key = (overrides.get("optimization_level"), config.compute_hash())
        cold = key not in seen_hashes and tuned is None
        seen_hashes.add(key)
        label = label.replace("tuned:", "tuned")
        same_as = None
        if tuned is None:
            same_as = engines.setdefault(engine_key(config, graphs_possible), label)
            same_as = None if same_as == label else same_as
        points.append(SweepPoint(label, overrides, cold=cold and same_as is None, tuned_graphs=tuned,
                                 same_as=same_as))
    by_label = {p.label: p for p in points}
    for point in points:
        if point.same_as is not None:
            first = by_label[point.same_as]
            first.stands_for.append(point.label)
            first.same_engine_reason = same_engine_reason(graphs_possible)
    for peer in peers:
        points.append(SweepPoint(peer, {k: v for k, v in base.items() if k.startswith("model.")}, system=peer))
    labels = [p.label for p in points]
    if len(set(labels)) != len(labels):
        raise GraphbenchError("sweep points must have distinct labels (two axes give the same label)")
    return points


def engine_key(config: Any, graphs_possible: bool = True) -> str:
    """What the engine of a resolved config does, as a string: the whole config, less the capture
    ladder when no graph will be recorded (the ladder then changes nothing), and less the cudagraph
    mode too where no graph can be recorded on this device (every mode resolves to NONE there)."""
    data = config.to_dict()
    data.pop("optimization_level")  # a preset: what it sets is in the resolved fields
    comp = data["compilation"]
    if not graphs_possible or comp["cudagraph_mode"] == "NONE":
        comp["cudagraph_capture_sizes"] = comp["max_cudagraph_capture_size"] = comp["performance_mode"] = None
        comp["mixed_capture_sizes"] = comp["startup_capture_sizes"] = comp["deferred_capture"] = None
    if not graphs_possible:
        comp["cudagraph_mode"] = None
        data["cache"]["kv_sizing"] = None  # (no CUDA device: the cache is not sized from memory either way)
    return json.dumps(data, sort_keys=True)


def same_engine_reason(graphs_possible: bool) -> str:
    """Why points of a sweep share one engine, in one line."""
    if graphs_possible:
        return "no CUDA graph is recorded without a cudagraph mode, so the ladder changes nothing"
    return ("CUDA graphs need a GPU: on this device every cudagraph mode resolves to NONE, so points that "
            "differ only in mode or ladder compile and run the same code")


def _tuned_graphs(ladder: Any) -> int | None:
    if not (isinstance(ladder, str) and ladder.startswith("tuned:")):
        return None
    try:
        count = int(ladder.split(":", 1)[1])
    except ValueError:
        count = 0
    if count < 1:
        raise GraphbenchError(f"ladder {ladder!r}: use tuned:N with N >= 1 graphs")
    return count


WORKLOAD_KEYS = ("concurrency", "request_rate", "prompt_len", "output_len", "num_requests", "repeats", "target_repeat_s",
                 "prompt_kind", "lora_share")


def load_sweep_file(path: str | Path) -> tuple[dict[str, Any], dict[str, list[Any]], dict[str, Any]]:
    """A sweep TOML: [base] dotted config keys, [grid] axis = [values], [workload] run options, peers."""
    data = read_toml(path)
    unknown = [k for k in data if k not in ("base", "grid", "workload", "peers")]
    if unknown:
        raise GraphbenchError(f"{path}: unknown section {unknown[0]!r}{suggest(unknown[0], ['base', 'grid', 'workload', 'peers'])}")
    for section in ("base", "grid", "workload"):
        if not isinstance(data.get(section, {}), dict):
            raise GraphbenchError(f"{path}: {section} must be a table ([{section}]), got {data[section]!r}")
    peers = data.get("peers", [])
    if not isinstance(peers, list) or not all(isinstance(p, str) for p in peers):
        raise GraphbenchError(f"{path}: peers must be a list of names like [\"hf-eager\"], got {peers!r}")
    grid = data.get("grid", {})
    for axis, values in grid.items():
        if not isinstance(values, list) or not values:
            raise GraphbenchError(f"{path}: grid.{axis} must be a non-empty list")
    base = {canonical_axis(k): v for k, v in data.get("base", {}).items()}
    for key, value in data.get("workload", {}).items():
        if key not in WORKLOAD_KEYS:
            raise GraphbenchError(f"{path}: unknown key workload.{key}{suggest(key, WORKLOAD_KEYS)}; "
                                  f"choose from {', '.join(WORKLOAD_KEYS)}")
        if value == [] or (isinstance(value, str) and not value.strip()):  # (read as absent: the default traffic)
            raise GraphbenchError(f"{path}: workload.{key} is empty ({value!r}): give a value, or leave the key out")
    workload = dict(data.get("workload", {}), peers=data.get("peers", []))
    return base, grid, workload
