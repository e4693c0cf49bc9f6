"""Compiled pieces: Inductor compilation of one piece, its runner, and how pieces are told apart."""

from __future__ import annotations

import hashlib
import logging
import operator
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import torch
import torch.fx as fx

from graphbench.runner.compile.aot_store import AotStore, standalone_available
from graphbench.runner.compile.compile_stack import import_compile_stack

log = logging.getLogger("graphbench.compile")



@dataclass
class CompileStats:
    """Where compile time went (seconds) and what was compiled."""

    inductor_seconds: float = 0.0
    static_inductor_seconds: float = 0.0
    num_pieces: int = 0
    num_compiled_pieces: int = 0  # the pieces between splitting ops (each run by a PieceRunner)
    num_distinct_pieces: int = 0  # compiled by Inductor; identical layer bodies share one
    num_traced_pieces: int = 0  # of num_compiled_pieces: graphbench ops only, run as traced (runs_as_traced)
    load_seconds: float = 0.0  # warm start: loading the saved split graph and pieces
    import_seconds: float = 0.0  # warm start: importing the compile stack to load Inductor's pieces
    variant_import_seconds: float = 0.0  # importing it for a compile_sizes variant (a warm start of traced pieces)
    num_static_variants: int = 0
    piece_names: list[str] = field(default_factory=list)


def size_spec(fake_args: list[Any]) -> list | None:
    """Where a piece's runtime token count is: ["symint", i] or ["dim0", i] (JSON-able), or None."""
    for i, arg in enumerate(fake_args):
        if isinstance(arg, torch.SymInt):
            return ["symint", i]
    for i, arg in enumerate(fake_args):
        if isinstance(arg, torch.Tensor) and arg.dim() > 0 and isinstance(arg.shape[0], torch.SymInt):
            return ["dim0", i]
    return None


def size_getter(spec: list | None) -> Callable[[tuple], int] | None:
    """args -> the runtime token count, read where size_spec says it is (None: the piece has none)."""
    if spec is None:
        return None
    kind, i = spec
    return (lambda args: int(args[i])) if kind == "symint" else (lambda args: args[i].shape[0])


def _returns_single(graph: fx.GraphModule) -> bool:
    output = next(n for n in graph.graph.nodes if n.op == "output")
    return not isinstance(output.args[0], (tuple, list))


def _unbox(compiled: Callable, single: bool) -> Callable:
    """Make the callable return exactly what the piece's graph returns (Inductor may box one output)."""
    if not single:
        return compiled

    def single_output(*args: Any) -> Any:
        out = compiled(*args)
        return out[0] if isinstance(out, (tuple, list)) else out

    return single_output


def unbox_for(graph: fx.GraphModule, compiled: Callable) -> Callable:
    """`compiled` (Inductor's code for graph, fresh or loaded) returning exactly what graph returns."""
    return _unbox(compiled, _returns_single(graph))


def inductor_compile(graph: fx.GraphModule, example_args: list[Any], patches: dict[str, Any],
                      dynamic: bool) -> tuple[Callable, Any]:
    """Inductor-compile one piece -> (callable, saveable artefact or None).

    dynamic: symbolic token count from the ambient trace; else specialised to example_args.
    """
    import copy

    global _standalone_failed
    single = _returns_single(graph)
    if standalone_available() and not _standalone_failed:
        try:
            artifact = torch._inductor.standalone_compile(
                copy.deepcopy(graph), example_args,  # it may rewrite the graph; the piece is compiled again
                dynamic_shapes="from_tracing_context" if dynamic else "from_example_inputs",
                options={"config_patches": patches})
            return _unbox(artifact, single), artifact
        except Exception as exc:  # a torch without a working standalone path: compile without saving
            _standalone_failed = True
            log.warning("saving compiled pieces is off (standalone_compile failed: %s: %s)", type(exc).__name__, str(exc))
    from torch._inductor.compile_fx import compile_fx

    return _unbox(compile_fx(copy.deepcopy(graph), example_args, config_patches=patches), single), None


_standalone_failed = False


# Nodes that launch no kernel: views, splits, allocations without a fill, sizes, and items of what returns
# several values (read from the graph alone: a graph loaded from disk has no traced values). Arithmetic
# is left out (`+` on sizes and on tensors is one operator): a piece holding any goes to Inductor.
_NO_KERNEL_METHODS = frozenset({"view", "split", "chunk", "new_empty", "size", "unsqueeze", "squeeze", "narrow"})
_SEVERAL_VALUES_METHODS = frozenset({"split", "chunk"})


