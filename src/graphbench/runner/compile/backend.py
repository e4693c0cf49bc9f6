"""graphbench's torch.compile backend: split the FX graph at attention, compile each piece with Inductor.

Dynamo hands the backend one graph with the token dimension symbolic. The backend splits it at
every splitting op, runs the split graph once on fake inputs to learn each piece's inputs, and
compiles every piece that is not a splitting op with Inductor for a dynamic token count. Pieces
also get concrete-shape variants (autotuned) for `compile_sizes`, compiled during start-up.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
import torch.fx as fx

from graphbench.config.modes import CUDAGraphMode
from graphbench.runner.compile.split import Piece, split_graph
from graphbench.runner.cudagraph import CUDAGraphWrapper


@dataclass
class CompileStats:
    """Where compile time went (seconds) and what was compiled."""

    inductor_seconds: float = 0.0
    static_inductor_seconds: float = 0.0
    num_pieces: int = 0
    num_compiled_pieces: int = 0
    num_static_variants: int = 0
    piece_names: list[str] = field(default_factory=list)


def _size_getter(fake_args: list[Any]) -> Callable[[tuple], int] | None:
    """How to read the runtime token count from a piece's arguments."""
    for i, arg in enumerate(fake_args):
        if isinstance(arg, torch.SymInt):
            return lambda args, i=i: int(args[i])
    for i, arg in enumerate(fake_args):
        if isinstance(arg, torch.Tensor) and arg.dim() > 0 and isinstance(arg.shape[0], torch.SymInt):
            return lambda args, i=i: args[i].shape[0]
    return None


def _inductor_compile(graph: fx.GraphModule, example_args: list[Any], patches: dict[str, Any]) -> Callable:
    """Inductor-compile one piece; the callable returns exactly what the piece's graph returns."""
    import copy

    from torch._inductor.compile_fx import compile_fx

    output = next(n for n in graph.graph.nodes if n.op == "output")
    returns_tuple = isinstance(output.args[0], (tuple, list))
    # compile_fx may rewrite the graph it is given; the piece is compiled again for compile_sizes.
    compiled = compile_fx(copy.deepcopy(graph), example_args, config_patches=patches)
    if returns_tuple:
        return compiled

    def single_output(*args: Any) -> Any:
        # Inductor may box a single output in a list/tuple, depending on how it was called.
        out = compiled(*args)
        return out[0] if isinstance(out, (tuple, list)) else out

    return single_output


class PieceRunner:
    """Runs one compiled piece: the concrete-size variant when there is one, else the dynamic code."""

    def __init__(self, name: str, graph: fx.GraphModule, dynamic_fn: Callable, size_of: Callable | None,
                 compile_sizes: list[int], autotune: bool, stats: CompileStats):
        self.name, self.graph, self.dynamic_fn, self.size_of = name, graph, dynamic_fn, size_of
        self.compile_sizes = set(compile_sizes) if size_of is not None else set()
        self.autotune, self.stats = autotune, stats
        self.static_fns: dict[int, Callable] = {}
        self.allow_compile = True  # switched off once start-up is over

    def __call__(self, *args: Any) -> Any:
        if self.compile_sizes:
            size = self.size_of(args)
            if size in self.compile_sizes:
                fn = self.static_fns.get(size)
                if fn is None:
                    fn = self._compile_static(size, args)
                return fn(*args)
        return self.dynamic_fn(*args)

    def _compile_static(self, size: int, args: tuple) -> Callable:
        if not self.allow_compile:
            raise RuntimeError(f"{self.name}: size {size} was not compiled at start-up")
        started = time.perf_counter()
        patches = {"max_autotune": True, "coordinate_descent_tuning": True} if self.autotune else {}
        fn = _inductor_compile(self.graph, list(args), patches)
        self.static_fns[size] = fn
        self.stats.static_inductor_seconds += time.perf_counter() - started
        self.stats.num_static_variants += 1
        return fn


class SplittingBackend:
    """The callable handed to torch.compile(backend=...)."""

    def __init__(self, splitting_ops: list[str], compile_sizes: list[int], autotune: bool,
                 piecewise_graphs: bool, artefact_dir: Path | None):
        self.splitting_ops = splitting_ops
        self.compile_sizes = compile_sizes
        self.autotune = autotune
        self.piecewise_graphs = piecewise_graphs
        self.artefact_dir = artefact_dir
        self.stats = CompileStats()
        self.runners: list[PieceRunner] = []
        self.wrappers: list[CUDAGraphWrapper] = []
        self.split_module: fx.GraphModule | None = None

    def __call__(self, gm: fx.GraphModule, example_inputs: list[Any]) -> Callable:
        split, pieces = split_graph(gm, self.splitting_ops)
        self.split_module = split
        self.stats.num_pieces = len(pieces)
        self.stats.piece_names = [p.name for p in pieces]
        to_compile = {p.name for p in pieces if not p.is_splitting_op}
        _PieceCompiler(split, to_compile, self).run(*example_inputs)
        self._save_artefacts(gm, split, pieces)
        return split

    def install(self, split: fx.GraphModule, name: str, graph: fx.GraphModule, fake_args: list[Any]) -> None:
        started = time.perf_counter()
        dynamic_fn = _inductor_compile(graph, fake_args, {})
        self.stats.inductor_seconds += time.perf_counter() - started
        self.stats.num_compiled_pieces += 1
        runner = PieceRunner(name, graph, dynamic_fn, _size_getter(fake_args), self.compile_sizes,
                             self.autotune, self.stats)
        self.runners.append(runner)
        target: Callable = runner
        if self.piecewise_graphs:
            wrapper = CUDAGraphWrapper(runner, CUDAGraphMode.PIECEWISE, name)
            self.wrappers.append(wrapper)
            target = wrapper
        split.__dict__[name] = target  # shadows the submodule: the split graph's code calls it

    def finish_startup(self) -> None:
        """No compilation after start-up: a missing variant is then an error, not a stall."""
        for runner in self.runners:
            runner.allow_compile = False

    def _save_artefacts(self, gm: fx.GraphModule, split: fx.GraphModule, pieces: list[Piece]) -> None:
        if self.artefact_dir is None:
            return
        self.artefact_dir.mkdir(parents=True, exist_ok=True)
        (self.artefact_dir / "traced_graph.py").write_text(gm.code)
        lines = [f"# {p.name}: {'splitting op' if p.is_splitting_op else 'compiled by Inductor'}" for p in pieces]
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
