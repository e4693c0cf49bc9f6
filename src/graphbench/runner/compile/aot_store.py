"""The traced-and-split forward on disk, so a warm start skips Dynamo as well as Inductor.

A cold start saves, next to Inductor's caches: the split graph (pickled GraphModule, before the
compiled pieces are installed), one Inductor artefact per distinct piece (and per compile_sizes
variant), and the argument plan (which model parameter, input or size each graph input is). A
warm start loads these and calls the split graph directly: no Dynamo trace, no Inductor lookup.
Anything missing or unreadable means a cold start.
"""

from __future__ import annotations

import json
import logging
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx

log = logging.getLogger("graphbench.compile")

FORMAT_VERSION = 2  # 2: each distinct piece pickled once, beside the split graph


def standalone_available() -> bool:
    """torch >= 2.8 can save and load a compiled piece without its graph (read from the version: looking at
    torch._inductor would import it, which a warm start of traced pieces never needs)."""
    return release_of(str(torch.__version__)) >= (2, 8)


def release_of(version: str) -> tuple[int, int]:
    """(major, minor) of a torch version, pre-releases and local builds included: 2.8.0rc1, a nightly's
    2.8.0.dev20250601 and NGC's 2.8.0a0+5228986 are 2.8 (PEP 440 orders them before 2.8, whose API they have)."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


@dataclass
class ArgPlan:
    """What each graph input is: ("param", name), ("buffer", name), ("input", i) or ("size", i)."""

    entries: list[tuple[str, Any]]

    @classmethod
    def record(cls, args: tuple, model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> "ArgPlan | None":
        """Classify the arguments of the first real call; None if one cannot be explained."""
        by_id = {id(t): ("param", n) for n, t in model.named_parameters()}
        by_id.update({id(t): ("buffer", n) for n, t in model.named_buffers()})
        entries: list[tuple[str, Any]] = []
        for arg in args:
            if isinstance(arg, torch.Tensor):
                found = next((("input", i) for i, t in enumerate(inputs) if t is arg), None) or by_id.get(id(arg))
            elif isinstance(arg, int) and not isinstance(arg, bool):
                found = next((("size", i) for i, t in enumerate(inputs) if t.shape[0] == arg), None)
            else:
                found = None
            if found is None:
                return None
            entries.append(found)
        return cls(entries)

    def bind(self, model: torch.nn.Module) -> list[Any]:
        """The argument list with parameters filled in (inputs and sizes filled per call)."""
        bound: list[Any] = []
        for kind, name in self.entries:
            if kind == "param":
                bound.append(model.get_parameter(name))
            elif kind == "buffer":
                bound.append(model.get_buffer(name))
            else:
                bound.append(None)
        return bound


class AotStore:
    """Files under <compile cache dir>/graphbench_aot/."""

    def __init__(self, directory: Path):
        self.directory = directory / "graphbench_aot"

    def _piece_path(self, key: str, size: int | None) -> Path:
        return self.directory / f"piece-{key[:24]}{'' if size is None else f'-s{size}'}.bin"

    def save_piece(self, artifact: Any, key: str | None, size: int | None = None) -> None:
        if artifact is None or key is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            artifact.save(path=str(self._piece_path(key, size)), format="binary")
        except Exception as exc:
            # An unsaveable artefact costs the next start a compile of this piece, which Inductor's own
            # cache (in the same directory) usually serves: -O3's fixed-size variants hit this with
            # "no aot_autograd artifacts", and its warm start still took 1.6-2.8 s for them on an H200.
            log.warning("could not save compiled piece %s (the next start compiles it again, from "
                        "Inductor's cache when it holds it): %s", key[:12], str(exc))

    def load_piece(self, key: str, size: int | None = None) -> Any:
        return torch._inductor.CompiledArtifact.load(path=str(self._piece_path(key, size)), format="binary")

    def save_graph(self, split: fx.GraphModule, pieces: dict[str, dict], plan: ArgPlan, compile_sizes: list[int]) -> None:
        """Save the split graph (a copy the caller gives up: its pieces are replaced by placeholders)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        missing = [info["key"] for info in pieces.values() if not info.get("traced")
                   and (not info["key"] or not self._piece_path(info["key"], None).is_file())]
        if missing:
            log.warning("not saving the split graph: %d piece(s) could not be saved", len(missing))
            return
        meta = {"format": FORMAT_VERSION, "pieces": pieces, "plan": plan.entries, "compile_sizes": compile_sizes}
        # Each distinct piece once (a decoder's identical layer bodies share a key), so that a warm start
        # deserialises, and recompiles the code of, each once. The split graph keeps a placeholder of its
        # own per piece: unpickling a GraphModule retraces its code, which names each submodule by the
        # object it finds, so a shared object would be called by one name only.
        first_of: dict[str, str] = {}
        graphs = {name: split._modules[first_of.setdefault(info["key"], name) if info["key"] else name]
                  for name, info in pieces.items()}
        for name in pieces:
            split._modules[name] = torch.nn.Module()
        (self.directory / "split_graph.pkl").write_bytes(pickle.dumps({"split": split, "pieces": graphs}))
        (self.directory / "meta.json").write_text(json.dumps(meta))

    def has_static(self, key: str, size: int) -> bool:
        return self._piece_path(key, size).is_file()

    def load_graph(self) -> tuple[fx.GraphModule, dict[str, dict], ArgPlan, list[int]] | None:
        meta_file, graph_file = self.directory / "meta.json", self.directory / "split_graph.pkl"
        if not (meta_file.is_file() and graph_file.is_file()):
            return None
        try:
            meta = json.loads(meta_file.read_text())
            if meta.get("format") != FORMAT_VERSION:
                return None
            saved = pickle.loads(graph_file.read_bytes())
            split = saved["split"]
            for name, graph in saved["pieces"].items():
                split._modules[name] = graph
            plan = ArgPlan([tuple(e) for e in meta["plan"]])
            return split, meta["pieces"], plan, meta.get("compile_sizes", [])
        except Exception as exc:  # corrupt entry: rebuild
            log.warning("ignoring unreadable compiled graph in %s: %s", self.directory, str(exc))
            return None
