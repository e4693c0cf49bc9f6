"""The report over a folder that mixes machines or models (two machines' folders, a model axis): what it
compares stays within one model on one GPU type, and what it names, names which."""

from __future__ import annotations

import copy

from graphbench.reports.ladder_pairs import ladder_pairs
from graphbench.reports.rounds import merge_rounds
from tests.test_report_padding import DEFAULT_4, INTERACTIVE_4, _processes

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


def _on(results: list[dict], gpu: str | None = None, model: str | None = None) -> list[dict]:
    """The results as measured on that GPU type, or of that model (a sweep of its own)."""
    out = copy.deepcopy(results)
    for result in out:
        if gpu is not None:
            result["environment"]["gpu"] = gpu
        if model is not None:
            result["model"] = model
            result["sweep"]["round"]["id"] = model
    return out


def _ladder_pair(tps_a: list[float], tps_b: list[float]) -> list[dict]:
    """O2_default and O2_interactivity, one process per value, TPOT alike."""
    return (_processes("O2_default", "default", DEFAULT_4, [2.0] * len(tps_a), tps_a)
            + _processes("O2_interactivity", "interactivity", INTERACTIVE_4, [2.0] * len(tps_b), tps_b))


def test_ladder_pairs_stay_within_a_gpu_type_and_a_model():
    # on the H100 the interactivity ladder is 20% slower, on the H200 (twice as fast) a tie: pooled, the pair
    # was "6 vs 6" processes whose noise was the machines' gap, and the H100's difference a tie
    h100 = _on(_ladder_pair([100.0, 101.0, 102.0], [80.0, 81.0, 80.5]), H100)
    h200 = _on(_ladder_pair([200.0, 202.0, 201.0], [201.0, 200.0, 202.0]), H200)
    pairs = ladder_pairs(merge_rounds(h100 + h200))
    assert [(r["pair"], r["processes"]) for _, r in pairs.iterrows()] == [
        (f"O2_default @ {H100} -> O2_interactivity @ {H100}", "3 vs 3"),
        (f"O2_default @ {H200} -> O2_interactivity @ {H200}", "3 vs 3")]
    assert pairs.iloc[0]["output tok/s"].startswith("regressed") and pairs.iloc[1]["output tok/s"].startswith("tie")
    # two models under the same labels, on one GPU type: a pair per model
    models = ladder_pairs(merge_rounds(_on(h100, model="tiny-llama") + _on(h100, model="tiny-qwen2")))
    assert [(r["pair"], r["processes"]) for _, r in models.iterrows()] == [
        ("O2_default (tiny-llama) -> O2_interactivity (tiny-llama)", "3 vs 3"),
        ("O2_default (tiny-qwen2) -> O2_interactivity (tiny-qwen2)", "3 vs 3")]
    # one machine, one model: the labels alone, as before
    assert list(ladder_pairs(merge_rounds(h100))["pair"]) == ["O2_default -> O2_interactivity"]


def test_speed_ups_stay_within_a_model():
    # tiny-qwen2's O2 over tiny-llama's O0 (or its peer) is the models' ratio, not -O2's
    from graphbench.reports.charts_perf import by_concurrency, comparable, speedup_baselines
    from graphbench.reports.report import report_data
    from tests.test_gate import make_result

    results = []
    for model, o0, o2, peer in (("tiny-llama", 1000.0, 1500.0, 100.0), ("tiny-qwen2", 3000.0, 3300.0, None)):
        for label, tps, system in (("O0", o0, "graphbench"), ("O2", o2, "graphbench"), ("hf-eager", peer, "hf-eager")):
            if tps is not None:
                result = make_result(label, model=model, system=system, repeats={"closed-c4": [(tps, 12.0)] * 3})
                result["config"]["optimization_level"] = 2 if label == "O2" else 0 if label == "O0" else None
                results.append(result)
    data = report_data(results)
    baselines, candidates = speedup_baselines(data, by_concurrency(data.frame, ["output_tokens_per_s"]))
    assert baselines == ["O0 (tiny-llama)", "O0 (tiny-qwen2)", "hf-eager (tiny-llama)"]
    assert {base: comparable(data, base, candidates) for base in baselines} == {
        "O0 (tiny-llama)": ["O2 (tiny-llama)"], "O0 (tiny-qwen2)": ["O2 (tiny-qwen2)"],
        "hf-eager (tiny-llama)": ["O2 (tiny-llama)"]}


