"""Which pieces run as traced (compile/pieces.runs_as_traced), read from the graph alone, and when a
fixed-size variant keeps graphbench's ops (own_kernels_at)."""

from __future__ import annotations

import operator
import pickle

import torch
import torch.fx as fx

from graphbench.runner import linear
from graphbench.runner.compile.pieces import linears_as_matmuls, own_kernels_at, runs_as_traced


def piece(*, add_tensors: bool = False) -> fx.GraphModule:
    """x -> linear op -> add_rmsnorm_gate_up op -> its items -> a view (+ a tensor add)."""
    graph = fx.Graph()
    x, r, nw, w1, w2 = (graph.placeholder(n) for n in ("x", "r", "nw", "w1", "w2"))
    y = graph.call_function(linear.linear_op, (x, w1, None))
    both = graph.call_function(linear.add_rmsnorm_gate_up_op, (y, r, nw, 1e-5, w2))
    hidden = graph.call_function(operator.getitem, (both, 0))
    residual = graph.call_function(operator.getitem, (both, 1))
    out = graph.call_method("view", (hidden, -1))
    if add_tensors:
        out = graph.call_function(operator.add, (out, out))
    graph.output((out, residual))
    return fx.GraphModule(torch.nn.Module(), graph)


def test_graphbench_ops_views_and_items_run_as_traced_even_when_loaded_from_disk():
    gm = piece()
    assert runs_as_traced(gm)
    assert runs_as_traced(pickle.loads(pickle.dumps(gm)))  # no traced values needed


def test_a_tensor_add_or_torch_ops_go_to_inductor():
    assert not runs_as_traced(piece(add_tensors=True))
    assert not runs_as_traced(linears_as_matmuls(piece()))  # what model.kernels = torch traces


def test_a_variant_keeps_the_ops_where_every_projection_runs_graphbench_kernels(monkeypatch):
    args = (torch.zeros(8, 16), torch.zeros(8, 32), torch.ones(32), torch.zeros(32, 16), torch.zeros(64, 32))
    assert not own_kernels_at(piece(), args, 8)  # on the CPU every projection is torch's F.linear
    shapes = []
    monkeypatch.setattr(linear, "runs_own_kernel", lambda rows, w, op="linear": shapes.append((rows, tuple(w.shape), op)) or True)
    assert own_kernels_at(piece(), args, 8) and shapes == [(8, (32, 16), "linear"), (8, (64, 32), "gate_up")]
    monkeypatch.setattr(linear, "runs_own_kernel", lambda rows, w, op="linear": op != "gate_up")  # gate/up: cuBLAS
    assert not own_kernels_at(piece(), args, 8)
