"""The debug hatches (graphbench.env.DEBUG_HATCHES): what results record, and that the code, the registry
and docs/DEVELOPING.md agree."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from graphbench import env
from graphbench.errors import GraphbenchError
from graphbench.reports.frame import environment_line

ROOT = Path(__file__).resolve().parents[1]
# GRAPHBENCH_* names that are not debug hatches: a place, a test hook, a flag of TP worker processes
NOT_HATCHES = {"GRAPHBENCH_CACHE_ROOT", "GRAPHBENCH_INJECT_FAULT", "GRAPHBENCH_TP_WORKER"}


def test_hatches_set_are_those_off_their_default_sorted(monkeypatch):
    environ = {"GRAPHBENCH_PDL": "0", "GRAPHBENCH_DIRECT_LAUNCH": "1", "GRAPHBENCH_CACHE_ROOT": "/tmp/x",
               "GRAPHBENCH_CHECK_GRAPH_INPUTS": "1", "GRAPHBENCH_NOT_A_HATCH": "1", "PATH": "/bin"}
    assert env.hatches_set(environ) == {"GRAPHBENCH_CHECK_GRAPH_INPUTS": "1", "GRAPHBENCH_PDL": "0"}
    assert list(env.hatches_set(environ)) == ["GRAPHBENCH_CHECK_GRAPH_INPUTS", "GRAPHBENCH_PDL"]
    assert env.hatches_set({}) == {}
    monkeypatch.setenv("GRAPHBENCH_PDL", "1")  # its default: nothing set
    monkeypatch.setenv("GRAPHBENCH_TRITON_KEY_CACHE", "0")
    assert env.hatches_set() == {"GRAPHBENCH_TRITON_KEY_CACHE": "0"}
    with pytest.raises(KeyError):
        env.hatch("GRAPHBENCH_CACHE_ROOT")  # not a hatch


@pytest.mark.parametrize("name, value", [("GRAPHBENCH_PDL", "yes"), ("GRAPHBENCH_PDL", ""),
                                         ("GRAPHBENCH_DIRECT_LAUNCH", "banana"), ("GRAPHBENCH_CHECK_GRAPH_INPUTS", "2")])
def test_a_hatch_value_it_does_not_accept_is_an_error_naming_it(name, value):
    with pytest.raises(GraphbenchError, match=f"{name}={value!r}: expected 0 or 1"):
        env.hatch(name, {name: value})


def test_no_module_reads_a_hatch_at_import():
    """Every env.hatch call is inside a function: none runs when a module is imported."""
    for path in (ROOT / "src" / "graphbench").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:  # module-level statements (a def's or class's body is not run at import)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Call) and getattr(inner.func, "attr", None) in ("hatch", "hatches_set"):
                    pytest.fail(f"{path.relative_to(ROOT)}:{inner.lineno} reads a hatch at import")


def test_every_graphbench_variable_in_the_code_is_a_hatch_or_known_not_to_be_one():
    found = set()
    for path in (ROOT / "src" / "graphbench").rglob("*.py"):
        found |= set(re.findall(r'"(GRAPHBENCH_[A-Z_]+)"', path.read_text()))
    assert found - NOT_HATCHES == set(env.DEBUG_HATCHES)


def test_developing_documents_every_variable_with_its_default_and_no_more_than_six():
    rows = re.findall(r"^\| `(GRAPHBENCH_[A-Z_]+)` \| `([^`]*)` \|", (ROOT / "docs" / "DEVELOPING.md").read_text(), re.M)
    documented = dict(rows)
    assert {k: v for k, v in documented.items() if k not in NOT_HATCHES} == env.DEBUG_HATCHES
    assert len(documented) <= 6 and "GRAPHBENCH_CACHE_ROOT" in documented


def test_the_environment_line_lists_the_hatches_set_and_says_when_not_all_results_had_them():
    same = {"device": "cpu", "torch": "2.13.0", "switches": {"GRAPHBENCH_PDL": "0", "GRAPHBENCH_DIRECT_LAUNCH": "0"}}
    assert environment_line([{"environment": same}, {"environment": same}]) == (
        "device cpu | torch 2.13.0 | debug hatches GRAPHBENCH_DIRECT_LAUNCH=0 GRAPHBENCH_PDL=0")
    line = environment_line([{"environment": same}, {"environment": {"device": "cpu", "torch": "2.13.0"}}])
    assert line == ("device cpu | torch 2.13.0 | debug hatches GRAPHBENCH_DIRECT_LAUNCH=0 GRAPHBENCH_PDL=0 "
                    "(not in every result)")
    assert environment_line([{"environment": {"device": "cpu", "switches": {}}}]) == "device cpu"
