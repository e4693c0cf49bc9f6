"""The step-time curve (ladders/step_curve.py) and `tune --objective time`: exact, hand-checked values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphbench.cli.main import app
from graphbench.errors import GraphbenchError
from graphbench.ladders.step_curve import (
    CURVE_KIND,
    StepCurve,
    curve_from_dict,
    expected_step_ms,
    load_curve,
    write_curve,
)
from graphbench.ladders.tune import evaluate_ladder, pareto_curve, time_candidates, tune_ladder

# 4 is faster than 3 (a dip), 1 the fastest; capture takes 0.01 s a graph + 1 ms a token of size
GRAPH_MS = {1: 0.9, 2: 1.0, 3: 1.2, 4: 1.1, 5: 1.5, 6: 1.5, 7: 1.6, 8: 1.6}
CURVE = StepCurve(GRAPH_MS, eager_ms={1: 3.0, 16: 6.0}, capture_s={s: 0.01 + 0.001 * s for s in GRAPH_MS},
                  meta={"model": "tiny", "environment": {"gpu": "NVIDIA H200"}, "date": "2026-12-01T00:00:00Z"})
DIST = {1: 1, 3: 1, 5: 1, 8: 1}


def test_candidates_keep_sizes_faster_than_the_ones_below() -> None:
    # in [3, 5) size 4 (1.1 ms) beats 3 (1.2 ms); 2 is slower than 1, 6 and 7 no faster than 5
    assert time_candidates(DIST, 8, 1, CURVE) == [1, 3, 4, 5, 8]


def test_time_objective_takes_the_dip_where_padding_tokens_would_not() -> None:
    # 2 graphs: {4, 8} = (1.1 + 1.1 + 1.6 + 1.6) / 4 = 1.35 ms beats {3, 8} = 1.4 and {1, 8} = 1.425
    timed = tune_ladder(DIST, 2, objective="time", top=8, step_curve=CURVE)
    assert timed.sizes == (4, 8)
    assert timed.expected_step_ms == pytest.approx(1.35, abs=1e-12)
    # padding tokens: {3, 8} pads 1->3 and 5->8: 5/4 tokens, against 7/4 for {4, 8}
    assert tune_ladder(DIST, 2, objective="tokens", top=8).sizes == (3, 8)
    # 3 graphs: {1, 4, 8} = (0.9 + 1.1 + 1.6 + 1.6) / 4 = 1.3, as fast as every size 1..8
    curve = pareto_curve(DIST, 3, objective="time", top=8, step_curve=CURVE)
    assert [(p.num_graphs, p.sizes) for p in curve] == [(1, (8,)), (2, (4, 8)), (3, (1, 4, 8))]
    assert [p.value for p in curve] == pytest.approx([1.6, 1.35, 1.3], abs=1e-12)
    assert expected_step_ms(range(1, 9), DIST, CURVE) == pytest.approx(1.3, abs=1e-12)


def test_eager_above_the_top_is_interpolated() -> None:
    # 12 is above the top 8: eager, 3.0 + (12 - 1) / 15 * 3.0 = 5.2 ms
    dist = {**DIST, 12: 1}
    assert expected_step_ms((4, 8), dist, CURVE) == pytest.approx((1.1 + 1.1 + 1.6 + 1.6 + 5.2) / 5, abs=1e-12)
    no_eager = StepCurve(GRAPH_MS)
    with pytest.raises(GraphbenchError, match="no eager times"):
        expected_step_ms((4, 8), dist, no_eager)


def test_capture_budget_limits_the_ladder() -> None:
    model = CURVE.capture_model()
    assert (model.per_graph, model.per_token) == pytest.approx((0.01, 0.001), abs=1e-12)
    # 0.04 s: 3 rungs would need 0.03 + 0.001 * sum <= 0.04, a sum <= 10 with 8 in it: none fits
    curve = pareto_curve(DIST, 3, objective="time", top=8, step_curve=CURVE, capture_budget_s=0.04)
    assert curve[-1].sizes == (4, 8)
    ladder = evaluate_ladder((4, 8), DIST, objective="time", step_curve=CURVE)
    assert ladder.predicted_capture_s == pytest.approx(0.032, abs=1e-12)
    with pytest.raises(GraphbenchError, match="capture-time budget"):
        pareto_curve(DIST, 3, objective="time", top=8, step_curve=CURVE, capture_budget_s=0.01)


def test_curve_files_are_checked_and_never_overwritten(tmp_path: Path) -> None:
    path = write_curve(tmp_path / "c.json", CURVE)
    again = load_curve(path)
    assert again.graph_ms == GRAPH_MS and again.eager_ms == {1: 3.0, 16: 6.0}
    assert again.meta["model"] == "tiny"
    with pytest.raises(GraphbenchError, match="never overwritten"):
        write_curve(path, CURVE)
    good = json.loads(path.read_text())
    for change, message in (({"kind": "graphbench-result"}, "not a graphbench step-time curve"),
                            ({"schema_version": 9}, "unknown schema_version 9"),
                            ({"graph_ms": {"0": 1.0}}, "graph_ms has a size '0'"),
                            ({"graph_ms": {"2": -1.0}}, r"graph_ms\[2\] must be a positive"),
                            ({"graph_ms": {"2": 0}}, r"graph_ms\[2\] must be a positive"),
                            ({"graph_ms": {}}, "graph_ms holds no sizes"),
                            ({"capture_bytes": {"2": 1.5}}, r"capture_bytes\[2\] must be a non-negative integer")):
        with pytest.raises(GraphbenchError, match=message):
            curve_from_dict({**good, **change}, "c.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(GraphbenchError, match="cannot read a step-time curve"):
        load_curve(tmp_path / "bad.json")
    assert good["kind"] == CURVE_KIND


def test_tune_objective_time_on_the_command_line(tmp_path: Path) -> None:
    curve = write_curve(tmp_path / "curve.json", CURVE)
    dist = tmp_path / "dist.json"
    dist.write_text(json.dumps({str(k): v for k, v in DIST.items()}))
    runner = CliRunner()
    base = ["tune", "--distribution", str(dist), "--max-graphs", "2", "--top", "8", "--objective", "time"]
    result = runner.invoke(app, [*base, "--curve", str(curve), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["tuned"]["sizes"] == [4, 8]
    assert doc["curve"]["every_size_ms"] == pytest.approx(1.3, abs=1e-12)
    assert doc["curve"]["vs_every_size_pct"]["tuned"] == pytest.approx(100 * (1.35 / 1.3 - 1), abs=1e-9)
    assert [p["expected_step_ms"] for p in doc["pareto"]] == pytest.approx([1.6, 1.35], abs=1e-12)
    table = runner.invoke(app, [*base, "--curve", str(curve)])
    assert table.exit_code == 0, table.output
    assert "a ladder with every size 1..8: 1.3000 ms per step" in table.stdout
    # {4, 8} pads 1->4, 3->4, 5->8: 7/4 tokens; capture 2 * 0.01 + 0.012 s
    rows = {line.split()[0]: line.split()[1:] for line in table.stdout.splitlines() if line.startswith("tuned ")}
    assert rows["tuned"] == ["2", "1.7500", "34.38%", "0.00%", "1.3500", "+3.85%", "0.03"]
    missing = runner.invoke(app, base)
    assert missing.exit_code == 2 and "needs a measured step-time curve" in missing.output


def test_curve_chart_is_written(tmp_path: Path) -> None:
    from graphbench.ladders.plot_curve import padded_times, plot_step_curve

    # {4, 8}: 1..4 run the 4 recording, 5..8 the 8, above the top eager (interpolated), 17.. unknown
    times = padded_times(CURVE, (4, 8), 9)
    assert times[:8] == [1.1] * 4 + [1.6] * 4 and times[8] == pytest.approx(3.0 + 8 / 15 * 3.0)
    out = plot_step_curve(CURVE, tmp_path / "curve.png", {"tuned": (4, 8)})
    assert out.read_bytes().startswith(b"\x89PNG")


def test_graph_memory_predictions_from_the_first_captures() -> None:
    from graphbench.ladders.graph_memory import fit_pool_model, capture_rows, predict_from_log

    mib = 1 << 20
    # FULL: the pool (100 MiB) then 4, 2, 2, 2; PIECEWISE: 10, 1, 1, 1 -- 123 MiB in all
    log = [["FULL", 512 - i, 0.01, m * mib] for i, m in enumerate((100, 4, 2, 2, 2))]
    log += [["PIECEWISE", 512 - i, 0.02, m * mib] for i, m in enumerate((10, 1, 1, 1))]
    prediction = predict_from_log(log, 123 * mib)
    # vLLM: max(100, 10) shared + max(4, 1) * 4 + max(1, 1) * 3 = 119 MiB
    assert prediction.vllm_bytes == 119 * mib
    # graphbench: 100 + FULL's line through 4, 6, 8, 10 (2 + 2 * 4) + PIECEWISE's through 10..13 (9 + 1 * 4)
    assert prediction.graphbench_bytes == pytest.approx(123 * mib)
    assert prediction.counts == {"FULL": 5, "PIECEWISE": 4}
    assert prediction.error_pct(prediction.vllm_bytes) == pytest.approx(100 * (119 / 123 - 1))
    # fitted on the first 2 graphs after the pool only: FULL's line through 4, 6 is 2 + 2 * 4 all the same
    model = fit_pool_model(capture_rows(log), fit_graphs=2)
    assert model.per_mode["FULL"] == pytest.approx((2 * mib, 2 * mib))
    # the capture stream's cuBLAS setup, paid before the recordings: in the measured total, not in the log's rows
    paid_first = predict_from_log(log, 193 * mib, setup_bytes=70 * mib)
    assert (paid_first.vllm_bytes, paid_first.graphbench_bytes) == (189 * mib, pytest.approx(193 * mib))
    with pytest.raises(GraphbenchError, match="capture_log row 0"):
        capture_rows([["FULL", 1, 0.1]])


def test_decode_pool_steps_rewrite_the_same_slot() -> None:
    # the curve's timed steps never advance the requests: the same last tokens give the same samples
    from graphbench.bench.curve_measure import DecodePool, derived_config
    from graphbench.config import load_engine_config
    from graphbench.runner.engine import Engine

    config = derived_config(load_engine_config(overrides={"model.model": "tiny-llama", "optimization_level": 0}),
                            {"scheduler.max_num_seqs": 4, "model.device": "cpu"})
    engine = Engine(config)
    try:
        pool = DecodePool(engine, 4, context=20)
        assert [r.num_computed_tokens for r in pool.requests] == [20] * 4
        batch = pool.batch(3)
        assert batch.num_new_tokens == [1, 1, 1] and batch.descriptor.uniform and batch.descriptor.num_reqs == 3
        first = engine.runner.launch(batch).result().tokens
        again = engine.runner.launch(batch).result().tokens
        assert first == again and len(first) == 3
        assert [r.num_computed_tokens for r in pool.requests] == [20] * 4
    finally:
        engine.close()


def test_decode_pool_requests_take_the_adapters_in_turn() -> None:
    # benchmarks/roofline.py --lora: the pool's requests on the loaded adapters, its batches keyed with LoRA
    from graphbench.bench.curve_measure import DecodePool
    from graphbench.config import load_engine_config
    from graphbench.runner.engine import Engine

    engine = Engine(load_engine_config(overrides={
        "model.model": "tiny-llama", "optimization_level": 0, "model.device": "cpu", "scheduler.max_num_seqs": 4,
        "lora.modules": ["dummy:r=4,n=2"]}))
    try:
        names = list(engine.lora_slots)
        pool = DecodePool(engine, 4, context=20, adapters=names)
        assert [r.lora_slot for r in pool.requests] == [engine.lora_slots[names[i % 2]] for i in range(4)]
        assert all(r.lora_slot for r in pool.requests) and pool.batch(3).descriptor.has_lora
        assert len(engine.runner.launch(pool.batch(3)).result().tokens) == 3
    finally:
        engine.close()


def test_a_comparison_ladder_the_curve_cannot_time_is_shown_without_ms(tmp_path: Path) -> None:
    # a curve of 1..8 with eager times up to 16; a batch of 12: the tuned ladder (top 8) runs it eager
    # (6.0 * 11/15 + 3.0 * 4/15 = 5.2 ms), the default ladder for 12 sequences pads it to 16, which has no
    # recording: that row gets no ms per step, and the tuning goes on
    curve = write_curve(tmp_path / "curve.json", StepCurve(GRAPH_MS, eager_ms={1: 3.0, 16: 6.0}))
    dist = tmp_path / "dist.json"
    dist.write_text(json.dumps({"1": 1, "3": 1, "5": 1, "8": 1, "12": 1}))
    result = CliRunner().invoke(app, ["tune", "--distribution", str(dist), "--max-graphs", "2", "--top", "8",
                                      "--objective", "time", "--curve", str(curve), "--max-num-seqs", "12",
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    rows = {row["name"]: row for row in doc["ladders"]}
    assert rows["tuned"]["sizes"] == [4, 8]
    assert rows["tuned"]["expected_step_ms"] == pytest.approx((1.1 + 1.1 + 1.6 + 1.6 + 5.2) / 5)
    assert rows["default"]["expected_step_ms"] is None and "default" not in doc["curve"]["vs_every_size_pct"]
    assert "gets no ms per step" in result.stderr



def test_a_curve_and_a_memory_model_of_other_runs_are_named() -> None:
    from graphbench.ladders.memory_model import MemoryModel
    from graphbench.tuning.tune_models import check_sources

    def warned(memory: MemoryModel | None) -> list[str]:
        warnings: list[str] = []
        check_sources(CURVE, memory, warnings)
        return warnings

    assert warned(MemoryModel(1.0, 0.0, model="tiny", gpu="NVIDIA H200")) == []
    assert warned(MemoryModel(1.0, 0.0)) == []  # results that do not say whose: nothing to compare
    assert warned(None) == []
    (other,) = warned(MemoryModel(1.0, 0.0, model="tiny", gpu="NVIDIA A100"))
    assert other == ("the step-time curve and the graph-memory model come from different runs (GPU 'NVIDIA H200' "
                     "against 'NVIDIA A100', curve first): each ladder is weighed with both")
    (both,) = warned(MemoryModel(1.0, 0.0, model="big", gpu="NVIDIA A100"))
    assert "model 'tiny' against 'big'; GPU 'NVIDIA H200' against 'NVIDIA A100'" in both
    # a curve file whose environment is not an object (its keys beyond the timings are not checked): no GPU said
    odd = StepCurve(GRAPH_MS, meta={"model": "tiny", "environment": "NVIDIA H200"})
    warnings: list[str] = []
    check_sources(odd, MemoryModel(1.0, 0.0, model="tiny", gpu="NVIDIA A100"), warnings)
    assert warnings == []
