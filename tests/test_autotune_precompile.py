"""How -O3's autotuned compile_sizes variants ask Inductor to compile (runner/compile/pieces.py).

On the H200 the GEMM candidates precompiled in Inductor's worker processes were compiled again one by
one in the main thread while being benchmarked (compile_sizes 96 s against 37 s; benchmarks/RESULTS.md, 2026-11-30,
db504fa). The
variants therefore compile with one Inductor compile thread.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from graphbench.runner.compile import pieces
from graphbench.runner.compile.splitting import SplittingBackend


def _runner(autotune: bool) -> pieces.PieceRunner:
    graph = fx.symbolic_trace(lambda x: x * 2 + 1)
    backend = SplittingBackend([], [4], autotune=autotune, piecewise_graphs=False, artefact_dir=None)
    return pieces.PieceRunner("piece_0", graph, graph, lambda args: args[0].shape[0], backend, key="k")


def _patches_asked_for(monkeypatch, autotune: bool) -> dict:
    asked = {}

    def fake_compile(graph, example_args, patches, dynamic):
        asked.update(patches, dynamic=dynamic)
        return graph, None

    monkeypatch.setattr(pieces, "inductor_compile", fake_compile)
    runner = _runner(autotune)
    x = torch.arange(4.0)
    assert torch.equal(runner(x), x * 2 + 1)  # size 4 is a compile size: its static variant ran
    assert set(runner.static_fns) == {4}
    return asked


def test_autotuned_variants_keep_inductors_worker_pool_out(monkeypatch):
    asked = _patches_asked_for(monkeypatch, autotune=True)
    assert asked["max_autotune_gemm"] is True and asked["dynamic"] is False
    assert asked.get("compile_threads") == 1


def test_variants_without_autotuning_compile_as_inductor_does(monkeypatch):
    asked = _patches_asked_for(monkeypatch, autotune=False)
    assert asked == {"dynamic": False}
