"""Two ladders, one per phase (ladders/phases.py): the token ladder's rule, how a config resolves it, the
graphs each layout records, how the dispatcher pads each phase, and what each server is given."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from graphbench.config.modes import CUDAGraphMode
from graphbench.errors import GraphbenchError
from graphbench.ladders.emit import phase_server_config
from graphbench.ladders.graphs import num_graphs
from graphbench.ladders.phases import decode_ladder, parse_mixed_option, resolve_mixed_ladder, token_ladder
from graphbench.runner.dispatcher import CudagraphDispatcher
from graphbench.runner.scheduler import BatchDescriptor

FULL, PIECEWISE, NONE = CUDAGraphMode.FULL, CUDAGraphMode.PIECEWISE, CUDAGraphMode.NONE
DECODE = [1, 2, 4, 8, 16, 24, 32]  # max_num_seqs 32's default ladder, capped at a decode step's 32 tokens
MIXED = [4, 8, 12, 16, 20, 24, 28, 32, 48, 64, 80, 96]  # token_ladder(100)


def test_the_token_ladder_is_sglangs_default_up_to_the_budget():
    full = token_ladder(4096)
    assert len(full) == 50 and full[:9] == (4, 8, 12, 16, 20, 24, 28, 32, 48) and full[-3:] == (3584, 3840, 4096)
    assert (256, 288, 512, 576, 1024, 1280) == tuple(s for s in full if s in (256, 288, 512, 576, 1024, 1280))
    assert token_ladder(8192) == full  # SGLang's top is 4096 tokens
    assert list(token_ladder(100)) == MIXED and token_ladder(3) == ()
    with pytest.raises(GraphbenchError):
        token_ladder(0)


def test_a_config_value_resolves_to_a_mixed_ladder():
    assert resolve_mixed_ladder(None, 2048).sizes is None and resolve_mixed_ladder("shared", 2048).layout == "shared"
    assert resolve_mixed_ladder("tokens", 100).sizes == tuple(MIXED)
    assert resolve_mixed_ladder("none", 2048).sizes == () and resolve_mixed_ladder([], 2048).layout == "split"
    got = resolve_mixed_ladder([64, 8, 8, 4096, 16], 2048)
    assert got.sizes == (8, 16, 64) and got.warnings == ("mixed capture sizes above max_num_batched_tokens 2048 "
                                                         "dropped: 4096",)
    for bad in ("token", [0], [True], 3, [1.5]):
        with pytest.raises(GraphbenchError):
            resolve_mixed_ladder(bad, 2048)
    assert parse_mixed_option(" tokens ") == "tokens" and parse_mixed_option("4, 8,16") == [4, 8, 16]
    with pytest.raises(GraphbenchError, match="--mixed-ladder"):
        parse_mixed_option("4,x")


def test_the_decode_ladder_keeps_the_rungs_a_decode_step_can_use():
    shared = (1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64)
    assert decode_ladder(shared, 32) == tuple(DECODE)
    assert decode_ladder((2, 4, 6, 8, 10, 16, 32, 64), 8, 2) == (2, 4, 6, 8, 10, 16)  # multiples of 1 + k, <= 16


def test_graphs_per_mode_for_two_ladders():
    union = sorted(set(DECODE) | set(MIXED))  # 14 sizes: 1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 48, ...
    assert len(union) == 14
    counts = {m: num_graphs(m, DECODE, 32, 1, MIXED) for m in CUDAGraphMode}
    assert counts == {NONE: 0, PIECEWISE: 14, FULL: 14, CUDAGraphMode.FULL_DECODE_ONLY: 7,
                      CUDAGraphMode.FULL_AND_PIECEWISE: 12 + 7}
    assert num_graphs("FULL_AND_PIECEWISE", DECODE, 32, 1, []) == 7  # mixed steps eager: decode graphs only
    assert num_graphs("FULL_AND_PIECEWISE", DECODE, 32) == 14  # the one ladder: 7 piecewise + 7 full


def _dispatcher(mode, mixed=MIXED):
    return CudagraphDispatcher(mode, DECODE, 32, 1, mixed_sizes=mixed)


def test_each_phase_pads_to_its_own_ladder():
    d = _dispatcher(CUDAGraphMode.FULL_AND_PIECEWISE)
    assert d.dispatch(BatchDescriptor(3, 3, True)) == (FULL, BatchDescriptor(4, 4, True))  # decode ladder
    assert d.dispatch(BatchDescriptor(17, 17, True)) == (FULL, BatchDescriptor(24, 24, True))
    assert d.dispatch(BatchDescriptor(3, 1, False)) == (PIECEWISE, BatchDescriptor(4, None, False))  # mixed ladder
    assert d.dispatch(BatchDescriptor(33, 2, False)) == (PIECEWISE, BatchDescriptor(48, None, False))
    assert d.dispatch(BatchDescriptor(97, 2, False)) == (NONE, BatchDescriptor(97, 2, False))  # above both
    assert len(d.capture_list()) == 19 and d.max_capture_size == 96
    # FULL: one recording a step, mixed included; a decode step pads to a decode rung, a mixed one to a mixed rung
    full = _dispatcher(FULL)
    assert full.dispatch(BatchDescriptor(9, 9, True)) == (FULL, BatchDescriptor(16, None, False))
    assert full.dispatch(BatchDescriptor(9, 2, False)) == (FULL, BatchDescriptor(12, None, False))
    assert full.dispatch(BatchDescriptor(2, 2, True)) == (FULL, BatchDescriptor(2, None, False))
    assert full.dispatch(BatchDescriptor(50, 3, False)) == (FULL, BatchDescriptor(64, None, False))
    # FULL_DECODE_ONLY: mixed steps eager whatever their ladder; none: mixed eager under FULL_AND_PIECEWISE
    assert _dispatcher(CUDAGraphMode.FULL_DECODE_ONLY).dispatch(BatchDescriptor(8, 2, False))[0] == NONE
    eager_mixed = _dispatcher(CUDAGraphMode.FULL_AND_PIECEWISE, [])
    assert eager_mixed.dispatch(BatchDescriptor(8, 2, False)) == (NONE, BatchDescriptor(8, 2, False))
    assert eager_mixed.dispatch(BatchDescriptor(8, 8, True))[0] == FULL and len(eager_mixed.capture_list()) == 7
    # none under PIECEWISE: decode steps replay their rungs, mixed steps run eager as the layout says
    piecewise_none = _dispatcher(PIECEWISE, [])
    assert piecewise_none.dispatch(BatchDescriptor(10, 2, False)) == (NONE, BatchDescriptor(10, 2, False))
    assert piecewise_none.dispatch(BatchDescriptor(10, 10, True)) == (PIECEWISE, BatchDescriptor(16, None, False))
    # the one ladder (mixed_sizes None) dispatches as before
    one = CudagraphDispatcher(CUDAGraphMode.FULL_AND_PIECEWISE, DECODE, 32, 1)
    assert one.dispatch(BatchDescriptor(3, 1, False)) == (PIECEWISE, BatchDescriptor(4, None, False))
    assert one.dispatch(BatchDescriptor(33, 2, False))[0] == NONE


def test_a_config_with_two_ladders():
    from graphbench.config import load_engine_config

    def resolved(**comp):
        overrides = {"model.model": "tiny-llama", "scheduler.max_num_seqs": 32, "scheduler.max_num_batched_tokens": 100}
        overrides.update({f"compilation.{k}": v for k, v in comp.items()})
        return load_engine_config(overrides=overrides).resolve().compilation

    split = resolved(mixed_capture_sizes="tokens")
    assert split.cudagraph_capture_sizes == DECODE and split.mixed_capture_sizes == MIXED
    assert resolved().mixed_capture_sizes is None and resolved().cudagraph_capture_sizes[-1] == 64
    mine = resolved(mixed_capture_sizes=[8, 200], cudagraph_capture_sizes=[1, 2, 64])
    assert mine.cudagraph_capture_sizes == [1, 2, 64] and mine.mixed_capture_sizes == [8]  # a user's ladder stays
    assert resolved(mixed_capture_sizes="none").mixed_capture_sizes == []
    for bad in ("token", [0], "4,8"):
        with pytest.raises(GraphbenchError, match="mixed_capture_sizes"):
            resolved(mixed_capture_sizes=bad)


def test_each_server_gets_both_ladders_in_its_own_spelling():
    assert phase_server_config(DECODE, MIXED[:4], "sglang") == (
        "--cuda-graph-bs-decode 1 2 4 8 16 24 32 --cuda-graph-max-bs 32 --cuda-graph-bs-prefill 4 8 12 16 "
        "--cuda-graph-max-bs-prefill 16", None)
    assert phase_server_config(DECODE, [], "sglang")[0].endswith("--cuda-graph-max-bs 32 --disable-piecewise-cuda-graph")
    assert phase_server_config([2, 4, 8], [16, 32], "trtllm", decode_query_len=2) == (
        "cuda_graph_config:\n  enable_padding: true\n  batch_sizes: [1, 2, 4]\n"
        "prefill_cuda_graph_backend: piecewise\nprefill_capture_num_tokens: [16, 32]", None)
    text, note = phase_server_config([1, 2, 4], [4, 8], "vllm")
    assert text == '--compilation-config \'{"cudagraph_capture_sizes": [1, 2, 4, 8], "max_cudagraph_capture_size": 8}\''
    assert "one capture ladder" in note and "#32946" in note
    with pytest.raises(GraphbenchError):
        phase_server_config(DECODE, MIXED, "tgi")


def test_the_ladder_command_shows_and_emits_two_ladders():
    from graphbench.cli.main import app

    runner = CliRunner()
    out = runner.invoke(app, ["ladder", "--max-num-seqs", "32", "--mixed-ladder", "tokens",
                              "--max-num-batched-tokens", "100", "--format", "json"])
    assert out.exit_code == 0, out.output
    phases = json.loads(out.stdout)["phases"]
    assert phases["decode"] == DECODE and phases["mixed"] == MIXED
    assert phases["graphs_per_mode"]["split"]["FULL_AND_PIECEWISE"] == 19
    assert phases["graphs_per_mode"]["shared"]["FULL_AND_PIECEWISE"] == 11 + 7  # 11 rungs to 64, 7 of them decode
    emitted = runner.invoke(app, ["ladder", "--max-num-seqs", "32", "--mixed-ladder", "4,8", "--emit", "sglang"])
    assert emitted.stdout.strip() == ("--cuda-graph-bs-decode 1 2 4 8 16 24 32 --cuda-graph-max-bs 32 "
                                      "--cuda-graph-bs-prefill 4 8 --cuda-graph-max-bs-prefill 8")
    bad = runner.invoke(app, ["ladder", "--mixed-ladder", "4,x"])
    assert bad.exit_code == 2 and "--mixed-ladder" in bad.output
