"""graphbench's torch.compile backend: split the FX graph at attention, compile each piece with Inductor.

Dynamo hands the backend one graph with the token dimension symbolic. The backend splits it at
every splitting op and compiles each distinct piece that is not a splitting op with Inductor for
a dynamic token count (identical layer bodies share one compilation). Pieces also get
concrete-shape variants (autotuned) for `compile_sizes`, compiled during start-up. Everything
is saved (aot_store) so that a warm start needs neither Dynamo nor Inductor.
"""

from __future__ import annotations

import copy
import logging
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.fx as fx

from graphbench.config.modes import CUDAGraphMode
from graphbench.runner.compile.aot_store import AotStore, ArgPlan
from graphbench.runner.compile.compile_stack import import_compile_stack
from graphbench.runner.compile.pieces import (
    CompileStats,
    PieceRunner,
    inductor_compile,
    piece_key,
    runs_as_traced,
    size_getter,
    size_spec,
    unbox_for,
)
from graphbench.runner.compile.split import Piece, fake_args_from_meta, split_graph
from graphbench.runner.cudagraph import CUDAGraphWrapper

__all__ = ["CompileStats", "SplittingBackend"]
log = logging.getLogger("graphbench.compile")


class SplittingBackend:
    """The callable handed to torch.compile(backend=...); also restores a saved split graph."""

    def __init__(self, splitting_ops: list[str], compile_sizes: list[int], autotune: bool,
                 piecewise_graphs: bool, artefact_dir: Path | None, model: torch.nn.Module | None = None,
                 aot: AotStore | None = None, static_variants: str = "measure"):
        self.splitting_ops = splitting_ops
        self.static_variants = static_variants  # config.compilation.static_variants
        self.compile_sizes = compile_sizes
        self.autotune = autotune
        self.piecewise_graphs = piecewise_graphs
        self.artefact_dir = artefact_dir
        self.model, self.aot = model, aot
        self.stats = CompileStats()
        self.runners: list[PieceRunner] = []
        self.wrappers: list[CUDAGraphWrapper] = []
        self.dynamic_by_key: dict[str, Callable] = {}
        self.static_by_key: dict[tuple[str, int], Callable] = {}
        self.split_module: fx.GraphModule | None = None
        self.current_inputs: tuple[torch.Tensor, ...] = ()  # set by the caller around the first call

    # -- cold: called by Dynamo with the traced graph -----------------------------------------

    def __call__(self, gm: fx.GraphModule, example_inputs: list[Any]) -> Callable:
        split, pieces = split_graph(gm, self.splitting_ops)
        pristine = copy.deepcopy(split) if self.aot is not None else None
        self.split_module = split
        self.stats.num_pieces = len(pieces)
        self.stats.piece_names = [p.name for p in pieces]
        to_compile = [p.name for p in pieces if not p.is_splitting_op]
        infos: dict[str, dict] = {}
        fake_args = fake_args_from_meta(gm, split, to_compile)
        if fake_args is None:  # fall back: propagate fake tensors through the split graph
            _PieceCompiler(split, set(to_compile), self).run(*example_inputs)
            pristine = None  # piece identities unknown to the saver
        else:
            for name in to_compile:
                infos[name] = self.install(split, name, getattr(split, name), fake_args[name])
        self._save_readable(gm, split, pieces)
        if pristine is None:
            return split
        return _SaveOnFirstCall(split, pristine, infos, self)

    def install(self, split: fx.GraphModule, name: str, graph: fx.GraphModule, fake_args: list[Any]) -> dict:
        key = piece_key(graph, fake_args)
        spec = size_spec(fake_args)
        if runs_as_traced(graph):  # graphbench's ops only: Inductor would emit the same calls
            self.stats.num_traced_pieces += 1
            self._add_runner(split, name, graph, graph, spec, key)
            return {"key": key, "size": spec, "traced": True}
        dynamic_fn = self.dynamic_by_key.get(key) if key else None
        if dynamic_fn is None:
            started = time.perf_counter()
            dynamic_fn, artifact = inductor_compile(graph, fake_args, {}, dynamic=True)
            self.stats.inductor_seconds += time.perf_counter() - started
            self.stats.num_distinct_pieces += 1
            if key:
                self.dynamic_by_key[key] = dynamic_fn
                if self.aot is not None:
                    self.aot.save_piece(artifact, key)
        self._add_runner(split, name, graph, dynamic_fn, spec, key)
        return {"key": key, "size": spec}

    def _add_runner(self, split: fx.GraphModule, name: str, graph: fx.GraphModule, dynamic_fn: Callable,
                    spec: list | None, key: str | None) -> PieceRunner:
        self.stats.num_compiled_pieces += 1
        runner = PieceRunner(name, graph, dynamic_fn, size_getter(spec), self, key)
        self.runners.append(runner)
        target: Callable = runner
        if self.piecewise_graphs:
            wrapper = CUDAGraphWrapper(runner, CUDAGraphMode.PIECEWISE, name)
            self.wrappers.append(wrapper)
            target = wrapper
        split.__dict__[name] = target  # shadows the submodule: the split graph's code calls it
        return runner

    # -- warm: no Dynamo, no Inductor -------------------------------------------------------------

    def restore(self) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None:
        """Load the saved split graph and compiled pieces; None when a cold start is needed."""
        if self.aot is None or self.model is None:
            return None
        loaded = self.aot.load_graph()
        if loaded is None:
            return None
        split, infos, plan, saved_sizes = loaded
        if sorted(saved_sizes) != sorted(self.compile_sizes):
            return None
        traced = {name for name, info in infos.items() if info.get("traced")}
        started = time.perf_counter()
        graph_by_key = {info["key"]: getattr(split, name) for name, info in infos.items() if info["key"]}
        graph_of = {info["key"]: getattr(split, name) for name, info in infos.items() if name not in traced}
        needs_inductor = bool(graph_of) or any(self.aot.has_static(key, size) for key in graph_by_key
                                               for size in self.compile_sizes)
        if needs_inductor:  # a piece Inductor compiled: loading it imports the compile stack
            self.stats.import_seconds = import_compile_stack()
            started = time.perf_counter()
        try:
            for key, graph in graph_of.items():
                self.dynamic_by_key[key] = unbox_for(graph, self.aot.load_piece(key))
            for key, graph in graph_by_key.items():
                for size in self.compile_sizes:
                    if self.aot.has_static(key, size):
                        self.static_by_key[(key, size)] = unbox_for(graph, self.aot.load_piece(key, size))
        except Exception as exc:  # unreadable artefact: compile afresh
            log.warning("compiled pieces in %s could not be loaded (%s); compiling afresh", self.aot.directory, str(exc))
            self.dynamic_by_key.clear()
            self.static_by_key.clear()
            return None
        for name, info in infos.items():
            key, graph = info["key"], getattr(split, name)
            runner = self._add_runner(split, name, graph, graph if name in traced else self.dynamic_by_key[key],
                                      info["size"], key)
            for size in self.compile_sizes:
                if (key, size) in self.static_by_key:
                    runner.static_fns[size] = self.static_by_key[(key, size)]
        self.stats.load_seconds = time.perf_counter() - started
        self.stats.num_pieces = len(list(split.named_children()))
        self.stats.num_distinct_pieces = len(self.dynamic_by_key)
        self.stats.num_traced_pieces = len(traced)
        self.split_module = split
        return _SavedForward(split, plan, self.model)

    def variants_are_pieces(self, size: int) -> bool:
        """Whether every variant of this size is its traced piece (nothing Inductor compiled for it)."""
        having = [r for r in self.runners if size in r.compile_sizes]
        return bool(having) and all(r.static_fns.get(size) is r.graph for r in having)

    def use_static_size(self, size: int, on: bool) -> None:
        """Run this size's compiled variants (on) or the dynamic pieces (off) from now on."""
        for runner in self.runners:
            if size in runner.compile_sizes:
                (runner.static_sizes.add if on else runner.static_sizes.discard)(size)

    def release(self) -> None:
        """Drop the model, the compiled pieces and their CUDA graphs. Dynamo's cache entry for the
        model's forward (global, on its code object) keeps this backend alive after the engine is
        gone: without this the engine's weights and piecewise recordings would stay with it."""
        for wrapper in self.wrappers:
            wrapper.recordings.clear()
        for runner in self.runners:
            runner.static_fns.clear()
            runner.dynamic_fn = runner.graph = None
        self.runners.clear()
        self.wrappers.clear()
        self.dynamic_by_key.clear()
        self.static_by_key.clear()
        self.model = self.split_module = self.aot = None

    def finish_startup(self) -> None:
        """No compilation after start-up: a missing variant is then an error, not a stall."""
        for runner in self.runners:
            runner.allow_compile = False

    def _save_readable(self, gm: fx.GraphModule, split: fx.GraphModule, pieces: list[Piece]) -> None:
        if self.artefact_dir is None:
            return
        self.artefact_dir.mkdir(parents=True, exist_ok=True)
        (self.artefact_dir / "traced_graph.py").write_text(gm.code)
        traced = {r.name for r in self.runners if r.dynamic_fn is r.graph}
        lines = [f"# {p.name}: {'splitting op' if p.is_splitting_op else 'runs as traced (graphbench ops only)' if p.name in traced else 'compiled by Inductor'}"
                 for p in pieces]
        (self.artefact_dir / "split_graph.py").write_text("\n".join(lines) + "\n\n" + split.code)


