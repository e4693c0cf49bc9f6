"""Reports, compare, gate and plan on result files produced by real `graphbench sweep` runs (CPU, tiny model).

tests/data/report/real-cpu-a and real-cpu-b: two sweeps of the same code (-O0, -O2, hf-eager;
closed loop at concurrency 1 and 4; 4 repeats), made with
`graphbench sweep --levels 0,2 --ladders default --concurrency 1,4 --prompt-len 16 --output-len 8
--repeats 4 --peers hf-eager --max-num-seqs 8`.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphbench.cli.main import app

DATA = Path(__file__).resolve().parent / "data" / "report"
A, B = DATA / "real-cpu-a", DATA / "real-cpu-b"
runner = CliRunner()


def test_summary_csv_holds_the_measured_medians(tmp_path):
    result = runner.invoke(app, ["report", str(A), "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    rows = {(r["label"], r["workload"]): r for r in csv.DictReader((tmp_path / "summary.csv").open())}
    assert set(rows) == {(label, w) for label in ("O0_default", "O2_default", "hf-eager") for w in ("closed-c1", "closed-c4")}
    # the medians over 4 repeats, as stored in the result files
    assert float(rows[("O0_default", "closed-c1")]["output_tokens_per_s"]) == pytest.approx(524.8140386767168, rel=1e-12)
    assert float(rows[("O2_default", "closed-c4")]["output_tokens_per_s"]) == pytest.approx(1058.109407, rel=1e-9)
    assert float(rows[("hf-eager", "closed-c4")]["output_tokens_per_s"]) == pytest.approx(910.718978, rel=1e-9)
    assert rows[("O2_default", "closed-c1")]["cudagraph_mode_requested"] == "FULL_AND_PIECEWISE"
    assert rows[("O2_default", "closed-c1")]["cudagraph_mode_resolved"] == "NONE"  # the CPU: no graphs
    html = (tmp_path / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') >= 3


def test_compare_gives_the_ratio_of_medians(tmp_path):
    result = runner.invoke(app, ["compare", str(A), str(B), "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    rows = rows["comparisons"] if isinstance(rows, dict) else rows
    row = next(r for r in rows if r["label"] == "O2_default" and r["workload"] == "closed-c4"
               and r["metric"] == "output_tokens_per_s")
    a = json.loads(next(A.rglob("*O2_default.json")).read_text())
    b = json.loads(next(B.rglob("*O2_default.json")).read_text())
    med = lambda d: next(w for w in d["workloads"] if w["name"] == "closed-c4")["summary"]["output_tokens_per_s"]["median"]
    assert row["baseline_median"] == pytest.approx(med(a)) and row["current_median"] == pytest.approx(med(b))
    assert row["ratio"] == pytest.approx(med(b) / med(a))


def test_gate_of_a_run_against_itself_passes(tmp_path):
    result = runner.invoke(app, ["gate", "--baseline", str(A), "--current", str(A), "--markdown", str(tmp_path / "g.md")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "g.md").read_text().strip()


def test_plan_on_real_results():
    result = runner.invoke(app, ["plan", str(A), "--slo", "tpot_p99_ms=1000", "--target-rps", "10", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)


# As if torch were not installed: a finder that refuses it. (sys.modules['torch'] = None would leave a
# None under 'torch' that libraries probing sys.modules for torch arrays, scipy among them, trip over.)
BLOCK_TORCH = ("import sys\n"
               "class NoTorch:\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name == 'torch' or name.startswith('torch.'):\n"
               "            raise ModuleNotFoundError('import of torch halted: torch is not installed here')\n"
               "sys.meta_path.insert(0, NoTorch())\n"
               "sys.argv = ['graphbench'] + sys.argv[1:]\n"
               "from graphbench.cli.main import main; main()")


@pytest.mark.parametrize("args", [
    ["report", str(A), "-o", "{tmp}/r"], ["compare", str(A), str(B)], ["gate", "-b", str(A), "-c", str(A)],
    ["plan", str(A), "--slo", "tpot_p99_ms=50"], ["ladder", "--max-num-seqs", "64"],
    ["tune", "--model", "closed:8", "--max-graphs", "4"], ["cache", "list"],
])
def test_commands_run_without_torch_installed(tmp_path, args):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = subprocess.run([sys.executable, "-c", BLOCK_TORCH, *args], capture_output=True, text=True, timeout=120,
                          env={"GRAPHBENCH_CACHE_ROOT": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin",
                               "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "ModuleNotFoundError" not in proc.stderr and "import of torch halted" not in proc.stderr
