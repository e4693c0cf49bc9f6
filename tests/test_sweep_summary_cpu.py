"""The table that closes a sweep says what was not measured: on the CPU (no CUDA graph recorded) capture
seconds and graph memory are "-", and the padding column gives the ladder's predicted padding (as the
report's Padding table does), never a 0 that reads as a measurement."""

from __future__ import annotations

from rich.console import Console
from typer.testing import CliRunner

from graphbench.bench.metrics import summarize
from graphbench.cli.main import app
from graphbench.cli.sweep_summary import print_summary
from graphbench.reports.padding_table import padding_table
from graphbench.reports.store import load_results, write_result
from tests.test_gate import make_result
from tests.test_sweep import fast

NOT_MEASURED = "-"  # as the table's other cells with no value (and the report's Padding table)


def _cpu_result(label: str, requested: str, ladder: list[int] | None, system: str = "graphbench"):
    """A point as the CPU writes it: its mode resolved to NONE, nothing captured, zeros for the graphs' costs."""
    result = make_result(label, system=system, repeats={"closed-c4": [(1000.0, 12.0), (1010.0, 12.0)]},
                         capture_s=0.0, graph_memory_bytes=0)
    result["environment"] = {"device": "cpu"}
    result["startup"].update(cudagraph_mode={"requested": requested, "resolved": "NONE", "reason": "no GPU"},
                             capture_sizes=[], num_graphs={})
    result["startups"] = [result["startup"]]
    result["config"] = {"compilation": {"cudagraph_mode": requested, "cudagraph_capture_sizes": ladder,
                                        "performance_mode": "default"}}
    workload = result["workloads"][0]
    for repeat in workload["repeats"]:
        repeat.update(padding_token_pct=0.0, batch_size_histogram={"3": 10, "5": 10})
    workload["summary"] = summarize(workload["repeats"])
    return result


def _rows(folder) -> dict[str, list[str]]:
    console = Console(record=True, width=250)
    print_summary(console, folder)
    return {cells[1]: cells for line in console.export_text().splitlines()
            if "closed-c" in line and len(cells := [c.strip() for c in line.split("│")]) > 12}


def test_a_cpu_point_shows_not_measured_and_the_predicted_padding(tmp_path):
    write_result(tmp_path, "cpu", "O2_default", _cpu_result("O2_default", "FULL_AND_PIECEWISE", [1, 2, 4, 8]))
    write_result(tmp_path, "cpu", "O0_default", _cpu_result("O0_default", "NONE", None))
    rows = _rows(tmp_path)
    # sizes 3 and 5 pad to 4 and 8: 40 of 120 tokens, as the report's Padding table predicts
    predicted = padding_table(load_results([tmp_path]).results).set_index("point").loc["O2_default", "predicted padding %"]
    assert round(predicted, 1) == 33.3
    o2, o0 = rows["O2_default"], rows["O0_default"]
    assert o2[5:7] == [NOT_MEASURED, NOT_MEASURED] and o2[11] == "33.3 predicted", o2
    assert o0[5:7] == [NOT_MEASURED, NOT_MEASURED] and o0[11] == NOT_MEASURED, o0  # no ladder asked: none to predict


def test_a_sweep_of_two_models_still_shows_the_predicted_padding(tmp_path):
    # a model axis: the Padding table names its points with their model; the summary still finds each one's row
    for label, model in (("model=tiny-llama_O2", "tiny-llama"), ("model=tiny-qwen_O2", "tiny-qwen")):
        result = _cpu_result(label, "FULL_AND_PIECEWISE", [1, 2, 4, 8])
        result["model"] = model
        write_result(tmp_path, "cpu", label, result)
    rows = _rows(tmp_path)  # (each row named with its model, as the report names the points of several)
    assert rows["model=tiny-llama_O2 (tiny-llama)"][11] == rows["model=tiny-qwen_O2 (tiny-qwen)"][11] == "33.3 predicted", rows


def test_a_point_that_recorded_graphs_still_shows_what_it_measured(tmp_path):
    result = make_result("O2_default", repeats={"closed-c4": [(1000.0, 12.0), (1010.0, 12.0)]}, capture_s=1.5,
                         graph_memory_bytes=300 * 2**20)
    for repeat in result["workloads"][0]["repeats"]:
        repeat.update(padding_token_pct=9.4, batch_size_histogram={"3": 10})
    result["workloads"][0]["summary"] = summarize(result["workloads"][0]["repeats"])
    write_result(tmp_path, "gpu", "O2_default", result)
    assert _rows(tmp_path)["O2_default"][5:7] + [_rows(tmp_path)["O2_default"][11]] == ["1.50", "300", "9.4"]


def test_a_cpu_sweep_closes_without_zeros_for_what_it_could_not_measure(tmp_path):
    results = tmp_path / "results"
    answer = CliRunner().invoke(app, ["sweep", *fast(concurrency="1"), "--levels", "0", "--results", str(results)])
    assert answer.exit_code == 0, answer.output
    row = next([c.strip() for c in line.split("│")] for line in answer.stdout.splitlines() if "closed-c1" in line)
    assert row[5:7] == [NOT_MEASURED, NOT_MEASURED] and row[11] == NOT_MEASURED, row
    assert "0.00" not in row[5]


def test_the_reports_headline_gives_no_graph_memory_where_none_was_recorded(tmp_path):
    from graphbench.reports.report import write_report

    write_result(tmp_path / "r", "cpu", "O2_default", _cpu_result("O2_default", "FULL_AND_PIECEWISE", [1, 2, 4, 8]))
    report = write_report([tmp_path / "r"], tmp_path / "report")
    assert report.headline["graph_memory_bytes"].isna().all()
    row = next(line for line in (tmp_path / "report" / "report.md").read_text().splitlines() if "| O2_default |" in line)
    assert row.split("|")[6].strip() == "-", row  # graph memory (MiB): not 0.0


def test_a_folder_of_two_machines_names_each_point_and_still_predicts_its_padding(tmp_path):
    # a label on a CPU host and on a GPU host (a mixed Ray cluster, or a folder measured on two machines): two
    # rows named "O2_default", and the predicted padding lost (the Padding table names them "@ ...")
    write_result(tmp_path, "cpu", "O2_default", _cpu_result("O2_default", "FULL_AND_PIECEWISE", [1, 2, 4, 8]))
    gpu = make_result("O2_default", repeats={"closed-c4": [(1000.0, 12.0), (1010.0, 12.0)]}, capture_s=1.5,
                      graph_memory_bytes=300 * 2**20)
    gpu["environment"] = {"device": "cuda", "gpu": "NVIDIA H200"}
    for repeat in gpu["workloads"][0]["repeats"]:
        repeat.update(padding_token_pct=9.4, batch_size_histogram={"3": 10})
    gpu["workloads"][0]["summary"] = summarize(gpu["workloads"][0]["repeats"])
    write_result(tmp_path, "gpu", "O2_default", gpu)
    rows = _rows(tmp_path)
    assert sorted(rows) == ["O2_default @ CPU", "O2_default @ NVIDIA H200"]
    assert [rows[name][11] for name in sorted(rows)] == ["33.3 predicted", "9.4"]