def runs_as_traced(graph: fx.GraphModule) -> bool:
    """Whether the piece's only kernels are graphbench's ops (opaque to Inductor, which would emit the same
    calls in the same order): every other node is a view, a split, an allocation, a size or an item. Such
    a piece runs as traced: no Inductor at a cold start, and nothing to load at a warm one."""
    for node in graph.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if node.op == "call_method" and node.target in _NO_KERNEL_METHODS:
            continue
        if node.op == "call_function":
            schema = getattr(node.target, "_schema", None)
            if schema is not None and (schema.name.startswith("graphbench::") or schema.name == "aten::sym_size"):
                continue
            if node.target is operator.getitem and _returns_several(node.args[0]):
                continue
        return False
    return True


def _returns_several(node: Any) -> bool:
    """Whether a node's value is several values (an op returning a tuple, a split): its items are views."""
    if not isinstance(node, fx.Node):
        return False
    if node.op == "call_method":
        return node.target in _SEVERAL_VALUES_METHODS
    schema = getattr(node.target, "_schema", None)
    return node.op == "call_function" and schema is not None and len(schema.returns) > 1


def piece_key(graph: fx.GraphModule, fake_args: list[Any]) -> str | None:
    """Structural identity of a piece: same ops on same-shaped inputs compile to the same code.

    The layer bodies of a decoder are identical pieces (weights are inputs, not constants), so
    each distinct piece is compiled once. None when the piece holds constants (not shareable).
    """
    index: dict[fx.Node, int] = {}
    parts = []
    for i, node in enumerate(graph.graph.nodes):
        if node.op == "get_attr":
            return None
        index[node] = i
        args = fx.node.map_arg((node.args, node.kwargs), lambda n: f"%{index[n]}")
        parts.append(f"{node.op}|{node.target if node.op != 'placeholder' else ''}|{args}")
    for arg in fake_args:
        if isinstance(arg, torch.Tensor):
            parts.append(f"T{tuple(map(str, arg.shape))}{tuple(map(str, arg.stride()))}{arg.dtype}{arg.device}")
        else:
            parts.append(f"{type(arg).__name__}:{arg}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


class PieceOwner(Protocol):
    """What a PieceRunner needs of the backend that made it (backend.SplittingBackend): the sizes to
    compile variants for and how, the variants compiled so far by piece key, where to save them and
    count their seconds."""

    compile_sizes: list[int]
    autotune: bool
    aot: AotStore | None
    stats: CompileStats
    static_by_key: dict[tuple[str, int], Callable]


class PieceRunner:
    """Runs one compiled piece: the concrete-size variant when there is one, else the dynamic code."""

    def __init__(self, name: str, graph: fx.GraphModule, dynamic_fn: Callable, size_of: Callable | None,
                 backend: PieceOwner, key: str | None):
        self.name, self.graph, self.dynamic_fn, self.size_of = name, graph, dynamic_fn, size_of
        self.compile_sizes = set(backend.compile_sizes) if size_of is not None else set()
        self.static_sizes = set(self.compile_sizes)  # the sizes that run their variant (variant_choice.py)
        self.backend, self.key = backend, key
        self.static_fns: dict[int, Callable] = {}
        self.allow_compile = True  # switched off once start-up is over

    def __call__(self, *args: Any) -> Any:
        if self.static_sizes:
            size = self.size_of(args)
            if size in self.static_sizes:
                fn = self.static_fns.get(size)
                if fn is None:
                    fn = self._compile_static(size, args)
                return fn(*args)
        return self.dynamic_fn(*args)

    def _compile_static(self, size: int, args: tuple) -> Callable:
        if not self.allow_compile:
            raise RuntimeError(f"{self.name}: size {size} was not compiled at start-up")
        backend = self.backend
        shared = backend.static_by_key.get((self.key, size)) if self.key else None
        if shared is not None:
            self.static_fns[size] = shared
            return shared
        # Inductor gets the matmuls only where a projection would run cuBLAS at this size: where graphbench's
        # kernels run every one (the GEMV at one row, the skinny GEMM's measured blocks at 2..64) the variant
        # keeps its ops. The autotuned variants lost to the dynamic pieces when those ran cuBLAS (10-18% at
        # batch 2-8, benchmarks/RESULTS.md, 2026-11-30, 8bb0ab8), and the skinny GEMM is faster than cuBLAS in the
        # step. compilation.static_variants = always: the matmuls always (vLLM's -O3).
        keep_ops = size == 1 or (backend.static_variants != "always" and own_kernels_at(self.graph, args, size))
        graph = self.graph if keep_ops else linears_as_matmuls(self.graph)
        if runs_as_traced(graph):
            # Inductor would emit the same calls: the variant is the traced piece (nothing compiled or saved)
            self.static_fns[size] = graph
            return graph
        # a warm start of traced pieces has not imported the compile stack: timed apart (compile_stack.py)
        backend.stats.variant_import_seconds += import_compile_stack()
        started = time.perf_counter()
        # GEMM autotuning only: pointwise autotuning and coordinate descent kept -O3's start-up over 200 s on
        # an H200. Epilogue fusions are not benchmarked either (which did not measurably cut compile_sizes:
        # 160 against 142 s, benchmarks/RESULTS.md, 2026-11-29, fd8c381; the seconds were the recompiles below).
        patches = {"max_autotune_gemm": True, "benchmark_epilogue_fusion": False} if backend.autotune else {}
        if backend.autotune:
            # With Inductor's compile workers up, each GEMM's candidate kernels were precompiled in the
            # worker processes and then compiled again, one by one, in the main thread as they were
            # benchmarked: -O3's compile_sizes took 96 s against 37 s on an H200 (benchmarks/RESULTS.md,
            # 2026-11-30, db504fa). One compile thread keeps the worker pool out of this compile: Inductor
            # then precompiles the candidates in threads of this process, where the benchmark finds them.
            # (The variant's own kernels then compile one by one in this process too: ~27 of the 37 s.)
            patches["compile_threads"] = 1
        fn, artifact = inductor_compile(graph, list(args), patches, dynamic=False)
        self.static_fns[size] = fn
        if self.key:
            backend.static_by_key[(self.key, size)] = fn
            if backend.aot is not None:
                backend.aot.save_piece(artifact, self.key, size)
        backend.stats.static_inductor_seconds += time.perf_counter() - started
        backend.stats.num_static_variants += 1
        return fn


def own_kernels_at(graph: fx.GraphModule, args: tuple, rows: int) -> bool:
    """Whether every projection of the piece (`graphbench::linear`, `add_rmsnorm_linear`,
    `add_rmsnorm_gate_up`) runs one of graphbench's kernels at this row count: then a fixed-size variant
    keeps graphbench's ops. args: the piece's arguments (its weights among them)."""
    from graphbench.runner import linear as ops

    weight_index = {ops.linear_op: 1, ops.add_rmsnorm_linear_op: 4, ops.add_rmsnorm_gate_up_op: 4}
    value_of = {node: arg for node, arg in zip((n for n in graph.graph.nodes if n.op == "placeholder"), args)}
    for node in graph.graph.nodes:
        if node.op == "call_function" and node.target in weight_index:
            weight = value_of.get(node.args[weight_index[node.target]])
            op = "gate_up" if node.target is ops.add_rmsnorm_gate_up_op else "linear"  # its own kernel choices
            if not isinstance(weight, torch.Tensor) or not ops.runs_own_kernel(rows, weight, op):
                return False
    return True


def linears_as_matmuls(graph: fx.GraphModule) -> fx.GraphModule:
    """A copy of the piece with each `graphbench::linear` / `add_rmsnorm_linear` / `add_rmsnorm_gate_up` /
    `embed_rmsnorm` / `add_rmsnorm` call (opaque: they pick the one-row GEMV at run time) turned back into torch ops, for a variant
    compiled for a fixed multi-row size: there Inductor sees the matmuls, fuses around them and
    autotunes them."""
    import copy

    from graphbench.runner import linear as ops
    from graphbench.runner import norms

    # op -> the plain-torch function taking the same arguments
    plain = {ops.linear_op: torch.nn.functional.linear,
             ops.add_rmsnorm_linear_op: ops.add_rmsnorm_matmul,
             ops.add_rmsnorm_gate_up_op: ops.add_rmsnorm_gate_up_matmul,
             norms.embed_rmsnorm_op: norms.embed_rmsnorm_torch, norms.add_rmsnorm_op: norms.add_rmsnorm_torch}
    rewritten = copy.deepcopy(graph)
    nodes = [n for n in rewritten.graph.nodes if n.op == "call_function" and n.target in plain]
    for node in nodes:
        node.target = plain[node.target]
    if nodes:
        rewritten.recompile()
    return rewritten
