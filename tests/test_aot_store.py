"""The saved split graph (runner/compile/aot_store.py): pieces of one key are pickled, and loaded, once,
and the loaded split graph still calls every piece by its own name."""

from __future__ import annotations

import pytest
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


@pytest.mark.parametrize("version, release", [
    ("2.8.0", (2, 8)), ("2.11.0+cu130", (2, 11)), ("2.8.0rc1", (2, 8)), ("2.8.0.dev20250601+cu128", (2, 8)),
    ("2.8.0a0+5228986c39.nv25.05", (2, 8)), ("2.7.1", (2, 7)), ("10.0", (10, 0)), ("unknown", (0, 0))])
def test_a_pre_release_torch_is_its_release(version, release):
    """A 2.8 pre-release or NGC build has standalone_compile: its warm start loads (PEP 440 orders it before 2.8)."""
    from graphbench.runner.compile import aot_store

    assert aot_store.release_of(version) == release


def test_standalone_is_read_from_the_release(monkeypatch):
    from graphbench.runner.compile import aot_store

    for version, available in [("2.8.0rc1", True), ("2.8.0a0+5228986c39.nv25.05", True), ("2.7.1", False)]:
        monkeypatch.setattr(aot_store.torch, "__version__", version)
        assert aot_store.standalone_available() is available