def test_speculative_decoding_is_set_against_k0_on_its_own_gpu_type():
    # an H100's k = 2 against an H200's k = 0 (three times as fast) read "-67% vs k=0": the machines' gap
    from graphbench.reports.speculative_table import speculative_table
    from tests.test_gate import make_result

    results = []
    for gpu, speed in ((H100, 1.0), (H200, 3.0)):
        for k, tps in ((0, 1000.0), (2, 1100.0)):
            result = make_result(f"O2_k{k}", repeats={"closed-c4": [(tps * speed, 12.0)] * 3})
            result["config"]["speculative"] = {"num_speculative_tokens": k, "method": "ngram"}
            result["environment"] = dict(result["environment"], device="cuda", gpu=gpu)
            results.append(result)
    table = speculative_table(results)
    assert [(row["point"], round(row["tok/s vs k=0 %"], 1)) for _, row in table.iterrows()] == [
        (f"O2_k2 @ {H100}", 10.0), (f"O2_k2 @ {H200}", 10.0)]


def test_two_models_under_one_label_are_not_said_to_be_pooled():
    # a model's O2 and another model's O2 are two series, not one point run twice
    from graphbench.reports.report import skipped_warnings
    from graphbench.reports.store import LoadedResults
    from tests.test_gate import make_result

    results = [make_result("O2", model=model, repeats={"closed-c4": [(1000.0, 12.0)] * 3})
               for model in ("tiny-llama", "tiny-qwen2")]
    assert skipped_warnings(LoadedResults(results, [])) == []
    rerun = skipped_warnings(LoadedResults(results + [dict(results[1], created_utc="2026-11-30T10:00:00Z")], []))
    assert len(rerun) == 1 and rerun[0].startswith("point O2 (tiny-qwen2) (graphbench) has 2 results")


def test_summary_csv_names_each_rows_gpu_type():
    # two machines' O2 rows were two "O2,graphbench,tiny-llama,..." lines, told apart by nothing
    from graphbench.reports.report import report_data, summary_frame
    from tests.test_gate import make_result

    results = []
    for gpu, tps in ((H100, 1000.0), (H200, 2000.0)):
        result = make_result("O2", repeats={"closed-c4": [(tps, 12.0)] * 3})
        result["environment"] = dict(result["environment"], device="cuda", gpu=gpu)
        results.append(result)
    summary = summary_frame(report_data(results).frame)
    assert list(summary.columns[:4]) == ["label", "system", "model", "gpu"]
    assert sorted(zip(summary["label"], summary["gpu"])) == [("O2", H100), ("O2", H200)]


def test_padding_chart_variants_and_cpu_lists_name_two_machines_apart():
    # "asked for by O2_default, O2_default": two machines' points named alike in the padding chart's title,
    # and likewise in the compile_sizes variants table and the list of points that ran on the CPU
    from graphbench.reports.banner import cpu_points
    from graphbench.reports.charts_padding import ladders
    from graphbench.reports.variants_table import variants_table

    h100 = merge_rounds(_on(_ladder_pair([100.0] * 3, [100.0] * 3), H100))
    h200 = merge_rounds(_on(_ladder_pair([200.0] * 3, [200.0] * 3), H200))
    assert [lad.points for lad in ladders(h100 + h200)] == [
        [f"O2_default @ {H100}", f"O2_default @ {H200}"], [f"O2_interactivity @ {H100}", f"O2_interactivity @ {H200}"]]
    assert [lad.points for lad in ladders(h100)] == [["O2_default"], ["O2_interactivity"]]
    variants = {"policy": "measured", "piece_sizes": [], "sizes": [{"size": 1, "static_ms": 1.0, "dynamic_ms": 1.1,
                                                                    "kept": "static"}]}
    for result in h100[:1] + h200[:1]:
        result["startups"] = [dict(result["startups"][0], static_variants=variants)]
    assert list(variants_table(h100 + h200)["point"]) == [f"O2_default @ {H100}", f"O2_default @ {H200}"]
    two_models = _on(h100[:1], model="tiny-llama") + _on(h100[:1], model="tiny-qwen2")
    for result in two_models:
        result["environment"]["device"] = "cpu"
    assert cpu_points(two_models) == ["O2_default (tiny-llama)", "O2_default (tiny-qwen2)"]


