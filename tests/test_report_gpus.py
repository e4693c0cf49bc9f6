"""The report's headline ranks results of different GPU types apart (a sweep over a Ray cluster of mixed
nodes, or the folders of two machines): one row per GPU, a GPU column only when there are several."""

from __future__ import annotations

from graphbench.bench.metrics import summarize
from graphbench.reports.headline import headline_table
from graphbench.reports.render_cells import headline_cells, headline_headers
from graphbench.reports.report import report_data
from tests.test_gate import make_result


def _result(label: str, gpu: str, tokens_per_s: float, startup_s: float) -> dict:
    result = make_result(label, repeats={"closed-c4": [(tokens_per_s, 12.0)] * 3}, startup_s=startup_s)
    result["environment"] = dict(result.get("environment") or {}, device="cuda", gpu=gpu, host=f"node-{gpu[-4:]}")
    for workload in result["workloads"]:
        workload["summary"] = summarize(workload["repeats"])
    return result


def _headline(results: list[dict]):
    data = report_data(results)
    return headline_table(data.frame, data.points)


def test_headline_ranks_each_gpu_type_apart():
    # O2 is the best on the H200 and O1 on the A100: one ranking over both would show O2 only
    results = [_result(label, gpu, tps, start) for label, gpu, tps, start in [
        ("O1", "NVIDIA H200", 9000.0, 3.0), ("O2", "NVIDIA H200", 11000.0, 4.0),
        ("O1", "NVIDIA A100", 6000.0, 5.0), ("O2", "NVIDIA A100", 5000.0, 6.0)]]
    headline = _headline(results)
    rows = [(r.gpu, r.best, r.output_tokens_per_s, r.startup_warm_s) for r in headline.itertuples()]
    assert rows == [("NVIDIA A100", "O1", 6000.0, 5.0), ("NVIDIA H200", "O2", 11000.0, 4.0)]
    assert headline_headers(headline)[:3] == ["GPU", "concurrency", "best configuration"]
    assert [row[:3] for row in headline_cells(headline)] == [["NVIDIA A100", "4", "O1"], ["NVIDIA H200", "4", "O2"]]

    # one GPU type: no GPU column
    one = _headline(results[:2])
    assert list(one["gpu"]) == ["NVIDIA H200"] and headline_headers(one)[0] == "concurrency"
    assert len(headline_cells(one)[0]) == len(headline_headers(one))


def test_a_label_on_two_gpu_types_is_two_series_in_the_charts():
    # the charts draw one line or bar per series: an H200's and an A100's O1 pooled would be one of neither
    from graphbench.reports.frame import results_frame

    results = [_result("O1", "NVIDIA H200", 9000.0, 3.0), _result("O1", "NVIDIA A100", 6000.0, 5.0)]
    frame = results_frame(results)
    assert sorted(frame["series"]) == ["O1 @ NVIDIA A100", "O1 @ NVIDIA H200"]
    assert list(results_frame(results[:1])["series"]) == ["O1"]  # one GPU type: the label alone
    assert list(_headline(results)["best"]) == ["O1", "O1"]  # the headline ranks under its GPU column


def test_speed_ups_and_pooling_warnings_stay_within_a_gpu_type():
    from graphbench.reports.charts_perf import by_concurrency, comparable, speedup_baselines
    from graphbench.reports.report import skipped_warnings
    from graphbench.reports.store import LoadedResults

    results = [_result(label, gpu, tps, 3.0) for label, gpu, tps in [
        ("O0", "NVIDIA H200", 2000.0), ("O2", "NVIDIA H200", 10000.0),
        ("O0", "NVIDIA A100", 1000.0), ("O2", "NVIDIA A100", 3000.0)]]
    for result in results:
        result["config"] = dict(result.get("config") or {}, optimization_level=int(result["label"][1]))
    data = report_data(results)
    table = by_concurrency(data.frame, ["output_tokens_per_s"])
    baselines, candidates = speedup_baselines(data, table)
    assert baselines == ["O0 @ NVIDIA A100", "O0 @ NVIDIA H200"]
    # an H200's O2 over an A100's O0 would be the hardware's ratio (10x), not -O2's
    assert {base: comparable(data, base, candidates) for base in baselines} == {
        "O0 @ NVIDIA A100": ["O2 @ NVIDIA A100"], "O0 @ NVIDIA H200": ["O2 @ NVIDIA H200"]}
    # one label on two GPU types is two series, not one point measured twice
    assert not any("pooled" in w for w in skipped_warnings(LoadedResults(results, [])))
    assert any("pooled" in w for w in skipped_warnings(LoadedResults(results + [dict(results[0])], [])))


def test_the_startup_chart_names_each_gpu_types_bar(monkeypatch, tmp_path):
    # one label's start-ups on two GPU types are two bars: named apart, not "O1" twice
    from graphbench.reports import charts_startup

    figures = []
    monkeypatch.setattr(charts_startup, "save_figure", lambda fig, *args: figures.append(fig))
    results = [_result("O1", "NVIDIA H200", 9000.0, 3.0), _result("O1", "NVIDIA A100", 6000.0, 5.0)]
    charts_startup.startup_chart(report_data(results), tmp_path / "startup.png")
    ticks = [t.get_text().split("\n")[0] for t in figures[0].axes[0].get_xticklabels()]
    assert sorted(ticks) == ["O1 @ NVIDIA A100", "O1 @ NVIDIA H200"]
    charts_startup.startup_chart(report_data(results[:1]), tmp_path / "one.png")
    assert [t.get_text().split("\n")[0] for t in figures[1].axes[0].get_xticklabels()] == ["O1"]


def test_the_padding_table_names_each_gpu_types_rows():
    from graphbench.reports.padding_table import padding_table

    results = [_result("O1", "NVIDIA H200", 9000.0, 3.0), _result("O1", "NVIDIA A100", 6000.0, 5.0)]
    assert sorted(set(padding_table(results)["point"])) == ["O1 @ NVIDIA A100", "O1 @ NVIDIA H200"]
    assert set(padding_table(results[:1])["point"]) == {"O1"}


def test_the_point_namer_adds_what_the_results_differ_in():
    from graphbench.reports.point_names import point_namer

    h200, a100 = _result("O1", "NVIDIA H200", 9000.0, 3.0), _result("O1", "NVIDIA A100", 6000.0, 5.0)
    other_model = dict(h200, model="/ckpt/qwen-tiny")
    assert [point_namer([h200, a100])(r) for r in (h200, a100)] == ["O1 @ NVIDIA H200", "O1 @ NVIDIA A100"]
    assert point_namer([h200])(h200) == "O1"
    assert point_namer([h200, other_model])(other_model) == "O1 (qwen-tiny)"
    assert point_namer([a100, other_model])(other_model) == "O1 (qwen-tiny) @ NVIDIA H200"
