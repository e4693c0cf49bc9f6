"""The report's KV trade: each ladder's graph memory counted in KV-cache tokens, measured and as a memory
model fitted over the report's points predicts it (reports/ladder_table.kv_trade)."""

from __future__ import annotations

import pytest

from graphbench.reports.ladder_table import kv_trade
from tests.test_tune_engine_limits import result

MIB = 2**20


def _point(label: str, sizes: list[int], graph_mib: float) -> dict:
    r = result(label, {1: 1}, seqs=8)
    r["startup"].update(capture_sizes=sizes, graph_memory_bytes=graph_mib * MIB, kv_cache_tokens=1000,
                        kv_cache_bytes=1000 * 32 * 1024, num_graphs={"FULL": len(sizes)})
    return r


def test_graph_memory_in_kv_tokens_measured_and_modelled():
    # memory = 10 MiB + 2 MiB a graph exactly; 32 KiB a KV token: 16 MiB = 512 tokens, 18 = 576, 12 = 384
    points = [_point("three", [1, 2, 4], 16), _point("four", [1, 2, 4, 8], 18), _point("one", [8], 12)]
    trade = kv_trade(points)
    assert trade["three", "tiny-llama", ""] == pytest.approx((1000, 512, 512)) and trade["four", "tiny-llama", ""] == pytest.approx((1000, 576, 576))
    assert trade["one", "tiny-llama", ""] == pytest.approx((1000, 384, 384))
    lone = kv_trade([_point("three", [1, 2, 4], 16)])  # one ladder shape: the model is per graph only
    assert lone["three", "tiny-llama", ""] == pytest.approx((1000, 512, 512))
    no_kv = _point("x", [1], 4)
    del no_kv["startup"]["kv_cache_bytes"]  # written before the KV bytes were recorded: no row
    assert ("x", "tiny-llama", "") not in kv_trade([no_kv])


def test_the_ladders_table_shows_the_trade(tmp_path):
    from graphbench.reports.report import write_report
    from graphbench.reports.store import write_result

    for r in (_point("three", [1, 2, 4], 16), _point("four", [1, 2, 4, 8], 18)):
        write_result(tmp_path / "results", "h200", r["label"], r)
    text = (write_report([tmp_path / "results"], tmp_path / "report").out_dir / "report.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| ladder |"))
    assert header.endswith("| KV tokens | graphs as KV tokens | graphs as KV tokens (model) |")
    row = next(line for line in text.splitlines() if line.startswith("| three |"))
    assert row.endswith("| 1,000 | 512 | 512 |")



def test_a_ladder_on_two_gpu_types_is_a_row_per_gpu_compared_within_it():
    # one label's start-ups on an H200 and an A100: one row pooling them would be neither's memory or waste
    from graphbench.reports.ladder_table import ladder_table
    from graphbench.reports.report import report_data

    points = []
    for gpu, scale in (("NVIDIA H200", 1.0), ("NVIDIA A100", 2.0)):
        for label, sizes, mib in (("three", [1, 2, 4], 16), ("four", [1, 2, 4, 8], 20)):
            p = _point(label, sizes, mib * scale)
            p["environment"] = {"device": "cuda", "gpu": gpu}
            p["workloads"][0]["summary"] = {"padding_waste_pct": {"median": 10.0 * scale}}
            points.append(p)
    data = report_data(points)
    table = ladder_table(data.points, data.frame, points).set_index("ladder")
    assert sorted(table.index) == ["four @ NVIDIA A100", "four @ NVIDIA H200", "three @ NVIDIA A100", "three @ NVIDIA H200"]
    assert table.loc["three @ NVIDIA A100", "graph MiB"] == 32 and table.loc["three @ NVIDIA H200", "graph MiB"] == 16
    assert table.loc["three @ NVIDIA A100", "padding waste %"] == 20 and table.loc["three @ NVIDIA H200", "padding waste %"] == 10
    # each row against the largest ladder of its own GPU type: 3 of 4 sizes on both
    assert list(table["sizes vs largest %"]) == [75.0, 100.0, 75.0, 100.0]
    # the KV trade's model is fitted per GPU type: the A100's graphs cost twice the KV tokens
    assert table.loc["three @ NVIDIA A100", "graphs as KV tokens"] == 2 * table.loc["three @ NVIDIA H200", "graphs as KV tokens"]
    one = ladder_table(*(lambda d: (d.points, d.frame))(report_data(points[:2])), points[:2])
    assert sorted(one["ladder"]) == ["four", "three"]  # one GPU type: the labels alone


def test_a_ladder_of_two_models_is_a_row_per_model():
    from graphbench.reports.ladder_table import ladder_table
    from graphbench.reports.report import report_data

    points = []
    for model, mib in (("tiny-llama", 16), ("/ckpt/qwen-tiny", 40)):
        for label, sizes in (("three", [1, 2, 4]), ("four", [1, 2, 4, 8])):
            p = _point(label, sizes, mib + len(sizes))
            p["model"] = model
            points.append(p)
    data = report_data(points)
    table = ladder_table(data.points, data.frame, points).set_index("ladder")
    assert sorted(table.index) == ["four (qwen-tiny)", "four (tiny-llama)", "three (qwen-tiny)", "three (tiny-llama)"]
    assert table.loc["three (qwen-tiny)", "graph MiB"] == 43 and table.loc["three (tiny-llama)", "graph MiB"] == 19
    # each model's memory model fits its own two ladders exactly (1 MiB a graph over a fixed part)
    assert table.loc["three (qwen-tiny)", "graphs as KV tokens (model)"] == pytest.approx(43 * 32)


def test_the_ladders_table_names_a_point_as_the_other_tables_do():
    # the label ran eager on an A100 too: the ladders table's one row (the H200's graphs) is named as the
    # padding table names that point, not "three" beside the others' "three @ NVIDIA H200"
    from graphbench.reports.ladder_table import ladder_table
    from graphbench.reports.padding_table import padding_table
    from graphbench.reports.report import report_data

    graphs, eager = _point("three", [1, 2, 4], 16), _point("three", [1, 2, 4], 16)
    graphs["environment"], eager["environment"] = {"gpu": "NVIDIA H200"}, {"gpu": "NVIDIA A100"}
    eager["startup"]["cudagraph_mode"] = {"requested": "NONE", "resolved": "NONE"}
    data = report_data([graphs, eager])
    assert list(ladder_table(data.points, data.frame, [graphs, eager])["ladder"]) == ["three @ NVIDIA H200"]
    assert "three @ NVIDIA H200" in set(padding_table([graphs, eager])["point"])


def test_the_graph_memory_chart_names_its_lines_as_the_ladders_table(monkeypatch, tmp_path):
    from graphbench.reports import charts_startup
    from graphbench.reports.report import report_data

    figures = []
    monkeypatch.setattr(charts_startup, "save_figure", lambda fig, *args: figures.append(fig))
    graphs, eager = _point("three", [1, 2, 4], 16), _point("three", [1, 2, 4], 16)
    graphs["environment"], eager["environment"] = {"gpu": "NVIDIA H200"}, {"gpu": "NVIDIA A100"}
    eager["startup"]["cudagraph_mode"] = {"requested": "NONE", "resolved": "NONE"}
    charts_startup.graph_memory_chart(report_data([graphs, eager]), tmp_path / "memory.png")
    labels = figures[0].axes[0].get_legend_handles_labels()[1]
    assert labels and all(label.split(":")[0].endswith(" @ NVIDIA H200") for label in labels), labels
