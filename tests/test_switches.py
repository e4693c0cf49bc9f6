"""The GRAPHBENCH_* switch registry (graphbench/switches.py): what results record, and that the code,
the registry and docs/DEVELOPING.md agree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graphbench.reports.frame import environment_line
from graphbench.switches import SWITCH_DEFAULTS, changed_switches, switch_value

ROOT = Path(__file__).resolve().parents[1]
# GRAPHBENCH_* names that are not engine switches: a place, a test hook, a flag of TP worker processes
NOT_SWITCHES = {"GRAPHBENCH_CACHE_ROOT", "GRAPHBENCH_INJECT_FAULT", "GRAPHBENCH_TP_WORKER"}


def test_changed_switches_are_those_off_their_default_sorted():
    environ = {"GRAPHBENCH_PDL": "0", "GRAPHBENCH_DIRECT_LAUNCH": "1", "GRAPHBENCH_CACHE_ROOT": "/tmp/x",
               "GRAPHBENCH_GEMV": "0", "GRAPHBENCH_NOT_A_SWITCH": "1", "PATH": "/bin"}
    assert changed_switches(environ) == {"GRAPHBENCH_GEMV": "0", "GRAPHBENCH_PDL": "0"}
    assert list(changed_switches(environ)) == ["GRAPHBENCH_GEMV", "GRAPHBENCH_PDL"]
    assert changed_switches({}) == {}
    assert switch_value("GRAPHBENCH_DECODE_MIN_TILES", {}) == "1"
    with pytest.raises(KeyError):
        switch_value("GRAPHBENCH_CACHE_ROOT")  # not a switch


def test_changed_switches_reads_the_process_environment(monkeypatch):
    monkeypatch.setenv("GRAPHBENCH_GEMV", "0")
    monkeypatch.setenv("GRAPHBENCH_PDL", "1")  # its default
    assert changed_switches() == {"GRAPHBENCH_GEMV": "0"}


def test_every_graphbench_variable_in_the_code_is_registered_or_known_not_to_be_a_switch():
    found = set()
    for path in (ROOT / "src" / "graphbench").rglob("*.py"):
        found |= set(re.findall(r'"(GRAPHBENCH_[A-Z_]+)"', path.read_text()))
    assert found - NOT_SWITCHES == set(SWITCH_DEFAULTS)


def test_the_readme_documents_every_switch_with_its_default():
    rows = re.findall(r"^\| `(GRAPHBENCH_[A-Z_]+)` \| `([^`]*)` \|", (ROOT / "docs" / "DEVELOPING.md").read_text(), re.M)
    documented = {name: default for name, default in rows if name not in NOT_SWITCHES}
    assert documented == SWITCH_DEFAULTS


def test_the_environment_line_lists_changed_switches_and_says_when_not_all_results_had_them():
    same = {"device": "cpu", "torch": "2.13.0", "switches": {"GRAPHBENCH_PDL": "0", "GRAPHBENCH_GEMV": "0"}}
    assert environment_line([{"environment": same}, {"environment": same}]) == (
        "device cpu | torch 2.13.0 | switches GRAPHBENCH_GEMV=0 GRAPHBENCH_PDL=0")
    line = environment_line([{"environment": same}, {"environment": {"device": "cpu", "torch": "2.13.0"}}])
    assert line == "device cpu | torch 2.13.0 | switches GRAPHBENCH_GEMV=0 GRAPHBENCH_PDL=0 (not in every result)"
    assert environment_line([{"environment": {"device": "cpu", "switches": {}}}]) == "device cpu"
