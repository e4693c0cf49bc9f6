"""compare and gate over folders that hold two machines' results (two GPU types under the same labels): each
GPU type is judged against the same GPU type, never pooled with the other (the hardware's gap would be the
noise floor, and a regression on either machine a tie)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from graphbench.reports.compare import compare_sets
from graphbench.reports.gate import run_gate
from graphbench.reports.store import load_results
from tests.test_gate import make_rounds, write_set

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


def _point(gpu: str, tokens_per_s: list[float], sweep_id: str) -> list[dict[str, Any]]:
    results = make_rounds("O2-default", [{"closed-c4": [(t, 12.0)] * 2} for t in tokens_per_s], sweep_id=sweep_id)
    for result in results:
        result["environment"] = dict(result["environment"], device="cuda", gpu=gpu)
    return results


def _machines(h100: list[float], h200: list[float] | None, sweep: str) -> list[dict[str, Any]]:
    return _point(H100, h100, f"{sweep}-h100") + (_point(H200, h200, f"{sweep}-h200") if h200 else [])


def test_two_gpu_types_a_side_are_compared_per_gpu_type(tmp_path):
    # the H100 is 20% slower in the current folders, the H200 unchanged: pooled with the H200's processes
    # (twice as fast) the noise floor was ~200% and the H100's regression a tie
    base = write_set(tmp_path / "b", _machines([1000.0, 1010.0, 990.0], [2000.0, 2020.0, 1990.0], "b"))
    cur = write_set(tmp_path / "c", _machines([800.0, 810.0, 795.0], [2005.0, 1995.0, 2010.0], "c"))
    report = run_gate(base, cur)
    assert report.exit_code == 1
    assert [(r.comparison.point, r.comparison.gpu) for r in report.regressions] == [
        (f"O2-default (graphbench) @ {H100}", H100)]
    tokens = [c for c in compare_sets(load_results([base]), load_results([cur]), metrics=["output_tokens_per_s"]).comparisons]
    assert [(c.gpu, c.n_baseline, c.n_current, c.verdict) for c in tokens] == [
        (H100, 3, 3, "regressed"), (H200, 3, 3, "tie")]
    assert not any("pooled" in w for w in report.warnings)  # one run a GPU type: nothing pooled
    # the CSV names the GPU type of each row
    out = subprocess.run([sys.executable, "-m", "graphbench", "compare", str(base), str(cur), "--format", "csv",
                          "-m", "output_tokens_per_s"], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("label,system,gpu,workload,")
    assert sorted(line.split(",")[2] for line in out.stdout.splitlines()[1:]) == [H100, H200]


def test_a_gpu_type_only_one_side_ran_on_is_not_compared_nor_a_vanished_point(tmp_path):
    base = write_set(tmp_path / "b", _machines([1000.0, 1010.0, 990.0], [2000.0, 2020.0, 1990.0], "b"))
    cur = write_set(tmp_path / "c", _machines([800.0, 810.0, 795.0], None, "c"))
    report = run_gate(base, cur)  # the H200's baseline is another machine's, not a point the current run lost
    assert report.exit_code == 1 and report.points == 1
    assert f"point O2-default (graphbench) @ {H200} is only in the baseline: not compared" in report.warnings
    # one GPU type a side, two different ones: compared as before, with the warning that says so
    other = write_set(tmp_path / "h200", _point(H200, [2000.0, 2020.0, 1990.0], "h200"))
    single = compare_sets(load_results([other]), load_results([cur]), metrics=["output_tokens_per_s"])
    assert [c.gpu for c in single.comparisons] == [None]
    assert any("environment gpu differs" in w for w in single.warnings)


def test_no_gpu_type_in_common_says_so(tmp_path):
    # two GPU types a side, none in common: not "no benchmark point is in both", which reads as other labels
    import pytest

    from graphbench.errors import GraphbenchError

    base = write_set(tmp_path / "b", _machines([1000.0, 1010.0, 990.0], [2000.0, 2020.0, 1990.0], "b"))
    a100 = _point("NVIDIA A100", [900.0, 905.0, 910.0], "a100")
    cur = write_set(tmp_path / "c", a100 + _point("NVIDIA B200", [3000.0, 3010.0, 2990.0], "b200"))
    with pytest.raises(GraphbenchError, match=r"on the same GPU type \(the baseline ran them on NVIDIA H100 80GB "
                                              r"HBM3, NVIDIA H200; the current on NVIDIA A100, NVIDIA B200\)"):
        run_gate(base, cur)


def test_compare_of_a_folder_whose_only_point_failed_names_the_failure(tmp_path):
    # (it said only that no point was in both folders, which reads as two folders of other labels)
    from typer.testing import CliRunner

    from graphbench.cli.main import app
    from tests.test_gate import make_result

    folder = write_set(tmp_path / "f", [make_result("O2-default", status="failed")])
    result = CliRunner().invoke(app, ["compare", str(folder), str(folder)])
    assert result.exit_code == 2
    assert "that ran: failed benchmark point: " in result.output and "O2-default" in result.output
