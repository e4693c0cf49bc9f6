"""`graphbench compare` and `graphbench gate` through typer's CliRunner: formats, exit codes 0/1/2/3, report files."""

from __future__ import annotations

import csv
import io
import json
import random
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphbench.cli.main import app
from tests.test_gate import WORKLOADS, make_result, noisy_set, write_set

runner = CliRunner()
DATA = Path(__file__).parent / "data" / "gate"


@pytest.fixture
def sets(tmp_path: Path) -> dict[str, Path]:
    """baseline, same (noise only), slower (10 % fewer tokens/s): every point measured in 5 processes (rounds)."""
    rng = random.Random(42)
    return {
        "baseline": write_set(tmp_path / "baseline", noisy_set(rng, 0.015)),
        "same": write_set(tmp_path / "same", noisy_set(rng, 0.015)),
        "slower": write_set(tmp_path / "slower", noisy_set(rng, 0.015, tokens_factor=0.9)),
        "tmp": tmp_path,
    }


def gate(*args: str):
    return runner.invoke(app, ["gate", *args])


def test_gate_exit_0_on_noise(sets):
    r = gate("--baseline", str(sets["baseline"]), "--current", str(sets["same"]))
    assert r.exit_code == 0, r.output
    # the fixture's first point records no graph memory on a CPU: not measured, untestable (not a pass)
    assert r.stdout.startswith("gate: PASS (12 checks on 2 points: 11 pass, 1 untestable")
    header = next(line for line in r.stdout.splitlines() if "status" in line)
    assert [col.strip() for col in header.strip("┃ ").split("┃")] == [
        "status", "point", "workload", "metric", "baseline", "current", "change", "noise", "p", "processes",
        "threshold", "why"]
    assert "output_tokens_per_s" in r.stdout and "5/5" in r.stdout and "within noise" in r.stdout


def test_gate_exit_1_on_regression_with_reports(sets):
    md, xml = sets["tmp"] / "out" / "summary.md", sets["tmp"] / "gate.xml"
    js = sets["tmp"] / "gate.json"
    r = gate("-b", str(sets["baseline"]), "-c", str(sets["slower"]), "--markdown", str(md), "--junit", str(xml),
             "--json", str(js))
    assert r.exit_code == 1, r.output
    assert r.stdout.startswith("gate: FAIL: 4 regressions")
    assert r.stdout.count("REGRESSED O") == 4
    text = md.read_text()
    assert text.splitlines()[0].startswith("## ❌ graphbench gate: FAIL")
    assert text.count("| ❌ regressed |") == 4
    root = ET.parse(xml).getroot()
    cases = root.iter("testcase")
    failures = [c for c in cases if c.find("failure") is not None]
    assert len(failures) == 4
    assert {c.get("name") for c in failures} == {f"{w}/output_tokens_per_s" for w in WORKLOADS}
    report = json.loads(js.read_text())
    assert report["verdict"] == "fail" and report["counts"]["regressed"] == 4


def test_gate_threshold_options(sets):
    b, c = str(sets["baseline"]), str(sets["slower"])
    # a looser tokens/s threshold lets a 10 % drop through
    assert gate("-b", b, "-c", c, "--threshold", "tokens_per_s:-15").exit_code == 0
    # switching tokens/s off entirely, too
    assert gate("-b", b, "-c", c, "-t", "output_tokens_per_s:off").exit_code == 0
    r = gate("-b", b, "-c", c, "--threshold", "tokens_per_sec:-5")
    assert r.exit_code == 2
    assert r.stderr.strip() == "error: unknown metric 'tokens_per_sec'; did you mean 'output_tokens_per_s'?"
    assert len(r.stderr.strip().splitlines()) == 1
    r = gate("-b", b, "-c", c, "--threshold", "tokens_per_s:5")
    assert r.exit_code == 2 and "must be <= 0" in r.stderr
    r = gate("-b", b, "-c", c, "--alpha", "2")
    assert r.exit_code == 2 and "alpha" in r.stderr


def test_gate_exit_2_on_unusable_input_and_error_reports(sets):
    empty = sets["tmp"] / "empty"
    empty.mkdir()
    md, xml = sets["tmp"] / "err.md", sets["tmp"] / "err.xml"
    r = gate("-b", str(sets["baseline"]), "-c", str(empty), "--markdown", str(md), "--junit", str(xml))
    assert r.exit_code == 2
    assert r.stderr.startswith("error: no current results loaded")
    assert "ERROR" in md.read_text().splitlines()[0]
    assert ET.parse(xml).getroot().find("testsuite/testcase/error") is not None
    r = gate("-b", str(sets["baseline"]), "-c", str(sets["tmp"] / "nope"))
    assert r.exit_code == 2 and "no such result file or folder" in r.stderr
    failed = write_set(sets["tmp"] / "failed", [make_result("O0-default", status="failed")])
    r = gate("-b", str(sets["baseline"]), "-c", str(failed))
    assert r.exit_code == 2 and "failed benchmark point" in r.stderr