def test_a_label_one_machine_measured_once_for_another_is_that_machines_alias_only(tmp_path):
    # a CPU sweep runs O2_interactivity as O2_default's engine (stands_for), a GPU sweep measures it: the label
    # was "measured", so the CPU's alias vanished from every table; and an alias the CPU claimed was shown
    # under the GPU's point of that label too
    from graphbench.reports.report import write_report
    from graphbench.reports.store import write_result
    from tests.test_report_padding import _repeat, _result

    cpu = [_result("O2_default", 2, "default", DEFAULT_4, [_repeat(50.0, 8.0)] * 3, stands_for=["O2_interactivity"]),
           _result("O0_default", 0, "default", DEFAULT_4, [_repeat(40.0, 9.0)] * 3, requested="NONE",
                   stands_for=["O0_interactivity"])]
    gpu = merge_rounds(_on(_ladder_pair([100.0] * 3, [100.0] * 3), H200))
    for result in cpu:
        write_result(tmp_path / "r", "cpu", result["label"], result)
    for result in gpu:
        write_result(tmp_path / "r", "gpu", result["label"], result)
    report = write_report([tmp_path / "r"], tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "O2_interactivity @ CPU = O2_default @ CPU (same engine, measured once)" in md
    assert f"O0_interactivity @ {H200}" not in md  # the GPU measured no O0_default: nothing stands for it there
    also = {(row.gpu, row.best): row.best_also for row in report.headline.itertuples()}
    assert also[("", "O2_default")] == "O2_interactivity"
    summary = report.summary
    aliases = summary[summary["same_engine_as"] != ""]
    assert sorted(zip(aliases["label"], aliases["gpu"])) == [("O0_interactivity", ""), ("O2_interactivity", "")]


def test_a_gpu_result_without_its_gpu_type_is_not_named_the_cpus():
    # environment.device "cuda" with no environment.gpu was named "@ CPU" (and "cpu" in the headline's GPU
    # column) beside an H100's results: a claim the result does not make
    from graphbench.ladders.memory_model import memory_source
    from graphbench.reports.point_names import point_namer
    from graphbench.reports.rounds import result_gpu
    from tests.test_gate import make_result

    known, unknown, cpu = (make_result("O2") for _ in range(3))
    known["environment"] = {"device": "cuda", "gpu": H100}
    unknown["environment"] = {"device": "cuda"}
    assert [result_gpu(r) for r in (known, unknown, cpu)] == [H100, "cuda (GPU type not recorded)", ""]
    assert point_namer([known, unknown])(unknown) == "O2 @ cuda (GPU type not recorded)"
    assert memory_source(unknown) == ("tiny-llama", "cuda (GPU type not recorded)")


def test_a_points_rounds_on_two_gpu_types_are_named_in_a_warning():
    # a mixed Ray cluster ran round 1 on an H100 and rounds 2, 3 on an H200: two points of 1 and 2 processes,
    # every verdict on them n/a, and nothing said why
    from graphbench.reports.report import skipped_warnings
    from graphbench.reports.store import LoadedResults

    files = _ladder_pair([100.0] * 3, [100.0] * 3)[:3]  # O2_default's three rounds
    for f in files:
        f["environment"]["gpu"] = H100 if f["sweep"]["round"]["index"] == 1 else H200
    warnings = skipped_warnings(LoadedResults(merge_rounds(files), []))
    assert warnings == [f"point O2_default (graphbench): its processes ran on 2 GPU types ({H100}: round 1; {H200}: "
                        "rounds 2, 3): each GPU type's are a point of their own, with fewer processes"]
    assert skipped_warnings(LoadedResults(merge_rounds(_on(files, H200)), [])) == []
