"""The saved split graph (runner/compile/aot_store.py): pieces of one key are pickled, and loaded, once,
and the loaded split graph still calls every piece by its own name."""

from __future__ import annotations

import torch
import torch.fx as fx

from graphbench.runner.compile.aot_store import AotStore, ArgPlan


class Body(torch.nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = Body(2.0), Body(2.0), Body(3.0)

    def forward(self, x):
        return self.c(self.b(self.a(x)) + 1)


class KeepBodies(fx.Tracer):
    def is_leaf_module(self, m, name):
        return isinstance(m, Body)


def test_pieces_of_one_key_are_one_graph_each_called_by_its_name(tmp_path):
    model = Model()
    split = fx.GraphModule(model, KeepBodies().trace(model))
    for name in ("a", "b", "c"):
        split._modules[name] = fx.symbolic_trace(getattr(model, name))
    pieces = {"a": {"key": "k2", "size": None, "traced": True}, "b": {"key": "k2", "size": None, "traced": True},
              "c": {"key": "k3", "size": None, "traced": True}}
    store = AotStore(tmp_path)
    store.save_graph(split, pieces, ArgPlan([("input", 0)]), [])
    loaded, infos, plan, sizes = store.load_graph()
    assert loaded.a is loaded.b and loaded.a is not loaded.c
    assert infos == pieces and plan.entries == [("input", 0)] and sizes == []
    called = [n.target for n in loaded.graph.nodes if n.op == "call_module"]
    assert called == ["a", "b", "c"]  # each by its own name, though a and b are one graph
    x = torch.arange(4.0)
    assert torch.equal(loaded(x), (x * 2 * 2 + 1) * 3)
    # a runner shadowing one name (as the backend installs them) is the one the split graph calls
    seen = []
    loaded.__dict__["b"] = lambda t: seen.append("b") or t * 2
    loaded(x)
    assert seen == ["b"]