def test_gate_config_hash_mismatch_exit_2_unless_allowed(tmp_path):
    b = write_set(tmp_path / "b", [make_result(config_hash="aaaa")])
    c = write_set(tmp_path / "c", [make_result(config_hash="bbbb")])
    r = gate("-b", str(b), "-c", str(c))
    assert r.exit_code == 2 and "config hash differs" in r.stderr
    r = gate("-b", str(b), "-c", str(c), "--allow-mismatch")
    assert r.exit_code == 0, r.output
    assert "mismatch allowed" in r.stderr


def test_gate_accepts_files_and_several_folders(sets):
    files = sorted(str(p) for p in sets["baseline"].rglob("*.json"))
    args = [a for f in files for a in ("-b", f)]
    r = gate(*args, "-c", str(sets["same"]))
    assert r.exit_code == 0, r.output


def test_compare_formats(sets):
    b, c = str(sets["baseline"]), str(sets["slower"])
    r = runner.invoke(app, ["compare", b, c])
    assert r.exit_code == 0, r.output
    assert "output_tokens_per_s (tok/s, higher-is-better)" in r.stdout
    header = next(line for line in r.stdout.splitlines() if "verdict" in line)
    assert [col.strip() for col in header.strip("┃ ").split("┃")] == [
        "point", "workload", "baseline", "current", "ratio", "change", "noise", "p", "processes", "verdict"]
    tokens = r.stdout.split("output_tokens_per_s (tok/s, higher-is-better)", 1)[1].split("└", 1)[0]
    rows = [line for line in tokens.splitlines() if "(graphbench)" in line]
    assert len(rows) == 4 and all("regressed (" in row and "vs noise" in row and "5/5" in row for row in rows)
    assert "unchanged" not in r.stdout and "tie (" in r.stdout  # the verdict with its reason
    r = runner.invoke(app, ["compare", b, c, "--format", "json", "-m", "tokens_per_s"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    comps = data["comparisons"]
    assert len(comps) == 4 and {x["verdict"] for x in comps} == {"regressed"}
    assert all(x["p_value"] == pytest.approx(2 / 252) and x["significant"] for x in comps)  # 5 vs 5 processes
    assert all(x["test"] == "Mann-Whitney U" and x["n_baseline"] == 5 and 0 < x["noise_pct"] < 8 for x in comps)
    r = runner.invoke(app, ["compare", b, c, "--format", "csv", "-m", "startup_s", "-m", "tpot_p99"])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert {row["metric"] for row in rows} == {"startup_s", "tpot_p99_ms"}
    assert len(rows) == 2 + 4
    assert {"noise_pct", "test"} <= set(rows[0])
    # startup and TPOT did not change: ties, each tested over the 5 processes a side, with its noise floor
    assert all(row["verdict"] == "tie" and row["test"] == "Mann-Whitney U" and float(row["noise_pct"]) > 0
               and row["p_value"] != "" and row["n_baseline"] == "5" for row in rows)
    r = runner.invoke(app, ["compare", b, c, "--bootstrap", "100", "-m", "tokens_per_s"])
    assert r.exit_code == 0 and "ratio CI 95%" in r.stdout


def test_compare_closes_with_the_verdicts_counted_and_the_thresholds(sets):
    b, c = str(sets["baseline"]), str(sets["slower"])
    data = json.loads(runner.invoke(app, ["compare", b, c, "--format", "json"]).stdout)
    # 10% fewer tokens/s: output and total tokens/s and the duration regress at each of the 4 point-workloads
    verdicts = [x["verdict"] for x in data["comparisons"]]
    counts = {v: verdicts.count(v) for v in ("regressed", "improved", "tie", "n/a")}
    assert data["counts"] == counts and counts["regressed"] == 12 and sum(counts.values()) == len(verdicts)
    effects = data["thresholds"]["min_effect_pct"]
    assert data["thresholds"]["alpha"] == 0.05 and data["thresholds"]["noise_ranges"] == 2.0
    assert data["thresholds"]["resolution"] == {"graph_memory_bytes": 2 * 2**20}  # (a page: metric_catalogue)
    assert effects["output_tokens_per_s"] == 5.0 and effects["tpot_p99_ms"] == 10.0 and effects["startup_s"] == 20.0
    assert set(effects) == {x["metric"] for x in data["comparisons"]}
    r = runner.invoke(app, ["compare", b, c])
    assert r.stdout.splitlines()[-1] == (
        f"12 regressed, {counts['improved']} improved, {counts['tie']} ties, {counts['n/a']} n/a (not testable) of "
        f"{len(verdicts)} comparisons; a difference is called when p < 0.05, beyond 2x the larger range between "
        "processes and beyond the metric's minimum effect (5% the others; 10% graph_memory_bytes, tpot_p99_ms; "
        "20% startup_s)")
    r = runner.invoke(app, ["compare", b, c, "-m", "tokens_per_s", "--alpha", "0.01"])
    assert r.stdout.splitlines()[-1] == (
        "4 regressed, 0 improved, 0 ties, 0 n/a (not testable) of 4 comparisons; a difference is called when "
        "p < 0.01, beyond 2x the larger range between processes and beyond the metric's minimum effect (5% "
        "output_tokens_per_s)")


def test_compare_errors(sets, tmp_path):
    b = str(sets["baseline"])
    r = runner.invoke(app, ["compare", b, b, "--format", "xml"])
    assert r.exit_code == 2 and "unknown format" in r.stderr
    other = write_set(tmp_path / "other", [make_result("O9-default")])
    r = runner.invoke(app, ["compare", b, str(other)])
    assert r.exit_code == 2 and "no benchmark point" in r.stderr


def test_stored_fixtures(tmp_path):
    """tests/data/gate: a small committed baseline and a current set with a 10 % tokens/s drop on O2, each
    point one process (no rounds): the gate cannot judge the drop (exit 3), and fails nothing."""
    base, cur = DATA / "baseline", DATA / "current"
    r = gate("-b", str(base), "-c", str(base))
    assert r.exit_code == 0, r.output
    md, xml = tmp_path / "s.md", tmp_path / "s.xml"
    r = gate("-b", str(base), "-c", str(cur), "--markdown", str(md), "--junit", str(xml))
    assert r.exit_code == 3, r.output
    assert r.stdout.startswith("gate: CANNOT JUDGE") and "REGRESSED" not in r.stdout
    inconclusive = [line for line in r.stdout.splitlines() if line.startswith("│ inconclusive")]
    assert len(inconclusive) == 2 and all("O2-default" in line and "output_tokens_per_s" in line
                                          for line in inconclusive)
    assert "too few processes for a verdict" in r.stderr
    assert md.read_text().startswith("## ⚠️ graphbench gate: CANNOT JUDGE")
    assert ET.parse(xml).getroot().find("testsuite").get("failures") == "0"
    r = runner.invoke(app, ["compare", str(base), str(cur), "--format", "json", "-m", "tokens_per_s"])
    by_point = {(x["label"], x["workload"]): x for x in json.loads(r.stdout)["comparisons"]}
    assert by_point[("O2-default", "closed-c4")]["change_pct"] == pytest.approx(-10.0, abs=1.5)
    assert {x["verdict"] for x in by_point.values()} == {"n/a"}  # one process a side
    assert all(x["n_baseline"] == x["n_current"] == 1 and x["p_value"] is None for x in by_point.values())


def test_gate_exit_3_when_the_regression_ran_on_a_busy_host(sets, tmp_path):
    """The slower set's processes flagged busy_host: the drop is inconclusive (exit 3), not a regression."""
    busy = write_set(tmp_path / "busy", [_flag_busy(r) for r in noisy_set(random.Random(7), 0.015, tokens_factor=0.9)])
    r = gate("-b", str(sets["baseline"]), "-c", str(busy))
    assert r.exit_code == 3, r.output
    assert r.stdout.startswith("gate: CANNOT JUDGE") and "REGRESSED" not in r.stdout
    rows = [line for line in r.stdout.splitlines() if line.startswith("│ inconclusive")]
    assert len(rows) == 4 and all("output_tokens_per_s" in row and "busy host" in row for row in rows)


def _flag_busy(result: dict) -> dict:
    for w in result["workloads"]:
        w["busy_host_repeats"] = list(range(len(w["repeats"])))
        for rep in w["repeats"]:
            rep["busy_host"] = "its main thread waited 40% of the repeat for a CPU"
    return result


def test_a_gate_report_never_overwrites_one_of_its_inputs(tmp_path):
    """--json / --junit / --markdown naming a result file the gate reads: refused, the file intact."""
    base = tmp_path / "base"
    result = make_result()
    write_set(base, [result])
    victim = next(base.rglob("*.json"))
    before = victim.read_bytes()
    for option in ("--json", "--junit", "--markdown"):
        r = gate("-b", str(base), "-c", str(base), option, str(victim))
        assert r.exit_code == 2 and "one of the gate's input files" in r.output, r.output
        assert victim.read_bytes() == before
