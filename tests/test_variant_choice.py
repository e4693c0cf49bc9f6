"""-O3's measured choice of compile_sizes variants (runner/compile/variant_choice.py): the rule, when it
is skipped, and the switch between a size's variants and the dynamic pieces. The timing itself needs
CUDA graphs (tests/gpu/test_variant_choice_gpu.py)."""

from __future__ import annotations

import pytest
import torch
import torch.fx as fx

from graphbench.errors import GraphbenchError
from graphbench.runner.compile import pieces
from graphbench.runner.compile.splitting import SplittingBackend
from graphbench.runner.compile.variant_choice import MIN_GAIN, SizeTiming, VariantChoice, choose, skip_reason


@pytest.mark.parametrize("static_ms, dynamic_ms, kept", [
    (1.318, 1.124, "dynamic"),  # H200, batch 2 (benchmarks/RESULTS.md, 2026-11-30, 8bb0ab8): the variant is slower
    (1.000, 1.000, "dynamic"),  # a tie keeps the dynamic code
    (1.000, 1.005, "dynamic"),  # 0.5% faster: within MIN_GAIN
    (1.000, 1.0102, "static"),  # just over 1% faster
    (0.900, 1.000, "static"),
])
def test_a_variant_is_kept_only_when_it_is_clearly_faster(static_ms, dynamic_ms, kept):
    assert MIN_GAIN == 0.01
    assert choose(static_ms, dynamic_ms) == kept


def test_min_gain_is_a_parameter():
    assert choose(0.99, 1.0, min_gain=0.0) == "static"
    assert choose(0.99, 1.0, min_gain=0.02) == "dynamic"


def test_when_the_variants_are_kept_unmeasured():
    assert skip_reason(device_type="cuda", tp_size=1) == ""
    assert skip_reason(device_type="cpu", tp_size=1) == "timing needs CUDA graphs; running on cpu"
    assert skip_reason(device_type="cuda", tp_size=2) == "tensor parallel (2 ranks): the ranks' choices could differ"
    assert skip_reason(device_type="cuda", tp_size=1, policy="always") == "compilation.static_variants = always"


def test_the_policy_is_a_validated_hashed_config_field():
    from graphbench.config import CompilationConfig

    assert CompilationConfig().static_variants == "measure"
    assert CompilationConfig(static_variants="always").compute_hash() != CompilationConfig().compute_hash()
    with pytest.raises(GraphbenchError, match="static_variants"):
        CompilationConfig(static_variants="sometimes")


def test_choice_record_lists_kept_sizes():
    choice = VariantChoice("measured", seconds=0.25, sizes=[
        SizeTiming(1, 0.95, 0.96, "dynamic"), SizeTiming(2, 1.0, 1.2, "static"), SizeTiming(4, 1.3, 1.1, "dynamic")])
    assert choice.to_dict() == {"policy": "measured", "note": "", "seconds": 0.25, "sizes": [
        {"size": 1, "static_ms": 0.95, "dynamic_ms": 0.96, "kept": "dynamic"},
        {"size": 2, "static_ms": 1.0, "dynamic_ms": 1.2, "kept": "static"},
        {"size": 4, "static_ms": 1.3, "dynamic_ms": 1.1, "kept": "dynamic"}], "piece_sizes": []}


def test_a_size_switches_between_its_variant_and_the_dynamic_piece(monkeypatch):
    """The static variant (here: x * 2 + 1 compiled for size 4) and the dynamic code (here: marked x * 10)
    are told apart by their results."""
    monkeypatch.setattr(pieces, "inductor_compile", lambda graph, args, patches, dynamic: (graph, None))
    backend = SplittingBackend([], [4], autotune=False, piecewise_graphs=False, artefact_dir=None)
    graph = fx.symbolic_trace(lambda x: x * 2 + 1)
    runner = pieces.PieceRunner("piece_0", graph, lambda x: x * 10, lambda args: args[0].shape[0], backend, key="k")
    backend.runners.append(runner)
    other = pieces.PieceRunner("piece_1", graph, lambda x: x * 10, None, backend, key=None)  # no size: no variants
    backend.runners.append(other)
    four, three = torch.arange(4.0), torch.arange(3.0)
    assert torch.equal(runner(four), four * 2 + 1)  # compiles and runs the size-4 variant
    assert torch.equal(runner(three), three * 10)  # not a compile size: dynamic
    backend.use_static_size(4, False)
    assert runner.static_sizes == set() and torch.equal(runner(four), four * 10)
    backend.use_static_size(4, True)
    assert runner.static_sizes == {4} and torch.equal(runner(four), four * 2 + 1)
    backend.use_static_size(8, True)  # not a compile size of any runner: nothing to switch on
    assert runner.static_sizes == {4} and other.static_sizes == set()


def test_run_prints_the_choice_in_one_line():
    from graphbench.cli.run import variants_line

    assert variants_line({}) == ""
    assert variants_line(VariantChoice("none").to_dict()) == ""
    assert variants_line(VariantChoice("always", note="timing needs CUDA graphs; running on cpu").to_dict()) == (
        "compile_sizes variants: all kept, unmeasured (timing needs CUDA graphs; running on cpu)")
    measured = VariantChoice("measured", sizes=[SizeTiming(1, 0.951, 0.952, "dynamic"), SizeTiming(2, 1.0, 1.2, "static")])
    assert variants_line(measured.to_dict()) == (
        "compile_sizes variants (step with variants vs dynamic pieces), kept: "
        "1: dynamic (0.951 vs 0.952 ms), 2: static (1.000 vs 1.200 ms)")
    pieces = VariantChoice("measured", sizes=[SizeTiming(1, 0.951, 0.952, "dynamic")], piece_sizes=[2, 4])
    assert variants_line(pieces.to_dict()) == (
        "compile_sizes variants (step with variants vs dynamic pieces), kept: 1: dynamic (0.951 vs 0.952 ms), "
        "2: the traced pieces (graphbench's kernels), 4: the traced pieces (graphbench's kernels)")


def test_sizes_whose_variants_are_the_pieces_are_not_timed(monkeypatch):
    """Every variant of sizes 2 and 4 is its traced piece: nothing to time (no CUDA needed here), the
    dynamic code runs them, and the record lists them apart."""
    from types import SimpleNamespace

    from graphbench.runner.compile import variant_choice

    backend = SplittingBackend([], [2, 4], autotune=False, piecewise_graphs=False, artefact_dir=None)
    graph = fx.symbolic_trace(lambda x: x + 1)
    runner = pieces.PieceRunner("piece_0", graph, graph, lambda args: args[0].shape[0], backend, key="k")
    runner.static_fns = {2: graph, 4: graph}
    backend.runners.append(runner)
    engine = SimpleNamespace(device=torch.device("cuda"), compiled=SimpleNamespace(backend=backend),
                             config=SimpleNamespace(compilation=SimpleNamespace(compile_sizes=[2, 4], static_variants="measure"),
                                                    parallel=SimpleNamespace(tensor_parallel_size=1)))
    monkeypatch.setattr(variant_choice, "_time_size", lambda engine, size: pytest.fail(f"timed size {size}"))
    choice = variant_choice.choose_static_variants(engine)
    assert choice.policy == "measured" and choice.sizes == [] and choice.piece_sizes == [2, 4]
    assert runner.static_sizes == set()
    runner.static_fns[4] = lambda x: x  # a compiled variant: that size is timed
    with pytest.raises(pytest.fail.Exception, match="timed size 4"):
        variant_choice.choose_static_variants(engine)