class _PieceCompiler(torch.fx.Interpreter):
    """Runs the split graph on fake inputs; compiles each piece with the fake arguments it receives."""

    def __init__(self, split: fx.GraphModule, to_compile: set[str], backend: SplittingBackend):
        super().__init__(split)
        self.split, self.to_compile, self.backend = split, to_compile, backend
        self.fake_mode = torch._guards.detect_fake_mode()

    def run(self, *args: Any) -> Any:
        from torch._dispatch.python import enable_python_dispatcher

        fake_args = [self.fake_mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        with self.fake_mode, enable_python_dispatcher():
            return super().run(*fake_args)

    def call_module(self, target: str, args: Any, kwargs: Any) -> Any:
        output = super().call_module(target, args, kwargs)
        if target in self.to_compile:
            self.backend.install(self.split, target, self.fetch_attr(target), list(args))
        return output


class _SaveOnFirstCall:
    """Runs the split graph; at its first real call, records the argument plan and saves it all."""

    def __init__(self, split: fx.GraphModule, pristine: fx.GraphModule, infos: dict, backend: SplittingBackend):
        self.split, self.pristine, self.infos, self.backend = split, pristine, infos, backend

    def __call__(self, *args: Any) -> Any:
        if self.pristine is not None:
            backend, self.pristine, pristine = self.backend, None, self.pristine
            plan = ArgPlan.record(args, backend.model, backend.current_inputs) if backend.model is not None else None
            if plan is not None:
                backend.aot.save_graph(pristine, self.infos, plan, list(backend.compile_sizes))
        return self.split(*args)


class _SavedForward:
    """forward(input_ids, positions) over a restored split graph, arguments placed by the plan."""

    def __init__(self, split: fx.GraphModule, plan: ArgPlan, model: torch.nn.Module):
        self.split, self.plan = split, plan
        self.args = plan.bind(model)
        self.dynamic = [(i, kind, index) for i, (kind, index) in enumerate(plan.entries) if kind in ("input", "size")]

    def __call__(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        inputs = (input_ids, positions)
        args = list(self.args)
        for i, kind, index in self.dynamic:
            args[i] = inputs[index] if kind == "input" else inputs[index].shape[0]
        return self.split(*args)[0]
