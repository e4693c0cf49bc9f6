"""The report's headline ranks results of different GPU types apart (a sweep over a Ray cluster of mixed
nodes, or the folders of two machines): one row per GPU, a GPU column only when there are several."""

from __future__ import annotations

from graphbench.bench.metrics import summarize
from graphbench.reports.report import write_report
from graphbench.reports.store import write_result
from tests.test_gate import make_result


def _result(label: str, gpu: str, tokens_per_s: float, startup_s: float) -> dict:
    result = make_result(label, repeats={"closed-c4": [(tokens_per_s, 12.0)] * 3}, startup_s=startup_s)
    result["environment"] = dict(result.get("environment") or {}, device="cuda", gpu=gpu, host=f"node-{gpu[-4:]}")
    for workload in result["workloads"]:
        workload["summary"] = summarize(workload["repeats"])
    return result


def test_headline_ranks_each_gpu_type_apart(tmp_path):
    results = tmp_path / "results"
    # O2 is the best on the H200 and O1 on the A100: one ranking over both would show O2 only
    for label, gpu, tps, start in [("O1", "NVIDIA H200", 9000.0, 3.0), ("O2", "NVIDIA H200", 11000.0, 4.0),
                                   ("O1", "NVIDIA A100", 6000.0, 5.0), ("O2", "NVIDIA A100", 5000.0, 6.0)]:
        write_result(results, gpu, label, _result(label, gpu, tps, start))
    report = write_report([results], tmp_path / "report")
    rows = [(r.gpu, r.best, r.output_tokens_per_s, r.startup_warm_s) for r in report.headline.itertuples()]
    assert rows == [("NVIDIA A100", "O1", 6000.0, 5.0), ("NVIDIA H200", "O2", 11000.0, 4.0)]
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "| GPU | concurrency | best configuration |" in markdown
    assert "| NVIDIA A100 | 4 | O1 |" in markdown and "| NVIDIA H200 | 4 | O2 |" in markdown

    # one GPU type: no GPU column
    single = tmp_path / "single"
    write_result(single, "h200", "O2", _result("O2", "NVIDIA H200", 11000.0, 4.0))
    one = write_report([single], tmp_path / "report-single")
    assert "| GPU |" not in (tmp_path / "report-single" / "report.md").read_text()
    assert list(one.headline["gpu"]) == ["NVIDIA H200"]
