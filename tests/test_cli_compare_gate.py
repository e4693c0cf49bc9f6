"""`graphbench compare` and `graphbench gate` through typer's CliRunner: formats, exit codes 0/1/2, report files."""

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
    """baseline, same (noise only), slower (10 % fewer tokens/s), other-hash, three-repeat sets."""
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
    assert r.stdout.startswith("gate: PASS")
    assert "output_tokens_per_s" in r.stdout and "threshold-only" in r.stdout


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
    assert "regressed" in r.stdout and "significant" in r.stdout
    r = runner.invoke(app, ["compare", b, c, "--format", "json", "-m", "tokens_per_s"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    comps = data["comparisons"]
    assert len(comps) == 4 and {x["verdict"] for x in comps} == {"regressed"}
    assert all(x["p_value"] == pytest.approx(2 / 252) and x["significant"] for x in comps)
    r = runner.invoke(app, ["compare", b, c, "--format", "csv", "-m", "startup_s", "-m", "tpot_p99"])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert {row["metric"] for row in rows} == {"startup_s", "tpot_p99_ms"}
    assert len(rows) == 2 + 4
    startup = [row for row in rows if row["metric"] == "startup_s"]
    assert all(row["p_value"] == "" and row["verdict"] == "n/a" for row in startup)
    r = runner.invoke(app, ["compare", b, c, "--bootstrap", "100", "-m", "tokens_per_s"])
    assert r.exit_code == 0 and "ratio CI 95%" in r.stdout


def test_compare_errors(sets, tmp_path):
    b = str(sets["baseline"])
    r = runner.invoke(app, ["compare", b, b, "--format", "xml"])
    assert r.exit_code == 2 and "unknown format" in r.stderr
    other = write_set(tmp_path / "other", [make_result("O9-default")])
    r = runner.invoke(app, ["compare", b, str(other)])
    assert r.exit_code == 2 and "no benchmark point" in r.stderr


def test_stored_fixtures(tmp_path):
    """tests/data/gate: a small committed baseline and a current set with a 10 % tokens/s drop on O2."""
    base, cur = DATA / "baseline", DATA / "current"
    r = gate("-b", str(base), "-c", str(base))
    assert r.exit_code == 0, r.output
    md = tmp_path / "s.md"
    r = gate("-b", str(base), "-c", str(cur), "--markdown", str(md))
    assert r.exit_code == 1, r.output
    assert "O2-default" in r.stdout.split("REGRESSED", 1)[1]
    assert "O0-default (graphbench) workload" not in "".join(
        line for line in r.stdout.splitlines() if line.startswith("REGRESSED"))
    r = runner.invoke(app, ["compare", str(base), str(cur), "--format", "json", "-m", "tokens_per_s"])
    by_point = {(x["label"], x["workload"]): x for x in json.loads(r.stdout)["comparisons"]}
    assert by_point[("O2-default", "closed-c4")]["change_pct"] == pytest.approx(-10.0, abs=1.5)
    assert by_point[("O0-default", "closed-c4")]["verdict"] in ("unchanged", "improved", "regressed")
