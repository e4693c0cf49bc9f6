"""Structural validation in the results loader (reports/store.py: check_shape).

A result file whose shape is wrong (an object where a list belongs, a string where an object
belongs, ...) is skipped with a one-line reason naming the field, like a file of invalid JSON, so
`report`, `tune` and `plan` warn and go on instead of crashing in whichever reader touches it first.
Absent or null optional fields stay allowed: old and failed results lack some.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from graphbench.cli.main import app
from graphbench.errors import GraphbenchError
from graphbench.reports.compare_match import load_side
from graphbench.reports.store import (
    KIND,
    check_shape,
    load_results,
    migrate,
    write_result,
)
from tests.test_gate import make_result

DATA = Path(__file__).parent / "data"
GATE_BASELINE = DATA / "gate" / "baseline"
BASE_FILE = GATE_BASELINE / "cpu-test" / "0002_O2-default.json"  # schema v1, workloads closed-c1 and closed-c4

Mutation = Callable[[dict[str, Any]], None]


def base() -> dict[str, Any]:
    return json.loads(BASE_FILE.read_text())


def _workload(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda d: next(w for w in d["workloads"] if w["name"] == name)


c1, c4 = _workload("closed-c1"), _workload("closed-c4")


def _set(get: Callable[[dict[str, Any]], dict[str, Any]], key: str, value: Any) -> Mutation:
    return lambda d: get(d).__setitem__(key, value)


def _top(key: str, value: Any) -> Mutation:
    return _set(lambda d: d, key, value)


def _repeat(name: str, index: int, key: str, value: Any) -> Mutation:
    return lambda d: _workload(name)(d)["repeats"][index].__setitem__(key, value)


def _unnamed_with_bad_repeats(d: dict[str, Any]) -> None:
    del d["workloads"][0]["name"]
    d["workloads"][0]["repeats"] = "none"


# (case id, mutation, the exact reason the file is skipped with)
BROKEN: list[tuple[str, Mutation, str]] = [
    ("config-string", _top("config", "O2"), "'config' is not an object"),
    ("environment-list", _top("environment", ["cpu"]), "'environment' is not an object"),
    ("startup-list", _top("startup", [1.0, 2.0]), "'startup' is not an object"),
    ("startup-number", _top("startup", 12.0), "'startup' is not an object"),
    ("startups-object", _top("startups", {"cold": True}), "'startups' is not a list of objects"),
    ("startups-item-string", lambda d: d["startups"].append("warm"), "'startups' is not a list of objects"),
    ("workloads-object", lambda d: d.__setitem__("workloads", {w["name"]: w for w in d["workloads"]}),
     "'workloads' is not a list of objects"),
    ("workloads-item-string", lambda d: d["workloads"].__setitem__(0, "closed-c1"),
     "'workloads' is not a list of objects"),
    ("workload-name-number", _set(c1, "name", 1), "workload #1: 'name' is not a string"),
    ("repeats-object", _set(c1, "repeats", {"0": {}}), "workload 'closed-c1': 'repeats' is not a list of objects"),
    ("repeats-item-string", lambda d: c4(d)["repeats"].__setitem__(0, "fast"),
     "workload 'closed-c4': 'repeats' is not a list of objects"),
    ("repeats-unnamed-workload", _unnamed_with_bad_repeats, "workload #1: 'repeats' is not a list of objects"),
    ("summary-list", _set(c4, "summary", []), "workload 'closed-c4': 'summary' is not an object"),
    ("config-compilation-string", _set(lambda d: d["config"], "compilation", "O2"),
     "'config': 'compilation' is not an object"),
    ("startup-cudagraph-mode-string", _set(lambda d: d["startup"], "cudagraph_mode", "FULL"),
     "'startup': 'cudagraph_mode' is not an object"),
    ("startups-cudagraph-mode-string", _set(lambda d: d["startups"][0], "cudagraph_mode", "FULL"),
     "'startups' item #1: 'cudagraph_mode' is not an object"),
    ("histogram-string", _repeat("closed-c4", 1, "batch_size_histogram", "4:60"),
     "workload 'closed-c4': repeat #2: 'batch_size_histogram' is not an object"),
    ("step-ms-by-mode-list", _repeat("closed-c1", 0, "step_ms_by_mode", [1.0]),
     "workload 'closed-c1': repeat #1: 'step_ms_by_mode' is not an object"),
    ("step-ms-by-mode-values", _repeat("closed-c1", 0, "step_ms_by_mode", {"FULL": 1.7}),
     "workload 'closed-c1': repeat #1: 'step_ms_by_mode' is not an object of objects"),
    ("slowest-steps-string", _repeat("closed-c1", 2, "slowest_steps", "7.9 ms"),
     "workload 'closed-c1': repeat #3: 'slowest_steps' is not a list of objects"),
    ("tokens-per-s-string", _repeat("closed-c4", 0, "output_tokens_per_s", "fast"),
     "workload 'closed-c4': repeat #1: 'output_tokens_per_s' is not a number"),
    ("step-total-string", _repeat("closed-c1", 1, "step_ms_by_mode", {"FULL": {"total_ms": "1.7", "n": 3}}),
     "workload 'closed-c1': repeat #2: step_ms_by_mode 'FULL': 'total_ms' is not a number"),
    ("slowest-step-without-ms", _repeat("closed-c1", 0, "slowest_steps", [{"num_tokens": 4}]),
     "workload 'closed-c1': repeat #1: a slowest step: 'ms' is not a number"),
    # what compare matches points by, and what the capture plan's table counts (a fuzz pass crashed both)
    ("config-hash-object", _top("config_hash", {}), "'config_hash' is not a string"),
    ("capture-sizes-number", _set(lambda d: d["startup"], "capture_sizes", -1),
     "'startup': 'capture_sizes' is not a list of whole numbers >= 1"),
    ("capture-sizes-mixed", _set(lambda d: d["startups"][0], "capture_sizes", [1, "a"]),
     "'startups' item #1: 'capture_sizes' is not a list of whole numbers >= 1"),
    ("mixed-capture-sizes-zero", _set(lambda d: d["startup"], "mixed_capture_sizes", [0, 8]),
     "'startup': 'mixed_capture_sizes' is not a list of whole numbers >= 1"),
    ("deferred-recordings-string", _set(lambda d: d["startup"], "deferred_recordings", "x"),
     "'startup': 'deferred_recordings' must be a whole number >= 0, got 'x'"),
]
# The six shapes of the UX audit that crashed `report` / `tune` (or were dropped silently by `plan`).
AUDIT = ["config-string", "startup-list", "repeats-item-string", "workloads-object", "workloads-item-string",
         "repeats-object"]


def broken(mutation: Mutation) -> dict[str, Any]:
    data = base()
    mutation(data)
    return data


def write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))
    return path


@pytest.mark.parametrize(("mutation", "reason"), [pytest.param(m, r, id=i) for i, m, r in BROKEN])
def test_a_broken_shape_is_skipped_with_a_reason_naming_the_field(tmp_path, mutation, reason):
    good = write(tmp_path / "m" / "0001_good.json", base())
    bad = write(tmp_path / "m" / "0002_bad.json", broken(mutation))
    loaded = load_results([tmp_path])
    assert loaded.skipped == [(bad, reason)]
    assert [r["_path"] for r in loaded.results] == [str(good)]
    with pytest.raises(ValueError) as excinfo:
        check_shape(migrate(broken(mutation)))
    assert str(excinfo.value) == reason


def test_every_audit_case_is_covered():
    assert set(AUDIT) <= {case for case, _, _ in BROKEN}


def test_a_v1_file_whose_startup_is_a_list_is_named_by_startup_not_by_the_migrated_startups(tmp_path):
    data = base()
    del data["startups"]
    data["startup"] = ["cold"]  # the v1 -> v2 migration wraps it into startups: [["cold"]]
    bad = write(tmp_path / "0001_v1.json", data)
    assert load_results([bad]).skipped == [(bad, "'startup' is not an object")]


def test_unknown_schema_and_invalid_json_keep_their_reasons(tmp_path):
    future = write(tmp_path / "0001_future.json", dict(broken(_top("config", "x")), schema_version=99))
    (tmp_path / "0002_truncated.json").write_text('{"kind": "graphbench-result", "config": ')
    loaded = load_results([tmp_path])
    assert loaded.skipped[0] == (future, "unknown schema_version 99 (this graphbench reads 1..2)")
    assert loaded.skipped[1][0].name == "0002_truncated.json" and "Expecting value" in loaded.skipped[1][1]


def test_absent_or_null_optional_fields_still_load(tmp_path):
    variants = {
        "bare": {"kind": KIND, "schema_version": 2},
        "nulls": dict(base(), config=None, environment=None, startup=None, startups=None, workloads=None),
        "no-startups-v1": {k: v for k, v in base().items() if k != "startups"},
        "empty-workloads": dict(base(), workloads=[]),
        "workload-without-repeats-summary-name": dict(base(), workloads=[{"kind": "closed", "concurrency": 1}]),
        "null-workload-fields": dict(base(), workloads=[{"name": None, "repeats": None, "summary": None}]),
        "empty-repeat": dict(base(), workloads=[{"name": "w", "repeats": [{}], "summary": {}}]),
        "null-repeat-fields": dict(base(), workloads=[{"name": "w", "repeats": [
            {"batch_size_histogram": None, "step_ms_by_mode": {"FULL": None}, "slowest_steps": None}]}]),
        "null-nested": dict(base(), config={"compilation": None, "speculative": None},
                            startup={"cudagraph_mode": None}, startups=[{}]),
    }
    for name, data in variants.items():
        write(tmp_path / f"0001_{name}.json", data)
    loaded = load_results([tmp_path])
    assert loaded.skipped == []
    assert len(loaded.results) == len(variants)


def test_results_as_written_by_graphbench_still_load(tmp_path):
    for label, status in (("O2", "ok"), ("O3", "failed")):
        write_result(tmp_path, "cpu-test", label, make_result(label, status=status))
    loaded = load_results([tmp_path])
    assert loaded.skipped == [] and [r["status"] for r in loaded.results] == ["ok", "failed"]


def _loaded_before_validation(file: Path) -> bool:
    """What the loader accepted before check_shape existed: JSON, a graphbench result, a known schema."""
    try:
        data = json.loads(file.read_text())
        if not isinstance(data, dict) or data.get("kind") != KIND:
            return False
        migrate(data)
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return True


def test_no_fixture_under_tests_data_becomes_skipped():
    files = sorted(DATA.rglob("*.json"))
    assert len(files) >= 20
    expected_skipped = {f for f in files if not _loaded_before_validation(f)}
    loaded = load_results([DATA])
    assert {file for file, _ in loaded.skipped} == expected_skipped
    assert len(loaded.results) == len(files) - len(expected_skipped) >= 20
    # today that is exactly the two deliberately broken report fixtures and two vLLM bench serve outputs
    # (request traces for `tune --from`, not graphbench results)
    assert {f.name for f in expected_skipped} == {"9998_truncated.json", "9999_future.json", "bench-serve-detailed.json",
                                                  "bench-serve-timed-trace.json"}


# ---------------------------------------------------------------- the commands warn and go on


@pytest.fixture(scope="module")
def broken_folder(tmp_path_factory) -> tuple[Path, dict[Path, str]]:
    """The gate baseline (two good points) plus one file per audit case, all in one machine folder."""
    root = tmp_path_factory.mktemp("broken") / "results"
    shutil.copytree(GATE_BASELINE, root)
    cases = {case: (mutation, reason) for case, mutation, reason in BROKEN}
    reasons = {}
    for number, case in enumerate(AUDIT, start=3):
        mutation, reason = cases[case]
        reasons[write(root / "cpu-test" / f"{number:04d}_{case}.json", broken(mutation))] = reason
    return root, reasons


def _invoke(*args: Any):
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code == 0, result.output
    return result


def _assert_warned(stderr: str, reasons: dict[Path, str]) -> None:
    lines = [" ".join(line.split()) for line in stderr.splitlines()]
    for file, reason in reasons.items():
        assert f"warning: skipped {file}: {reason}" in lines, stderr


def test_report_warns_and_goes_on(broken_folder, tmp_path):
    root, reasons = broken_folder
    result = _invoke("report", root, "-o", tmp_path / "out")
    _assert_warned(result.stderr, reasons)
    assert f"{len(reasons)} malformed files skipped" in (tmp_path / "out" / "report.md").read_text()


def test_tune_warns_and_goes_on(broken_folder):
    root, reasons = broken_folder
    result = _invoke("tune", "--from", root, "--max-graphs", "3")
    _assert_warned(result.stderr, reasons)


def test_plan_warns_and_goes_on(broken_folder):
    root, reasons = broken_folder
    result = _invoke("plan", root, "--slo", "tpot_p99_ms=50")
    _assert_warned(result.stderr, reasons)
    assert "O2-default" in result.stdout and "O0-default" in result.stdout


def test_compare_and_gate_sides_skip_them_with_a_warning(broken_folder):
    root, reasons = broken_folder
    results, warnings = load_side(root, "baseline")
    assert sorted(r["label"] for r in results) == ["O0-default", "O2-default"]
    assert sorted(warnings) == sorted(f"baseline: skipped malformed file {f}: {why}" for f, why in reasons.items())



def test_the_next_file_number_goes_past_9999(tmp_path):
    """A folder with 9999_ and 10000_ files: the next result is 10001_, and the choice terminates."""
    from graphbench.reports.store import write_result

    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "9999_a.json").write_text("{}")
    (folder / "10000_a.json").write_text("{}")
    path = write_result(tmp_path, "m", "a", {"label": "a"})
    assert path.name == "10001_a.json"


@pytest.mark.parametrize("field, value, said", [
    ("label", ["a"], "'label' is not a string"),
    ("label", "a\udc80b", "not valid text"),
    ("stands_for", [f"x{i}" for i in range(5000)], "more than a sweep's"),
    ("stands_for", "O2_default", "not a list of labels"),
    ("sweep", {"round": [1]}, "'round' is not an object"),
])
def test_a_result_graphbench_did_not_write_is_skipped_by_name(tmp_path, field, value, said):
    from graphbench.reports.store import load_results

    record = {"kind": "graphbench-result", "schema_version": 2, "label": "a", "system": "graphbench",
              "status": "ok", "workloads": [], field: value}
    (tmp_path / "0001_a.json").write_text(json.dumps(record))
    loaded = load_results([tmp_path])
    assert loaded.results == [] and said in loaded.skipped[0][1]


def test_busy_host_repeats_must_be_repeat_numbers(tmp_path):
    from graphbench.reports.store import load_results

    record = {"kind": "graphbench-result", "schema_version": 2, "label": "a", "system": "graphbench",
              "status": "ok", "workloads": [{"name": "w", "repeats": [], "busy_host_repeats": 3}]}
    (tmp_path / "0001_a.json").write_text(json.dumps(record))
    assert "busy_host_repeats" in load_results([tmp_path]).skipped[0][1]


@pytest.mark.parametrize("field, value", [("concurrency", -4), ("concurrency", 0), ("concurrency", 2.5),
                                          ("num_requests", "3"), ("request_rate", -1), ("request_rate", "inf")])
def test_workload_counts_and_rates_that_cannot_be_are_skipped_by_name(tmp_path, field, value):
    """A result with a negative concurrency was planned as if it were real (a wrong success in `plan`)."""
    from graphbench.reports.store import load_results

    record = {"kind": "graphbench-result", "schema_version": 2, "label": "a", "system": "graphbench",
              "status": "ok", "workloads": [{"name": "w", "repeats": [], field: value}]}
    (tmp_path / "0001_a.json").write_text(json.dumps(record))
    loaded = load_results([tmp_path])
    assert loaded.results == [] and f"workload 'w': '{field}'" in loaded.skipped[0][1]


@pytest.mark.parametrize("index", ["2", [1], 0, True])
def test_a_round_index_that_is_not_a_count_is_skipped_by_name(tmp_path, index):
    """--resume keyed its measured points by it: a list raised TypeError (unhashable) mid-sweep."""
    from graphbench.reports.store import load_results

    record = {"kind": "graphbench-result", "schema_version": 2, "label": "a", "system": "graphbench",
              "status": "ok", "sweep": {"round": {"index": index, "of": 3}}, "workloads": []}
    (tmp_path / "0001_a.json").write_text(json.dumps(record))
    loaded = load_results([tmp_path], merge=False)
    assert loaded.results == [] and "round 'index'" in loaded.skipped[0][1]


def test_the_sweep_id_file_another_program_left_is_replaced_or_one_line(tmp_path):
    from graphbench.bench.sweep import sweep_id_for

    (tmp_path / "a" / ".sweep").mkdir(parents=True)
    (tmp_path / "a" / ".sweep" / "sweep-id").write_bytes(b"\xff\xfe not an id")
    new = sweep_id_for(tmp_path / "a", resume=True)
    assert len(new) == 12 and (tmp_path / "a" / ".sweep" / "sweep-id").read_text().strip() == new
    assert sweep_id_for(tmp_path / "a", resume=True) == new
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / ".sweep").write_text("a file where the folder goes")
    with pytest.raises(GraphbenchError, match=r"cannot write .*sweep-id"):
        sweep_id_for(tmp_path / "b", resume=True)


def test_an_integer_of_thousands_of_digits_is_named_as_such(tmp_path):
    # (the reason was Python's own advice to raise sys.set_int_max_str_digits)
    record = {"kind": "graphbench-result", "schema_version": 2, "label": "a", "system": "graphbench", "status": "ok",
              "workloads": []}
    text = json.dumps(record).replace('"workloads": []', '"workloads": [], "seed": ' + "7" * 5000)
    (tmp_path / "0001_a.json").write_text(text)
    loaded = load_results([tmp_path])
    assert loaded.results == [] and loaded.skipped[0][1] == "an integer of more than 4300 digits, which no result holds"
