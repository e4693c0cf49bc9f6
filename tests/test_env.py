"""graphbench.env: the one module that reads the environment, each value checked where it is read."""

import pytest

from graphbench import env
from graphbench.errors import GraphbenchError
from graphbench.switches import switch_value


def test_the_cache_root_defaults_and_expands(monkeypatch, tmp_path):
    monkeypatch.delenv("GRAPHBENCH_CACHE_ROOT", raising=False)
    assert env.cache_root() == (env.Path.home() / ".cache" / "graphbench")
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(tmp_path / "c"))
    assert env.cache_root() == tmp_path / "c"


@pytest.mark.parametrize("value, said", [("", "set but empty"), ("   ", "set but empty"),
                                         ("~no_such_user_xq/cache", "~no_such_user_xq is not a user")])
def test_a_cache_root_that_cannot_be_used_is_one_line(monkeypatch, value, said):
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", value)
    with pytest.raises(GraphbenchError, match=said):
        env.cache_root()


@pytest.mark.parametrize("name, value", [("GRAPHBENCH_GEMV", "banana"), ("GRAPHBENCH_PDL", "yes"),
                                         ("GRAPHBENCH_PDL", ""), ("GRAPHBENCH_DECODE_MIN_TILES", "0"),
                                         ("GRAPHBENCH_DECODE_MIN_TILES", "two")])
def test_a_switch_value_it_does_not_accept_is_an_error_naming_it(name, value):
    with pytest.raises(GraphbenchError, match=f"{name}={value!r}: expected"):
        switch_value(name, {name: value})


def test_accepted_switch_values_and_defaults():
    assert switch_value("GRAPHBENCH_PDL", {}) == "1" and switch_value("GRAPHBENCH_PDL", {"GRAPHBENCH_PDL": "0"}) == "0"
    assert switch_value("GRAPHBENCH_DECODE_MIN_TILES", {"GRAPHBENCH_DECODE_MIN_TILES": "4"}) == "4"


def test_flags_other_programs_set(monkeypatch):
    for value, on in (("1", True), ("0", False), ("", False)):
        monkeypatch.setenv("TRITON_INTERPRET", value)
        assert env.flag("TRITON_INTERPRET") is on
    monkeypatch.delenv("TRITON_INTERPRET")
    assert env.flag("TRITON_INTERPRET") is False
